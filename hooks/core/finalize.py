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

from hooks.core import answer, lifecycle, response
from hooks.core.lifecycle import NOT_SENT, Plan
from hooks.core.lifecycle import Step as Planned
from hooks.core.model import Reason, attempt_key, job_root
from hooks.core.request import Call
from hooks.core.spec import Placement
from hooks.core.status import Status
from hooks.core.steps import (
    Access,
    Answer,
    Cancel,
    Cleanup,
    Decision,
    Forget,
    ListActive,
    Step,
    Trouble,
)
from hooks.core.sync import attempt_placement, credentials

SKIP_CANCEL = "hpcbridge.io/skip-cancel"
RESYNC = 3.0
"""Seconds until the next finalize call while the deletion waits for the cluster."""
GIVE_UP_WITHOUT_CLUSTER = frozenset({Reason.INVALID_SPEC, Reason.SECRET_NOT_FOUND,
                                     Reason.INVALID_SECRET})
"""Reasons that end the deletion at once when nothing was ever submitted."""


def decide(call: Call) -> Decision:
    """The first decision of a finalize call. Pure: no I/O."""
    prev = call.previous
    if call.annotations.get(SKIP_CANCEL) == "true":
        return _done(call, prev, f"{call.namespace}/{call.name} deleted with {SKIP_CANCEL}: "
                                 "cluster left alone")
    where = attempt_placement(call, prev)
    if where is None:
        return _trouble(call, Trouble(Reason.INVALID_SPEC, call.parsed.error))
    creds = credentials(call, where.cluster)
    if isinstance(creds, Trouble):
        return _trouble(call, creds)
    return Step(where, creds, ListActive(call.uid),
                lambda result: _listed(call, where, creds, result))


def _listed(
    call: Call, where: Placement, creds: Access, result: tuple[str, ...] | Trouble
) -> Decision:
    if isinstance(result, Trouble):
        return _trouble(call, result)
    if result:
        return Step(where, creds, Cancel(result),
                    lambda done: _cancelled(call, result, done))
    root = job_root(where.cluster.work_dir, call.namespace, call.name, call.uid)
    return Step(where, creds, Cleanup(root, call.policy.guard_stale),
                lambda word: _cleaned(call, where, creds, word))


def _cancelled(call: Call, job_ids: tuple[str, ...], result: Trouble | None) -> Decision:
    if isinstance(result, Trouble):
        return _trouble(call, result)
    new = lifecycle.cancelling(call.previous, job_ids)
    note = f"cancelled {', '.join(job_ids)} for deleted {call.namespace}/{call.name}"
    return answer.build(call, new, finalized=False, resync=RESYNC, notes=(note,))


def _cleaned(
    call: Call, where: Placement, creds: Access, result: str | Trouble
) -> Decision:
    prev = call.previous
    if isinstance(result, Trouble):
        return _trouble(call, result)
    if result == "busy":
        new = replace(prev, message="The BatchJob is being deleted; waiting for a "
                                    "submission in flight.").reached()
        return answer.build(call, new, finalized=False, resync=RESYNC)
    return Step(where, creds, Forget(attempt_key(call.uid, prev.attempt)),
                lambda _: _done(call, lifecycle.deleted(prev)))


def _trouble(call: Call, trouble: Trouble) -> Answer:
    prev = call.previous
    never_submitted = prev.attempt == 0 or (not prev.job_ids and (
        prev.finished or prev.reason in NOT_SENT))
    if (never_submitted and trouble.reason in GIVE_UP_WITHOUT_CLUSTER) or past_grace(call):
        return _done(call, prev, f"finalizing {call.namespace}/{call.name} without cleaning "
                                 f"up on the cluster: {trouble.message}", gave_up=True)
    plan = Plan(Planned.TRACK, prev.attempt, prev.attempt_generation, prev.retries)
    new = lifecycle.unreachable(prev, plan, trouble.reason, trouble.message,
                                backend=prev.backend)
    return answer.build(call, new, finalized=False, resync=RESYNC)


def _done(call: Call, new: Status, note: str = "", *, gave_up: bool = False) -> Answer:
    return answer.build(call, new, finalized=True, resync=0, notes=(note,) if note else (),
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
