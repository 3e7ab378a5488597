"""The life of a BatchJob: what a sync must do next, and the status each outcome leads to.

``plan`` decides from the last status and the spec's generation alone what is ``Due``: submit an
attempt, track the current one, or leave a finished BatchJob alone. The functions below it turn
each outcome (submitted, in flight, refused, observed, unreachable, invalid) into the next
``Status``. All of them are pure; ``hooks.core.decide.sync`` decides with them.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, replace

from hooks.core.status.aggregate import Summary
from hooks.core.status.record import Status
from hooks.core.values.job import ClusterRef, JobRef
from hooks.core.values.phases import TERMINAL_PHASES, Phase
from hooks.core.values.reasons import INFRASTRUCTURE_REASONS, Reason

WAITING_FOR_SITE = frozenset({Reason.BATCH_CLUSTER_NOT_FOUND, Reason.INVALID_BATCH_CLUSTER,
                              Reason.CLUSTER_NOT_ALLOWED})
"""Reasons a BatchJob waits with for its BatchCluster (``hooks.core.sites.routing``): a change of
the BatchCluster or of the Namespace's labels lets it go on."""
NOT_CONTACTED = frozenset({Reason.SECRET_NOT_FOUND, Reason.CONFIG_MAP_NOT_FOUND,
                           Reason.INVALID_SECRET}) | WAITING_FOR_SITE
"""Reasons found before the cluster is contacted: a sync that ends with one sent nothing."""
NOT_SENT = NOT_CONTACTED | {Reason.SUSPENDED, Reason.STAGING_INPUTS, Reason.INPUT_NOT_FOUND,
                            Reason.STORAGE_ACCESS_DENIED, Reason.WAITING_FOR_DEPENDENCY,
                            Reason.PULLING_IMAGE, Reason.IMAGE_PULL_BACKOFF}
"""Reasons an attempt waits with before anything of it was sent to the cluster: suspended, for
a Secret or ConfigMap, its inputs, its image or the BatchJobs it depends on."""
QUEUED = "The job is queued."
"""A new attempt's message, kept while the job waits with no word from the scheduler
(``_queued_as_before``): the sync after the submission has nothing to write."""


class Due(enum.StrEnum):
    """What is due for a BatchJob next."""

    SUBMIT = "submit"
    """Submit the planned attempt (idempotent: finds the attempt if it was submitted before)."""
    TRACK = "track"
    """Query the scheduler for the current attempt."""
    IDLE = "idle"
    """Finished and nothing changed: answer from the last status, touch no cluster."""


@dataclass(frozen=True, slots=True)
class Plan:
    due: Due
    attempt: int
    attempt_generation: int
    retries: int


def plan(prev: Status, *, generation: int, backoff_limit: int) -> Plan:
    """What is due next for a BatchJob whose last status is ``prev``. Pure: no I/O."""
    if prev.attempt == 0:
        # Nothing was ever submitted for this BatchJob.
        return Plan(Due.SUBMIT, 1, generation, 0)
    if prev.reason is Reason.JOB_NOT_FOUND and prev.attempt_generation < generation:
        # The lost attempt cannot end by itself; the edited spec gets a new attempt.
        return Plan(Due.SUBMIT, prev.attempt + 1, generation, 0)
    if not prev.finished:
        # A submission whose id never reached the status is looked up again by submitting it.
        due = Due.TRACK if prev.job_ids else Due.SUBMIT
        return Plan(due, prev.attempt, prev.attempt_generation, prev.retries)
    if prev.attempt_generation < generation:
        # The spec changed after the end: a new attempt, and backoffLimit counts afresh.
        return Plan(Due.SUBMIT, prev.attempt + 1, generation, 0)
    if prev.reason in INFRASTRUCTURE_REASONS and prev.retries < backoff_limit:
        # The cluster failed the job, not the job itself: resubmit within backoffLimit.
        return Plan(Due.SUBMIT, prev.attempt + 1, prev.attempt_generation, prev.retries + 1)
    return Plan(Due.IDLE, prev.attempt, prev.attempt_generation, prev.retries)


