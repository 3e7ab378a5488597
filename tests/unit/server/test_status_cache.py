"""The shared status cache: single-flight refreshes, the TTL, and per-pool-key isolation."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

from hooks.core.values.job import JobRef
from hooks.core.values.phases import Outcome, TaskState
from hooks.deadline import Deadline
from hooks.metrics import Metrics
from hooks.ssh.client import Remote
from hooks.status_cache import StatusCache
from tests.unit.conftest import FakeConnection


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class CountingBackend:
    """A backend whose query answers every ref as running, counting and optionally pausing."""

    name = "fake"

    def __init__(self, pause: float = 0.0) -> None:
        self.calls: list[list[str]] = []
        self.timeouts: list[float] = []
        self.pause = pause
        self.lock = threading.Lock()

    def query(
        self, conn: Remote, refs: Sequence[JobRef], *, deadline: Deadline,
        whole_queue: bool = True,
    ) -> Mapping[str, Sequence[TaskState]]:
        with self.lock:
            self.calls.append(sorted(ref.key for ref in refs))
            self.timeouts.append(deadline.left())
        time.sleep(self.pause)
        return {ref.key: [TaskState(ref.job_id or "?", Outcome.RUNNING)] for ref in refs}

    def job_id(self, task_id: str) -> str:
        return task_id.split(".", 1)[0]


def ref(key: str) -> JobRef:
    return JobRef(key, key.upper())


def lookup(cache: StatusCache, backend: CountingBackend, key: str,
           pool: str = "pool") -> Sequence[TaskState]:
    return cache.lookup(pool, backend, opener, ref(key), deadline=Deadline.after(5))


@contextmanager
def opener(deadline: Deadline) -> Iterator[Remote]:
    yield FakeConnection()


def new_cache(**kwargs: Any) -> StatusCache:
    return StatusCache(Metrics(), **kwargs)


def while_refreshing(
    cache: StatusCache, backend: CountingBackend, call: Callable[[], Sequence[TaskState]]
) -> Sequence[TaskState]:
    """``call``'s answer, made while a refresh for attempt "a" is under way."""
    cache.track("pool", backend, ref("a"))
    leader = threading.Thread(target=lookup, args=(cache, backend, "a"))
    leader.start()
    time.sleep(0.1)
    try:
        return call()
    finally:
        leader.join()


def test_concurrent_misses_run_one_query() -> None:
    cache, backend = new_cache(ttl=5), CountingBackend(pause=0.2)
    for key in "abcdefgh":
        cache.track("pool", backend, ref(key))
    results: dict[str, Sequence[TaskState]] = {}
    threads = [threading.Thread(target=lambda k=k: results.update({k: lookup(cache, backend, k)}))
               for k in "abcdefgh" * 6]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert backend.calls == [list("abcdefgh")]
    assert all(results[k][0].task_id == k.upper() for k in "abcdefgh")


def test_answers_are_never_older_than_the_ttl() -> None:
    clock = Clock()
    cache, backend = new_cache(ttl=5, clock=clock), CountingBackend()
    lookup(cache, backend, "a")
    clock.now += 2.9  # before the refresh-ahead point (0.6 of the TTL): a plain hit
    lookup(cache, backend, "a")
    assert len(backend.calls) == 1
    clock.now += 2.1  # the snapshot is now as old as the TTL: this lookup waits for a query
    lookup(cache, backend, "a")
    assert len(backend.calls) == 2


def test_one_refresh_answers_every_tracked_attempt() -> None:
    clock = Clock()
    cache, backend = new_cache(ttl=5, clock=clock), CountingBackend()
    for key in "abc":
        lookup(cache, backend, key)
    clock.now += 10
    for key in "abc":
        lookup(cache, backend, key)
    assert backend.calls[-1] == ["a", "b", "c"]
    assert len(backend.calls) == 4  # three first lookups, then one refresh for all


def test_an_attempt_arriving_during_a_refresh_waits_for_no_second_refresh() -> None:
    cache, backend = new_cache(ttl=5), CountingBackend(pause=0.3)
    late = while_refreshing(cache, backend, lambda: lookup(cache, backend, "late"))
    assert late[0].task_id == "LATE"
    assert sorted(map(tuple, backend.calls)) == [("a",), ("late",)]


class ListingBackend(CountingBackend):
    """Its queue listing also shows attempts it was not asked about, like squeue or condor_q
    of every job of ours."""

    def __init__(self, listed: str, pause: float = 0.0,
                 tasks: Callable[[str], list[TaskState]] | None = None) -> None:
        super().__init__(pause)
        self.listed = listed
        self.tasks = tasks or (lambda key: [TaskState(key.upper(), Outcome.PENDING)])

    def query(
        self, conn: Remote, refs: Sequence[JobRef], *, deadline: Deadline,
        whole_queue: bool = True,
    ) -> Mapping[str, Sequence[TaskState]]:
        found = dict(super().query(conn, refs, deadline=deadline))
        for key in self.listed if whole_queue else ():
            found.setdefault(key, self.tasks(key))
        return found


