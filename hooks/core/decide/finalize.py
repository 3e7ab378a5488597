"""The finalize decision: cancel a deleted BatchJob's jobs, then remove its remote directory.

Finalize lists the BatchJob's active jobs where its attempt was submitted and cancels them;
a later call, once the scheduler shows none active, removes the remote directory and answers
``finalized: true``. Trouble keeps the BatchJob (``finalized: false``) until
``HPCBRIDGE_FINALIZE_GRACE`` has passed since its deletion, or at once when nothing was ever
submitted and the spec or Secret rules the cluster out. The annotation
``hpcbridge.io/skip-cancel: "true"`` leaves the cluster alone. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import replace

from hooks.core.decide import answer
from hooks.core.decide.effects import (
    Answer,
    Cancel,
    Cleanup,
    Decision,
    Effect,
    Forget,
    ListActive,
    Trouble,
)
from hooks.core.decide.rounds import attempt_placement, credentials
from hooks.core.status import lifecycle
from hooks.core.status.lifecycle import NOT_SENT, Due, Plan
from hooks.core.status.record import Status
from hooks.core.values.job import attempt_key, job_root
from hooks.core.values.reasons import Reason
from hooks.core.wire import response
from hooks.core.wire.request import Call

SKIP_CANCEL = "hpcbridge.io/skip-cancel"
GIVE_UP_WITHOUT_CLUSTER = frozenset({Reason.INVALID_SPEC, Reason.SECRET_NOT_FOUND,
                                     Reason.INVALID_SECRET}) | lifecycle.WAITING_FOR_SITE
"""Reasons that end the deletion at once when nothing was ever submitted."""


def decide(call: Call) -> Decision:
    """One finalize call: the effects it runs, then its answer. Pure: no I/O."""
    prev = call.previous
    if call.annotations.get(SKIP_CANCEL) == "true":
        return _done(call, prev, f"{call.namespace}/{call.name} deleted with {SKIP_CANCEL}: "
                                 "cluster left alone")
    where = attempt_placement(call, prev)
    if where is None:
        return _trouble(call, Trouble(call.parsed.reason, call.parsed.error))
    access = credentials(call, where.cluster)
    if isinstance(access, Trouble):
        return _trouble(call, access)
    active: tuple[str, ...] | Trouble = yield Effect(where, access, ListActive(call.uid))
    if isinstance(active, Trouble):
        return _trouble(call, active)
    if active:
        cancelled: Trouble | None = yield Effect(where, access, Cancel(active))
        if isinstance(cancelled, Trouble):
            return _trouble(call, cancelled)
        # A later call removes the directory once the scheduler shows none active.
        note = f"cancelled {', '.join(active)} for deleted {call.namespace}/{call.name}"
        return answer.build(call, lifecycle.cancelling(prev, active), finalized=False,
                            notes=(note,))
    root = job_root(where.cluster.work_dir, call.namespace, call.name, call.uid)
    word: str | Trouble = yield Effect(where, access, Cleanup(root, call.policy.guard_stale))
    if isinstance(word, Trouble):
        return _trouble(call, word)
    if word == "busy":
        new = replace(prev, message="The BatchJob is being deleted; waiting for a "
                                    "submission in flight.").reached()
        return answer.build(call, new, finalized=False)
    yield Effect(where, access, Forget(attempt_key(call.uid, prev.attempt)))
    return _done(call, lifecycle.deleted(prev))


def _trouble(call: Call, trouble: Trouble) -> Answer:
    prev = call.previous
    never_submitted = prev.attempt == 0 or (not prev.job_ids and (
        prev.finished or prev.reason in NOT_SENT))
    if (never_submitted and trouble.reason in GIVE_UP_WITHOUT_CLUSTER) or past_grace(call):
        return _done(call, prev, f"finalizing {call.namespace}/{call.name} without cleaning "
                                 f"up on the cluster: {trouble.message}", gave_up=True)
    plan = Plan(Due.TRACK, prev.attempt, prev.attempt_generation, prev.retries)
    new = lifecycle.unreachable(prev, plan, trouble.reason, trouble.message,
                                backend=prev.backend)
    return answer.build(call, new, finalized=False)


def _done(call: Call, new: Status, note: str = "", *, gave_up: bool = False) -> Answer:
    return answer.build(call, new, finalized=True, notes=(note,) if note else (),
                        gave_up=gave_up)


def past_grace(call: Call) -> bool:
    """Whether ``HPCBRIDGE_FINALIZE_GRACE`` has passed since the BatchJob was deleted."""
    deleted_at = response.parse_time(call.deletion_timestamp) or call.now
    return (call.now - deleted_at).total_seconds() >= call.policy.finalize_grace


def give_up(call: Call) -> Answer:
    """The answer that lets a deleted BatchJob go after a bug past the grace: its last
    status as stored, no log Pod."""
    body = response.envelope(call.shape, status=call.previous_raw, children=[], resync=0,
                             finalized=True)
    return Answer(body, call.previous, gave_up=True)
