"""Scheduler state shared by every sync in the server: one batched query per cluster and TTL.

Per pool key (host, port and credential set) the cache keeps the attempts that syncs asked
about. A lookup answers from the last snapshot while it is younger than ``ttl`` seconds; else
one caller (the leader) runs the backend's batched ``query`` for every tracked attempt —
one squeue or condor_q for all of them, plus the accounting or history for those that left
the queue — and the callers that arrive meanwhile wait for that one refresh. A hit on a
snapshot older than ``REFRESH_AHEAD`` of the TTL starts that refresh in the background, so
that on a busy cluster the refresh usually lands before anyone has to wait for it. The queue
listing of a refresh covers every job of ours, so the snapshot also answers attempts nobody has
asked about yet (after a restart of the hook server, say). A caller whose attempt is not in the
refresh under way (it arrived after the refresh began) waits for that refresh too, and asks for
its attempt alone only if the listing did not show it, rather than wait for a second refresh.
Attempts not looked up for ``forget`` seconds drop out of the batch.

A refresh that failed (the cluster or its scheduler did not answer) is remembered for ``ttl``
seconds, and while the next one is under way: lookups that the snapshot cannot answer get its
error at once, as a failed connect is remembered by the pool, instead of each waiting its full
command timeout for a controller that is down. One caller a TTL tries again.

The cache opens its connection itself, through the opener the caller hands in (the scheduler's
transport's), only when it has to ask the cluster: a hit touches no connection, and a refresh
in the background goes through the transport's handling of broken connections like any other
command.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from hooks.core.values.job import JobRef
from hooks.core.values.phases import TaskState
from hooks.deadline import Deadline, DeadlineExceeded
from hooks.metrics import Metrics

Clock = Callable[[], float]
Opener = Callable[[Deadline], AbstractContextManager[Any]]
"""Opens the cluster's shared connection for one query (the scheduler's transport's ``open``
with the route and logins bound)."""


class Queried(Protocol):
    """What the cache needs of a scheduler (``hooks.schedulers.base.Scheduler`` has it)."""

    name: str

    def job_id(self, task_id: str) -> str: ...

    def query(
        self, conn: Any, refs: Sequence[JobRef], *, deadline: Deadline,
        whole_queue: bool = True,
    ) -> Mapping[str, Sequence[TaskState]]: ...
REFRESH_AHEAD = 0.6
"""Fraction of the TTL after which a hit also starts a refresh in the background, so that the
syncs of a busy cluster rarely wait for one."""


@dataclass
class _Refresh:
    refs: tuple[JobRef, ...]
    """The attempts asked about, as they were tracked when the refresh began."""
    keys: frozenset[str]
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None


@dataclass
class _Entry:
    tracked: dict[str, tuple[JobRef, float]] = field(default_factory=dict)
    snapshot: Mapping[str, Sequence[TaskState]] = field(default_factory=dict)
    asked: frozenset[str] = frozenset()
    """The attempts the snapshot's query was asked about; it holds others as listed only."""
    taken_at: float = float("-inf")
    refresh: _Refresh | None = None
    failure: BaseException | None = None
    """The error of the last refresh, if it failed; cleared by one that succeeds."""
    failed_at: float = float("-inf")

    def failed(self, now: float, ttl: float) -> BaseException | None:
        """The last refresh's error while it stands: for ``ttl`` seconds, and while the
        refresh that tries again is under way."""
        recent = now - self.failed_at < ttl or self.refresh is not None
        return self.failure if recent else None

    def answer(self, scheduler: Queried, ref: JobRef) -> Sequence[TaskState] | None:
        """The snapshot's answer for ``ref``, if it has one it can stand behind.

        An attempt that was only listed is served while every task of its recorded job is
        active: a finished task needs the accounting (exit code, final state) that only an
        asked-about attempt gets, and the listing does not check the recorded job id.
        """
        tasks = self.snapshot.get(ref.key)
        if tasks is None or ref.key in self.asked:
            return tasks
        mine = [t for t in tasks if not ref.job_id or scheduler.job_id(t.task_id) == ref.job_id]
        return mine if mine and all(t.outcome.is_active for t in mine) else None


