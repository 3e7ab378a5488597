"""Answers to Metacontroller: the envelope per controller shape, and resyncAfterSeconds (0 when
finished, short and backing off while active, jittered per BatchJob but deterministic)."""

from __future__ import annotations

import datetime

import pytest

from hooks.core.status.record import Status
from hooks.core.values.phases import Phase
from hooks.core.values.reasons import Reason
from hooks.core.wire import response
from hooks.core.wire.request import Shape
from hooks.core.wire.response import (
    MAX_BACKOFF,
    MAX_POLL,
    MIN_POLL,
    QUEUED_MAX_POLL,
    envelope,
    resync_after,
)

NOW = datetime.datetime(2026, 11, 22, 12, 0, 0, tzinfo=datetime.UTC)
UIDS = [f"00000000-0000-4000-8000-{n:012d}" for n in range(300)]

ACTIVE = Status(phase=Phase.RUNNING, job_ids=("4242",), attempt=1, reachable=True)
PENDING = Status(job_ids=("4242",), attempt=1, reachable=True)
UNREACHABLE = Status(phase=Phase.RUNNING, reason=Reason.CLUSTER_UNREACHABLE, job_ids=("4242",),
                     attempt=1, reachable=False, reachability_reason="ClusterUnreachable")


def since(seconds: float, *kinds: str, status: str = "True") -> dict[str, list[dict[str, str]]]:
    """A previous status whose conditions ``kinds`` last flipped ``seconds`` before NOW."""
    stamp = response.format_time(NOW - datetime.timedelta(seconds=seconds))
    return {"conditions": [{"type": kind, "status": status, "lastTransitionTime": stamp}
                           for kind in kinds]}


def jitter(uid: str) -> float:
    return resync_after(Status(reason=Reason.SECRET_NOT_FOUND), previous=None, uid=uid,
                        now=NOW) / response.SLOW_POLL


@pytest.mark.parametrize(
    "status",
    [
        pytest.param(Status(phase=Phase.SUCCEEDED, job_ids=("1",), attempt=1, reachable=True),
                     id="succeeded"),
        pytest.param(Status(phase=Phase.FAILED, reason=Reason.NON_ZERO_EXIT_CODE,
                            job_ids=("1",), attempt=1, reachable=True), id="failed"),
        pytest.param(Status(phase=Phase.CANCELLED, reason=Reason.DELETED, job_ids=("1",),
                            attempt=1, reachable=True), id="cancelled"),
        pytest.param(Status(phase=Phase.FAILED, reason=Reason.INVALID_SPEC), id="invalid-spec"),
        pytest.param(Status(phase=Phase.FAILED, reason=Reason.SUBMIT_FAILED, attempt=1,
                            reachable=True), id="refused"),
    ],
)
def test_finished_is_not_polled(status: Status) -> None:
    for uid in UIDS[:20]:
        assert resync_after(status, previous=since(9999, "Running"), uid=uid, now=NOW) == 0


@pytest.mark.parametrize(
    ("status", "quiet"),
    [
        pytest.param(status, quiet, id=f"{name}-{quiet}s")
        for name, status in (("running", ACTIVE), ("pending", PENDING))
        for quiet in (0, 60, 3600)
    ],
)
def test_active_is_polled_within_the_jittered_maximum(status: Status, quiet: float) -> None:
    for uid in UIDS:
        seconds = resync_after(status, previous=since(quiet, "Submitted", "Running"), uid=uid,
                               now=NOW)
        longest = MAX_POLL if status.phase is Phase.RUNNING else QUEUED_MAX_POLL
        assert MIN_POLL * 0.75 - 0.05 <= seconds <= longest


def test_active_is_polled_at_least_every_10_seconds() -> None:
    """A job's end shows within 10 s and the shared answer's age of the scheduler seeing it."""
    worst = max(resync_after(ACTIVE, previous=since(3600, "Submitted", "Running"), uid=uid,
                             now=NOW) for uid in UIDS)
    assert worst <= 10


def test_a_queued_job_is_polled_at_least_every_30_seconds() -> None:
    """Most of a large sweep waits in the queue: it costs the API server a third of the reads
    that running jobs do, and its start shows within 30 s and the shared answer's age."""
    waits = [resync_after(PENDING, previous=since(quiet, "Submitted", "Running"), uid=uid, now=NOW)
             for quiet in (600, 3600) for uid in UIDS]
    assert max(waits) <= QUEUED_MAX_POLL
    assert min(waits) >= QUEUED_MAX_POLL * 0.75 - 0.05


@pytest.mark.parametrize("floor", [1.0, 5.0, 8.0])
def test_a_fresh_job_is_polled_as_often_as_its_clusters_answer_is_renewed(floor: float) -> None:
    """Sooner, a sync would read the same shared answer and change nothing."""
    for uid in UIDS:
        seconds = resync_after(ACTIVE, previous=since(0, "Submitted", "Running"), uid=uid,
                               now=NOW, floor=floor)
        assert max(MIN_POLL, floor) * 0.75 - 0.05 <= seconds <= max(MIN_POLL, floor)