def submitted(
    prev: Status, p: Plan, *, backend: str, cluster: ClusterRef, job: JobRef, now: str,
) -> Status:
    """The attempt has a job id on ``cluster``; its expected tasks (array tasks, procs) are
    what later queries expect to see, whatever the spec says by then."""
    return replace(
        fresh(prev, p, backend, cluster),
        message=QUEUED,
        job_ids=job.expected_tasks,
        active=len(job.expected_tasks),
        submit_time=now,
    ).reached()


def in_flight(prev: Status, p: Plan, *, backend: str, cluster: ClusterRef) -> Status:
    """Another call holds the attempt's submission guard and has not recorded a job id yet."""
    return replace(
        fresh(prev, p, backend, cluster),
        reason=Reason.SUBMITTING,
        message=f"A submission of attempt {p.attempt} is in flight; waiting for its job id.",
    ).reached()


def refused(
    prev: Status, p: Plan, *, backend: str, cluster: ClusterRef, message: str
) -> Status:
    return replace(
        fresh(prev, p, backend, cluster),
        phase=Phase.FAILED,
        reason=Reason.SUBMIT_FAILED,
        message=f"The scheduler refused attempt {p.attempt}: {message}",
        active=0,
    ).reached()


def observed(
    prev: Status, p: Plan, summary: Summary, *, backend: str, generation: int, backoff_limit: int
) -> Status:
    """The attempt as the scheduler reports it."""
    reason, message = summary.reason, summary.message
    if (
        summary.phase is Phase.FAILED
        and reason in INFRASTRUCTURE_REASONS
        and backoff_limit > 0
        and p.retries >= backoff_limit
    ):
        reason = Reason.BACKOFF_LIMIT_EXCEEDED
        message = f"{message} The job was resubmitted {p.retries} time(s); backoffLimit is used up."
    scheduler_reason = summary.scheduler_reason
    if p.attempt_generation < generation and summary.phase not in TERMINAL_PHASES:
        message = (
            f"{message} The spec changed (generation {generation}); the change waits for the end "
            f"of attempt {p.attempt}."
        ).strip()
    elif _queued_as_before(prev, p, summary):
        message, scheduler_reason = prev.message, prev.scheduler_reason
    return replace(
        fresh(prev, p, backend),
        phase=summary.phase,
        reason=reason,
        message=message,
        job_ids=summary.task_ids,
        active=summary.active,
        succeeded=summary.succeeded,
        failed=summary.failed,
        cancelled=summary.cancelled,
        exit_code=summary.exit_code,
        signal=summary.signal,
        scheduler_reason=scheduler_reason,
        usage=summary.usage,
        submit_time=prev.submit_time or summary.submit_time,
        start_time=summary.start_time,
        completion_time=summary.completion_time,
    ).reached()


def _queued_as_before(prev: Status, p: Plan, summary: Summary) -> bool:
    """Whether the attempt still waits in ordinary queueing (no typed reason) and its status
    keeps the words it shows: the scheduler's ordinary words (SLURM's ``Priority`` and
    ``Resources``, or none yet) change as the queue moves and tell the user nothing to act on,
    and each change would be one more write of the BatchJob. Its first word is shown."""
    still_ordinary = (summary.phase is Phase.PENDING and summary.reason is Reason.NONE
                      and prev.phase is Phase.PENDING and prev.reason is Reason.NONE
                      and prev.attempt == p.attempt and bool(prev.job_ids))
    first_word_due = not prev.scheduler_reason and bool(summary.scheduler_reason)
    return still_ordinary and not first_word_due