def test_an_attempt_arriving_during_a_refresh_that_lists_it_runs_no_query_of_its_own() -> None:
    cache, backend = new_cache(ttl=5), ListingBackend("bcd", pause=0.3)
    late = while_refreshing(cache, backend, lambda: lookup(cache, backend, "b"))
    assert [(t.task_id, t.outcome) for t in late] == [("B", Outcome.PENDING)]
    assert backend.calls == [["a"]]


def test_after_a_restart_one_refresh_answers_every_listed_attempt() -> None:
    clock = Clock()
    cache, backend = new_cache(ttl=5, clock=clock), ListingBackend("bcdefgh")
    for key in "abcdefgh":
        assert lookup(cache, backend, key)[0].task_id == key.upper()
    assert backend.calls == [["a"]]
    clock.now += 5
    lookup(cache, backend, "c")
    assert backend.calls[-1] == list("abcdefgh")  # all asked about since: tracked now


@pytest.mark.parametrize(
    "listed",
    [
        pytest.param([TaskState("B", Outcome.SUCCEEDED)], id="finished-needs-the-accounting"),
        pytest.param([TaskState("B.0", Outcome.RUNNING), TaskState("B.1", Outcome.FAILED)],
                     id="one-task-finished"),
        pytest.param([TaskState("OTHER.0", Outcome.RUNNING)], id="another-job-with-its-key"),
    ],
)
def test_an_attempt_only_listed_is_asked_about_alone_unless_its_job_is_active(
    listed: list[TaskState],
) -> None:
    clock = Clock()
    cache, backend = new_cache(ttl=5, clock=clock), ListingBackend("b", tasks=lambda _: listed)
    lookup(cache, backend, "a")
    assert [t.task_id for t in lookup(cache, backend, "b")] == ["B"]  # asked about, this time
    assert backend.calls == [["a"], ["a", "b"]]


def test_an_attempt_only_listed_is_served_the_tasks_of_its_recorded_job() -> None:
    tasks = [TaskState("B.0", Outcome.RUNNING), TaskState("OTHER.0", Outcome.RUNNING)]
    cache, backend = new_cache(ttl=5), ListingBackend("b", tasks=lambda _: tasks)
    lookup(cache, backend, "a")
    assert [t.task_id for t in lookup(cache, backend, "b")] == ["B.0"]
    assert backend.calls == [["a"]]


def test_a_late_attempt_keeps_half_the_time_for_its_own_query() -> None:
    cache, backend = new_cache(ttl=5), CountingBackend(pause=0.8)
    late = while_refreshing(cache, backend, lambda: cache.lookup(
        "pool", backend, opener, ref("late"), deadline=Deadline.after(1.0)))
    assert late[0].task_id == "LATE"
    assert backend.calls[1] == ["late"]
    assert 0.4 < backend.timeouts[1] <= 0.5


def test_pool_keys_out_of_use_are_forgotten() -> None:
    clock = Clock()
    cache, backend = new_cache(ttl=5, forget=60, clock=clock), CountingBackend()
    lookup(cache, backend, "a", pool="rotated")
    lookup(cache, backend, "b", pool="done")
    cache.drop("done", backend, "b")
    assert len(cache._entries) == 1  # the last attempt of a pool key dropped: the key goes
    clock.now += 61
    lookup(cache, backend, "c", pool="current")
    assert list(cache._entries) == ["fake:current"]  # nothing looked up there for `forget` s


def test_different_pool_keys_never_share_answers() -> None:
    cache, backend = new_cache(ttl=5), CountingBackend()
    lookup(cache, backend, "a", pool="one")
    lookup(cache, backend, "a", pool="two")
    assert len(backend.calls) == 2


def test_forgotten_and_dropped_attempts_leave_the_batch() -> None:
    clock = Clock()
    cache, backend = new_cache(ttl=5, forget=60, clock=clock), CountingBackend()
    lookup(cache, backend, "old")
    lookup(cache, backend, "done")
    cache.drop("pool", backend, "done")
    clock.now += 61
    lookup(cache, backend, "new")
    assert backend.calls[-1] == ["new"]


class Failing(CountingBackend):
    """A backend whose first ``failures`` queries fail; the rest answer."""

    def __init__(self, failures: int, pause: float = 0.0) -> None:
        super().__init__(pause)
        self.failures = failures

    def query(self, conn: Remote, refs: Sequence[JobRef], *, deadline: Deadline,
              whole_queue: bool = True) -> Mapping[str, Sequence[TaskState]]:
        super().query(conn, refs, deadline=deadline)
        if len(self.calls) <= self.failures:
            raise TimeoutError("squeue hung")
        return {r.key: [] for r in refs}