def test_a_shared_answer_older_than_the_longest_interval_sets_the_interval() -> None:
    seconds = resync_after(ACTIVE, previous=since(3600, "Submitted", "Running"), uid=UIDS[0],
                           now=NOW, floor=2 * MAX_POLL)
    assert 2 * MAX_POLL * 0.75 <= seconds <= 2 * MAX_POLL


def test_active_polling_grows_while_nothing_changes() -> None:
    uid = UIDS[0]
    waits = [resync_after(ACTIVE, previous=since(quiet, "Submitted", "Running"), uid=uid,
                          now=NOW) for quiet in (0, 10, 30, 60, 120, 300, 3600)]
    assert waits == sorted(waits)
    assert waits[0] < waits[-1]


def test_a_fresh_transition_polls_fast_again() -> None:
    uid = UIDS[0]
    quiet = resync_after(ACTIVE, previous=since(3600, "Submitted", "Running"), uid=uid, now=NOW)
    previous = since(3600, "Submitted")
    previous["conditions"] += since(1, "Running")["conditions"]
    fresh = resync_after(ACTIVE, previous=previous, uid=uid, now=NOW)
    assert fresh < quiet


def test_submitting_polls_fast() -> None:
    status = Status(reason=Reason.SUBMITTING, attempt=1, reachable=True)
    for uid in UIDS[:20]:
        assert resync_after(status, previous=since(600, "Submitted"), uid=uid, now=NOW) <= 2.5


def test_unreachable_backs_off_and_is_capped() -> None:
    uid = UIDS[0]
    waits = [
        resync_after(UNREACHABLE, previous=since(quiet, "ClusterReachable", status="False"),
                     uid=uid, now=NOW)
        for quiet in (0, 10, 60, 120, 600, 3600)
    ]
    assert waits == sorted(waits)
    assert waits[0] < waits[-1] <= MAX_BACKOFF


def test_first_unreachable_sync_retries_soon() -> None:
    previous = since(3600, "Submitted", "Running", "ClusterReachable")
    assert resync_after(UNREACHABLE, previous=previous, uid=UIDS[0], now=NOW) <= 10


def test_jitter_is_deterministic_per_uid() -> None:
    assert [jitter(uid) for uid in UIDS[:50]] == [jitter(uid) for uid in UIDS[:50]]


def test_jitter_is_within_25_percent_below_and_spread() -> None:
    factors = [jitter(uid) for uid in UIDS]
    assert all(0.75 - 0.001 <= f <= 1.0 for f in factors)
    assert min(factors) < 0.8 and max(factors) > 0.95
    assert len({round(f, 2) for f in factors}) > 20


def test_same_inputs_same_answer() -> None:
    previous = since(42, "Submitted", "Running")
    first = resync_after(ACTIVE, previous=previous, uid=UIDS[1], now=NOW)
    assert resync_after(ACTIVE, previous=previous, uid=UIDS[1], now=NOW) == first


@pytest.mark.parametrize(
    ("shape", "key"),
    [pytest.param("composite", "children", id="composite"),
     pytest.param("decorator", "attachments", id="decorator")],
)
def test_envelope(shape: Shape, key: str) -> None:
    body = envelope(shape, status={"phase": "Running"}, children=[{"kind": "Pod"}], resync=5.5)
    assert body == {"status": {"phase": "Running"}, key: [{"kind": "Pod"}],
                    "resyncAfterSeconds": 5.5}


def test_envelope_without_resync_and_with_finalized() -> None:
    body = envelope("composite", status={}, children=[], resync=0, finalized=True)
    assert body == {"status": {}, "children": [], "finalized": True}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("2026-11-22T12:00:00Z", NOW, id="rfc3339"),
        pytest.param("2026-11-22T12:00:00", None, id="no-zone"),
        pytest.param("yesterday", None, id="word"),
        pytest.param(None, None, id="none"),
        pytest.param(17, None, id="number"),
    ],
)
def test_parse_time(text: object, expected: datetime.datetime | None) -> None:
    assert response.parse_time(text) == expected


def test_format_time_is_utc() -> None:
    local = NOW.astimezone(datetime.timezone(datetime.timedelta(hours=2)))
    assert response.format_time(local) == "2026-11-22T12:00:00Z"


def test_a_finished_attempt_whose_successor_is_due_comes_back_at_once() -> None:
    done = Status(phase=Phase.SUCCEEDED, job_ids=("1",), attempt=1, reachable=True)
    assert resync_after(done, previous=None, uid=UIDS[0], now=NOW) == 0
    assert 0 < resync_after(done, previous=None, uid=UIDS[0], now=NOW,
                            next_attempt_due=True) <= MIN_POLL
