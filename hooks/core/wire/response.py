"""The parts of a response body: the envelope per controller shape (``children`` or
``attachments``), ``resyncAfterSeconds`` (backing off, jittered per BatchJob) and the wire form
of times; ``hooks.core.decide.answer`` puts them together.
"""

from __future__ import annotations

import datetime
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from hooks.core.status.record import Status, condition
from hooks.core.values.image import ImageRecord, pull_backoff
from hooks.core.values.phases import Phase
from hooks.core.values.reasons import CONNECTION_REASONS, Reason

MIN_POLL, MAX_POLL, QUEUED_MAX_POLL = 2.0, 10.0, 30.0
"""An active job is polled no more often than its cluster's shared answer is renewed (the
``floor``, at least ``MIN_POLL``) and, at the longest, every ``MAX_POLL`` seconds while it runs
(its end shows within that and the shared answer's age of the scheduler seeing it) and every
``QUEUED_MAX_POLL`` seconds while it waits in the queue: most of a large sweep waits, and each
sync costs the API server a read."""
QUIET_GROWTH = 20.0
"""Seconds of nothing changing that lengthen the interval by one second (while it runs)."""
QUEUED_QUIET_GROWTH = 10.0
"""The same while it waits in the queue."""
MAX_BACKOFF = 120.0
SLOW_POLL = 60.0
UNSENT_WAITS = frozenset({Reason.SUSPENDED, Reason.WAITING_FOR_DEPENDENCY})
"""Waits of an attempt not yet sent that a change of the objects they wait for ends: the
BatchJob itself (``spec.suspend``), or the BatchJobs it depends on, whose every change
Metacontroller follows with a sync. Polled slowly, only in case a change was missed."""


def envelope(
    shape: Literal["composite", "decorator"],
    *,
    status: Mapping[str, Any],
    children: Sequence[Mapping[str, Any]],
    resync: float,
    finalized: bool | None = None,
) -> dict[str, Any]:
    """The response body for a sync or finalize call."""
    body: dict[str, Any] = {
        "status": dict(status),
        "attachments" if shape == "decorator" else "children": list(children),
    }
    if resync > 0:
        body["resyncAfterSeconds"] = resync
    if finalized is not None:
        body["finalized"] = finalized
    return body


def _backoff_left(image: ImageRecord, now: datetime.datetime) -> float:
    """Seconds until the back-off of the image's last failed pull is over."""
    failed = parse_time(image.last_failure)
    waited = (now - failed).total_seconds() if failed is not None else 0.0
    return max(MIN_POLL, pull_backoff(image.pull_failures) - waited)


def resync_after(
    status: Status, *, previous: object, uid: str, now: datetime.datetime,
    next_attempt_due: bool = False, floor: float = MIN_POLL,
) -> float:
    """Seconds until the next sync; 0 for a finished BatchJob, which is not polled.

    A finished attempt whose successor is due (the spec changed) comes back at once.
    Active jobs are polled every ``floor`` seconds at first (the age at which the cluster's
    shared scheduler answer is renewed: a sync sooner would find nothing new) and less often
    the longer nothing changes, up to ``MAX_POLL`` while they run and ``QUEUED_MAX_POLL``
    while they wait; an unreachable cluster is retried with a growing backoff. Each
    BatchJob's interval is scaled by a factor drawn from its uid, so that many BatchJobs
    created together do not resync in lock-step.
    """
    if status.reachable is False:
        was_down = condition(previous, "ClusterReachable").get("status") == "False"
        quiet = _seconds_since(previous, "ClusterReachable", now) if was_down else 0.0
        base = min(MAX_BACKOFF, max(5.0, quiet / 2))
    elif status.reason is Reason.SUBMITTING or next_attempt_due:
        base = MIN_POLL
    elif status.reason is Reason.IMAGE_PULL_BACKOFF and status.image is not None:
        base = _backoff_left(status.image, now)
    elif (status.reason in CONNECTION_REASONS or status.phase is Phase.UNKNOWN
          or (status.reason in UNSENT_WAITS and not status.job_ids)):
        base = SLOW_POLL
    elif status.finished:
        return 0.0
    else:
        quiet = min(_seconds_since(previous, kind, now) for kind in ("Submitted", "Running"))
        longest, growth = ((MAX_POLL, QUIET_GROWTH) if status.phase is Phase.RUNNING
                           else (QUEUED_MAX_POLL, QUEUED_QUIET_GROWTH))
        base = min(max(longest, floor), max(MIN_POLL, floor) + quiet / growth)
    return round(base * _jitter(uid), 1)


def _jitter(uid: str) -> float:
    """A factor in [0.75, 1.0) fixed per BatchJob, so jittered intervals stay within the caps."""
    digest = hashlib.sha256(uid.encode()).digest()
    return 0.75 + 0.25 * int.from_bytes(digest[:2], "big") / 65536


def _seconds_since(previous: object, kind: str, now: datetime.datetime) -> float:
    stamp = parse_time(condition(previous, kind).get("lastTransitionTime"))
    return max(0.0, (now - stamp).total_seconds()) if stamp else 0.0


def format_time(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).replace(tzinfo=None).isoformat("T", "seconds") + "Z"


def parse_time(text: object) -> datetime.datetime | None:
    if not isinstance(text, str) or not text.endswith("Z"):
        return None
    try:
        return datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