def unreachable(
    prev: Status, p: Plan, reason: Reason, message: str, *, backend: str,
    cluster: ClusterRef | None = None,
) -> Status:
    """The cluster could not be asked: keep the last known state, say why.

    Before the attempt has a job id the BatchJob waits in ``Pending`` with the reason; after,
    its last known phase stands and the reason says why it is not current. A job the hooks
    hold for ``spec.suspend`` keeps its reason: it is how a later sync knows to release it.
    """
    if p.due is Due.TRACK:
        kept = prev.finished or held_by_hooks(prev)
        base = prev if kept else replace(prev, reason=reason, message=message)
    else:
        base = replace(fresh(prev, p, backend, cluster), reason=reason, message=message)
    contacted = reason not in NOT_CONTACTED
    return replace(
        base, reachable=False if contacted else None, reachability_reason=str(reason),
        reachability_message=message,
    )


def collecting_outputs(status: Status) -> bool:
    """Whether the attempt ended and its outputs mover is collecting its outputs."""
    return (status.reason is Reason.COLLECTING_OUTPUTS and status.outputs is not None
            and status.outputs.attempt_phase is not None)


def held_by_hooks(status: Status) -> bool:
    """Whether the attempt waits in the queue held by the hooks for ``spec.suspend`` (to be
    released once it is false), as opposed to held by the scheduler, an administrator or the
    user, or suspended by the scheduler while it ran."""
    return (status.phase is Phase.PENDING and status.reason is Reason.SUSPENDED
            and bool(status.job_ids))


def deadline_exceeded(new: Status, limit: int, job_ids: Sequence[str], *, now: str) -> Status:
    """``spec.activeDeadlineSeconds`` passed while the attempt was active: its active jobs
    ``job_ids`` are cancelled, if it has any left."""
    ended = (f"its job{'s' if len(job_ids) > 1 else ''} {', '.join(job_ids)} "
             f"{'were' if len(job_ids) > 1 else 'was'} cancelled" if new.active and job_ids
             else "none of its jobs was left to cancel")
    return replace(
        new,
        phase=Phase.FAILED,
        reason=Reason.DEADLINE_EXCEEDED,
        message=f"The attempt was active longer than spec.activeDeadlineSeconds ({limit} s); "
                f"{ended}.",
        active=0,
        cancelled=new.cancelled + new.active,
        completion_time=now,
    )


def invalid_spec(prev: Status, message: str, *, backend: str) -> Status:
    """The spec breaks a rule; nothing is sent to the cluster until an edit fixes it."""
    return replace(
        prev,
        phase=Phase.FAILED,
        reason=Reason.INVALID_SPEC,
        message=message,
        backend=backend or prev.backend,
        active=0,
    )


def cancelling(prev: Status, job_ids: Sequence[str]) -> Status:
    """Finalize asked the scheduler to cancel the BatchJob's active jobs."""
    return replace(
        prev,
        reason=Reason.DELETED,
        message=f"The BatchJob is being deleted; cancelling {', '.join(job_ids)}.",
    ).reached()


def deleted(prev: Status) -> Status:
    """The scheduler confirms that nothing of the BatchJob is active any more. A BatchJob that
    had nothing to cancel keeps its final status."""
    if prev.reason is not Reason.DELETED:
        return prev
    return replace(
        prev,
        phase=Phase.CANCELLED,
        message="The BatchJob was deleted and its active jobs were cancelled.",
        active=0,
        cancelled=prev.cancelled + prev.active,
    ).reached()


def fresh(prev: Status, p: Plan, backend: str, cluster: ClusterRef | None = None) -> Status:
    """A status for attempt ``p.attempt`` before it has a job id; it keeps the attempt's
    cluster when it has one."""
    same = prev.attempt == p.attempt
    return Status(
        spec_hash=prev.spec_hash if same else "",
        phase=Phase.PENDING,
        backend=backend,
        cluster=cluster or (prev.cluster if same else None),
        attempt=p.attempt,
        attempt_generation=p.attempt_generation,
        retries=p.retries,
        reachable=prev.reachable,
        reachability_reason=prev.reachability_reason,
        reachability_message=prev.reachability_message,
        image=prev.image if same else None,
    )