class StatusCache:
    def __init__(self, metrics: Metrics, *, ttl: float = 5.0, forget: float = 600.0,
                 clock: Clock = time.monotonic) -> None:
        self.ttl = ttl
        self.forget = forget
        self.clock = clock
        self._metrics = metrics
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()

    def lookup(
        self, pool_key: str, scheduler: Queried, opener: Opener, ref: JobRef, *,
        deadline: Deadline,
    ) -> Sequence[TaskState]:
        """The attempt's tasks as of at most ``ttl`` seconds ago."""
        with self._lock:
            entry = self._entries.setdefault(f"{scheduler.name}:{pool_key}", _Entry())
            now = self.clock()
            entry.tracked[ref.key] = (ref, now)
            age = now - entry.taken_at
            answer = entry.answer(scheduler, ref) if age < self.ttl else None
            if answer is not None:
                self._metrics.cache_lookup("hit")
                if age > self.ttl * REFRESH_AHEAD and entry.refresh is None:
                    ahead = entry.refresh = self._start(entry, now)
                    threading.Thread(target=self._refresh, daemon=True,
                                     args=(entry, ahead, scheduler, opener, deadline)).start()
                return answer
            failure = entry.failed(now, self.ttl)
            if failure is not None:
                self._metrics.cache_lookup("failed")
                raise failure.with_traceback(None)
            refresh = entry.refresh
            leader = refresh is None
            if refresh is None:
                refresh = entry.refresh = self._start(entry, now)
        if leader:
            return self._lead(entry, refresh, scheduler, opener, ref, deadline)
        return self._join(entry, refresh, scheduler, opener, ref, deadline)

    def _join(
        self, entry: _Entry, refresh: _Refresh, scheduler: Queried, opener: Opener,
        ref: JobRef, deadline: Deadline,
    ) -> Sequence[TaskState]:
        """Wait for the refresh under way; ask for the attempt alone if it cannot answer."""
        if ref.key in refresh.keys:
            self._metrics.cache_lookup("wait")
            finished = refresh.done.wait(deadline.left())
            with self._lock:
                if refresh.error is not None:
                    raise refresh.error
                if not finished or ref.key not in entry.snapshot:
                    raise DeadlineExceeded("the shared status refresh did not finish")
                return entry.snapshot[ref.key]
        # Not in the refresh under way: its listing may still show the attempt. Half the time
        # is kept for asking about the attempt alone if it does not.
        if refresh.done.wait(deadline.left() / 2) and refresh.error is None:
            with self._lock:
                answer = entry.answer(scheduler, ref)
            if answer is not None:
                self._metrics.cache_lookup("wait")
                return answer
        self._metrics.cache_lookup("single")
        with opener(deadline) as conn:
            found = scheduler.query(conn, [ref], deadline=deadline, whole_queue=False)
        return found.get(ref.key, ())

    def track(self, pool_key: str, scheduler: Queried, ref: JobRef) -> None:
        """Include an attempt in the next refresh (it was just submitted)."""
        with self._lock:
            entry = self._entries.setdefault(f"{scheduler.name}:{pool_key}", _Entry())
            entry.tracked[ref.key] = (ref, self.clock())

    def drop(self, pool_key: str, scheduler: Queried, key: str) -> None:
        """Stop tracking an attempt (it finished, or its BatchJob is gone)."""
        name = f"{scheduler.name}:{pool_key}"
        with self._lock:
            entry = self._entries.get(name)
            if entry is not None:
                entry.tracked.pop(key, None)
                if not entry.tracked and entry.refresh is None:
                    del self._entries[name]

    def evict_idle(self) -> int:
        """Drop the clusters and credential sets whose attempts nobody looked up for
        ``forget`` seconds (a rotated Secret's, say); how many were dropped."""
        with self._lock:
            return self._evict(None, self.clock())

    def __len__(self) -> int:
        return len(self._entries)

    def _evict(self, keep: _Entry | None, now: float) -> int:
        idle = [name for name, other in self._entries.items()
                if other is not keep and other.refresh is None
                and all(now - seen > self.forget for _, seen in other.tracked.values())]
        for name in idle:
            del self._entries[name]
        return len(idle)

    def _start(self, entry: _Entry, now: float) -> _Refresh:
        """A refresh of ``entry``'s attempts; attempts and pool keys not looked up for
        ``forget`` seconds are dropped on the way."""
        self._evict(entry, now)
        stale = [key for key, (_, seen) in entry.tracked.items() if now - seen > self.forget]
        for key in stale:
            del entry.tracked[key]
        refs = tuple(ref for ref, _ in entry.tracked.values())
        return _Refresh(refs, frozenset(ref.key for ref in refs))

    def _lead(
        self, entry: _Entry, refresh: _Refresh, scheduler: Queried, opener: Opener,
        ref: JobRef, deadline: Deadline,
    ) -> Sequence[TaskState]:
        self._metrics.cache_lookup("miss")
        self._refresh(entry, refresh, scheduler, opener, deadline)
        if refresh.error is not None:
            raise refresh.error
        with self._lock:
            return entry.snapshot[ref.key]

    def _refresh(
        self, entry: _Entry, refresh: _Refresh, scheduler: Queried, opener: Opener,
        deadline: Deadline,
    ) -> None:
        """Run one batched query for the refresh's attempts and publish the snapshot."""
        started = self.clock()
        refs = refresh.refs
        try:
            with opener(deadline) as conn:
                found = scheduler.query(conn, refs, deadline=deadline)
        except Exception as err:  # handed to the waiters, who report it, and remembered
            refresh.error = err
            with self._lock:
                entry.failure, entry.failed_at = err, self.clock()
        else:
            snapshot = dict(found)
            for r in refs:
                snapshot.setdefault(r.key, ())
            with self._lock:
                entry.snapshot = snapshot
                entry.asked = frozenset(r.key for r in refs)
                entry.taken_at = started
                entry.failure = None
        finally:
            with self._lock:
                entry.refresh = None
            refresh.done.set()
