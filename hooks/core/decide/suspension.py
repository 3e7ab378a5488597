"""``spec.suspend`` on an attempt the scheduler shows: hold it while it waits, release it after,
and the status each of those leads to.

Whether the hooks hold the attempt's jobs is read from what they recorded (the status says so:
``lifecycle.held_by_hooks``), never from the queue: the queue a sync sees comes from the shared
status, up to ``HPCBRIDGE_STATUS_TTL`` old, and may predate the hold. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from hooks.core.decide.effects import Effects, Hold, Release, Trouble
from hooks.core.decide.rounds import Round
from hooks.core.status import lifecycle
from hooks.core.status.record import Status
from hooks.core.values.phases import Phase
from hooks.core.values.reasons import Reason


def follow(at: Round, new: Status, jobs: tuple[str, ...]) -> Effects[Status]:
    """The status of an active attempt, observed as ``new`` with the scheduler's ``jobs``,
    once it is held or released as ``spec.suspend`` says. Until a release has worked the
    status stays ``Suspended``, so that a failed one is tried again."""
    spec = at.call.parsed.spec
    held = new.phase is Phase.PENDING and new.reason is Reason.HELD
    ours = new.phase is Phase.PENDING and lifecycle.held_by_hooks(at.prev)
    if spec is None:
        # An invalid edit neither holds nor releases.
        kept = _held(new, jobs or new.job_ids) if ours else new
        return replace(kept, message=f"{kept.message} The new spec is invalid: "
                                     f"{at.call.parsed.error}".strip())
    if spec.suspend and new.phase is Phase.RUNNING:
        return _running_not_suspended(new)
    if spec.suspend and held:
        return _held(new, jobs)
    if not jobs:  # not visible yet: held or released once the scheduler shows them
        return _held(new, new.job_ids) if lifecycle.held_by_hooks(at.prev) else new
    if spec.suspend and new.phase is Phase.PENDING:
        return (yield from _hold(at, new, jobs))
    if ours:
        return (yield from _release(at, new, jobs))
    return new


def _hold(at: Round, new: Status, jobs: tuple[str, ...]) -> Effects[Status]:
    done: Trouble | None = yield at.effect(Hold(jobs))
    if isinstance(done, Trouble):
        return lifecycle.unreachable(new, at.plan, done.reason, done.message,
                                     backend=at.where.backend)
    return _held(new, jobs)


def _release(at: Round, new: Status, jobs: tuple[str, ...]) -> Effects[Status]:
    """Release the jobs the hooks held, whether the queue seen shows the hold or not yet
    (releasing a job that is not held changes nothing)."""
    done: Trouble | None = yield at.effect(Release(jobs))
    if isinstance(done, Trouble):
        return replace(lifecycle.unreachable(new, at.plan, done.reason, done.message,
                                             backend=at.where.backend),
                       reason=Reason.SUSPENDED)
    return _released(new, jobs)


def _held(new: Status, job_ids: Sequence[str]) -> Status:
    """``spec.suspend`` while the attempt waits in the queue: its jobs are held."""
    return replace(
        new,
        reason=Reason.SUSPENDED,
        message=f"The BatchJob is suspended; job {', '.join(job_ids)} is held in the queue "
                "until spec.suspend is false.",
    )


def _released(new: Status, job_ids: Sequence[str]) -> Status:
    """``spec.suspend`` is false again: the held jobs wait in the queue once more."""
    return replace(
        new,
        reason=Reason.NONE,
        message=f"spec.suspend is false: job {', '.join(job_ids)} was released and waits in "
                "the queue.",
    )


def _running_not_suspended(new: Status) -> Status:
    """``spec.suspend`` while the attempt runs: a job cannot be suspended by its user once it
    runs (SLURM's suspend is an operator's; an HTCondor hold would throw its progress away)."""
    return replace(new, message=f"{new.message} spec.suspend is true, but the job is already "
                                "running and keeps running: a running job cannot be "
                                "suspended.".strip())
