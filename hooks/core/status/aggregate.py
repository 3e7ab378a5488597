"""Aggregation of task states (array tasks, HTCondor procs) into one phase, reason and counts.

Order, from the BatchJob API: any active task → Running if one runs, else Pending; else any
failed → Failed with the first failed task's reason; else any cancelled → Cancelled; else
Succeeded. A task in a state we do not know makes the whole job Unknown unless another task is
still active: we report what we cannot tell rather than guess.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from hooks.core.status.usage import Usage, summed
from hooks.core.values.phases import Outcome, Phase, TaskState
from hooks.core.values.reasons import Reason

NOT_VISIBLE_GRACE_SECONDS = 60
_ID_PARTS = re.compile(r"[_.]")
_OUTCOMES = tuple(Outcome)


@dataclass(frozen=True, slots=True)
class Summary:
    phase: Phase
    reason: Reason
    message: str
    task_ids: tuple[str, ...]
    active: int
    succeeded: int
    failed: int
    cancelled: int
    exit_code: int | None
    submit_time: str | None
    start_time: str | None
    completion_time: str | None
    scheduler_reason: str = ""
    """The scheduler's word for why the leading pending task waits."""
    signal: int | None = None
    usage: Usage | None = None
    """What the tasks used, once all have ended and the accounting of each was read."""


def task_order(task_id: str) -> tuple[tuple[int, int, str], ...]:
    """Sort key for ids like ``4242``, ``4242_10`` and ``15.3``: numeric parts as numbers."""
    return tuple(
        (0, int(part), "") if part.isdigit() else (1, 0, part)
        for part in _ID_PARTS.split(task_id)
    )


def summarize(
    observed: Sequence[TaskState],
    *,
    expected: Sequence[str],
    single: bool,
    seconds_since_submit: float,
) -> Summary:
    """Aggregate what the scheduler reported for one attempt. Pure: no I/O.

    ``expected`` lists the task ids the attempt should have (from the array or queue size);
    those the scheduler does not show yet count as pending. Once nothing at all is visible
    ``NOT_VISIBLE_GRACE_SECONDS`` after submission, the job is Unknown/JobNotFound.
    """
    if not observed and seconds_since_submit >= NOT_VISIBLE_GRACE_SECONDS:
        return _not_found(expected)
    tasks = _with_expected(observed, expected)
    groups: dict[Outcome, list[TaskState]] = {outcome: [] for outcome in _OUTCOMES}
    for task in tasks:
        groups[task.outcome].append(task)
    active = groups[Outcome.RUNNING] + groups[Outcome.PENDING]
    phase, lead = _phase(groups, active)
    finished = not active and phase is not Phase.UNKNOWN
    ends = [t.end_time for t in tasks if t.end_time]
    return Summary(
        phase=phase,
        reason=lead.reason if lead else Reason.NONE,
        message=_message(phase, lead, len(tasks), single),
        task_ids=tuple(t.task_id for t in tasks),
        active=len(active),
        succeeded=len(groups[Outcome.SUCCEEDED]),
        failed=len(groups[Outcome.FAILED]),
        cancelled=len(groups[Outcome.CANCELLED]),
        exit_code=tasks[0].exit_code if single and finished and len(tasks) == 1 else None,
        submit_time=min((t.submit_time for t in tasks if t.submit_time), default=None),
        start_time=min((t.start_time for t in tasks if t.start_time), default=None),
        completion_time=max(ends) if finished and ends else None,
        scheduler_reason=lead.scheduler_reason if lead and phase is Phase.PENDING else "",
        signal=tasks[0].signal if single and finished and len(tasks) == 1 else None,
        usage=_usage(tasks) if finished else None,
    )


def _usage(tasks: Sequence[TaskState]) -> Usage | None:
    """The attempt's usage, when the accounting of every task that ran was read."""
    ran = [t for t in tasks if t.start_time or t.usage]
    if not ran or any(t.usage is None for t in ran):
        return None
    return summed([t.usage for t in ran if t.usage])


def _with_expected(observed: Sequence[TaskState], expected: Sequence[str]) -> list[TaskState]:
    """The observed tasks plus a pending one for each expected task not seen yet, in order."""
    by_id = {task.task_id: task for task in observed}
    for task_id in expected:
        # A job that became an array or a heterogeneous job (its script asked for one)
        # reports its tasks or components instead.
        parts = (f"{task_id}_", f"{task_id}+")
        if task_id not in by_id and not any(t.startswith(parts) for t in by_id):
            by_id[task_id] = TaskState(task_id, Outcome.PENDING,
                                       message="The job is not visible on the cluster yet")
    return sorted(by_id.values(), key=lambda t: task_order(t.task_id))


def _phase(
    groups: dict[Outcome, list[TaskState]], active: list[TaskState]
) -> tuple[Phase, TaskState | None]:
    if groups[Outcome.RUNNING]:
        return Phase.RUNNING, groups[Outcome.RUNNING][0]
    if active:
        return Phase.PENDING, active[0]
    for outcome, phase in (
        (Outcome.UNKNOWN, Phase.UNKNOWN),
        (Outcome.FAILED, Phase.FAILED),
        (Outcome.CANCELLED, Phase.CANCELLED),
    ):
        if groups[outcome]:
            return phase, groups[outcome][0]
    return Phase.SUCCEEDED, None


def _message(phase: Phase, lead: TaskState | None, count: int, single: bool) -> str:
    if phase is Phase.SUCCEEDED:
        return "The job completed." if single else f"All {count} tasks completed."
    text = (lead.message if lead else "") or {
        Phase.RUNNING: "The job is running",
        Phase.PENDING: "The job is queued",
    }.get(phase, "")
    if lead and not single:
        text = f"Task {lead.task_id}: {text}"
    return text + "." if text and not text.endswith(".") else text


def _not_found(expected: Sequence[str]) -> Summary:
    return Summary(
        phase=Phase.UNKNOWN,
        reason=Reason.JOB_NOT_FOUND,
        message=(
            f"Job {', '.join(expected[:1]) or '?'} is in neither the queue nor the accounting "
            f"{NOT_VISIBLE_GRACE_SECONDS} s after submission."
        ),
        task_ids=tuple(expected),
        active=0,
        succeeded=0,
        failed=0,
        cancelled=0,
        exit_code=None,
        submit_time=None,
        start_time=None,
        completion_time=None,
    )