def test_a_failed_refresh_fails_its_waiters_and_the_next_call_after_the_ttl_retries() -> None:
    clock = Clock()
    cache, backend = new_cache(ttl=5, clock=clock), Failing(1, pause=0.1)
    with pytest.raises(TimeoutError):
        lookup(cache, backend, "a")
    clock.now += 5
    assert lookup(cache, backend, "a") == []
    assert len(backend.calls) == 2


def test_a_failed_refresh_answers_the_clusters_lookups_at_once_until_the_ttl() -> None:
    # During a controller outage every sync waited its full command timeout: the failure of
    # the shared refresh was not remembered, as a failed connect is.
    clock = Clock()
    metrics = Metrics()
    cache, backend = StatusCache(metrics, ttl=5, clock=clock), Failing(2)
    with pytest.raises(TimeoutError):
        lookup(cache, backend, "a")
    for key in "abcab":
        clock.now += 0.9
        with pytest.raises(TimeoutError, match="squeue hung"):
            lookup(cache, backend, key)
    assert len(backend.calls) == 1
    assert metrics.registry.get_sample_value(
        "hpcbridge_status_cache_total", {"result": "failed"}) == 5
    with pytest.raises(TimeoutError):
        lookup(cache, backend, "a", pool="other")  # another cluster's refresh is its own
    clock.now += 1  # the TTL has passed: one lookup tries again
    assert lookup(cache, backend, "b") == []
    assert lookup(cache, backend, "c") == []  # the same refresh answered it
    assert len(backend.calls) == 3


def test_while_a_failed_cluster_is_tried_again_other_lookups_answer_at_once() -> None:
    clock = Clock()
    retrying, gate = threading.Event(), threading.Event()

    class Retried(Failing):
        def query(self, conn: Remote, refs: Sequence[JobRef], *, deadline: Deadline,
                  whole_queue: bool = True) -> Mapping[str, Sequence[TaskState]]:
            if self.calls:
                retrying.set()
                gate.wait(10)
            return super().query(conn, refs, deadline=deadline)

    cache, backend = new_cache(ttl=5, clock=clock), Retried(1)
    with pytest.raises(TimeoutError):
        lookup(cache, backend, "a")
    clock.now += 5
    retry = threading.Thread(target=lookup, args=(cache, backend, "a"))
    retry.start()
    assert retrying.wait(10)
    try:
        with pytest.raises(TimeoutError, match="squeue hung"):  # not a wait for the retry
            lookup(cache, backend, "a")
    finally:
        gate.set()
        retry.join()
    assert lookup(cache, backend, "a") == []


def test_a_hit_late_in_the_ttl_refreshes_ahead_in_the_background() -> None:
    clock = Clock()
    cache, backend = new_cache(ttl=5, clock=clock), CountingBackend(pause=0.2)
    lookup(cache, backend, "a")
    clock.now += 3.5
    assert lookup(cache, backend, "a")[0].task_id == "A"
    for _ in range(50):
        if len(backend.calls) == 2 and cache._entries["fake:pool"].refresh is None:
            break
        time.sleep(0.02)
    assert len(backend.calls) == 2
    clock.now += 3
    lookup(cache, backend, "a")
    assert len(backend.calls) == 2  # the refresh ahead was taken at 3.5 s: still fresh


def test_a_waiter_whose_time_runs_out_gets_no_answer_older_than_the_ttl() -> None:
    clock = Clock()
    cache, backend = new_cache(ttl=5, clock=clock), CountingBackend()
    lookup(cache, backend, "a")
    clock.now += 10  # the snapshot is stale; the next refresh hangs past the waiter's time
    backend.pause = 0.5
    leader = threading.Thread(target=lookup, args=(cache, backend, "a"))
    leader.start()
    time.sleep(0.1)
    with pytest.raises(TimeoutError):
        cache.lookup("pool", backend, opener, ref("a"), deadline=Deadline.after(0.1))
    leader.join()


def test_a_refresh_in_the_background_opens_its_own_connection() -> None:
    clock = Clock()
    cache, backend = new_cache(ttl=5, clock=clock), CountingBackend()
    opened: list[str] = []

    @contextmanager
    def counting(deadline: Deadline) -> Iterator[Remote]:
        opened.append(threading.current_thread().name)
        yield FakeConnection()

    cache.lookup("pool", backend, counting, ref("a"), deadline=Deadline.after(5))
    clock.now += 3.5
    cache.lookup("pool", backend, counting, ref("a"), deadline=Deadline.after(5))
    for _ in range(50):
        if len(opened) == 2:
            break
        time.sleep(0.02)
    assert len(opened) == 2 and opened[1] != threading.current_thread().name


def test_idle_clusters_are_evicted() -> None:
    clock = Clock()
    cache, backend = new_cache(ttl=5, forget=60, clock=clock), CountingBackend()
    lookup(cache, backend, "a", pool="old")
    clock.now += 30
    lookup(cache, backend, "b", pool="current")
    clock.now += 31
    assert (cache.evict_idle(), len(cache)) == (1, 1)
