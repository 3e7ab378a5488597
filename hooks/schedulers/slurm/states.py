"""SLURM job states mapped to our outcomes and reasons.

The table follows SLURM's "JOB STATE CODES" (https://slurm.schedmd.com/squeue.html#lbAG) and the
BatchJob API. A state missing from it maps to ``Outcome.UNKNOWN`` with the raw state in the
message: the hooks report what they do not know rather than guess.
"""

from __future__ import annotations

from dataclasses import dataclass

from hooks.core.values.phases import Outcome, TaskState, TaskUsage
from hooks.core.values.reasons import Reason
from hooks.schedulers.slurm import reasons

STATES: dict[str, tuple[Outcome, Reason]] = {
    "PENDING": (Outcome.PENDING, Reason.NONE),
    "CONFIGURING": (Outcome.PENDING, Reason.NONE),
    "REQUEUED": (Outcome.PENDING, Reason.NONE),
    "RESIZING": (Outcome.PENDING, Reason.NONE),
    "REQUEUE_HOLD": (Outcome.PENDING, Reason.HELD),
    "REQUEUE_FED": (Outcome.PENDING, Reason.NONE),
    "RESV_DEL_HOLD": (Outcome.PENDING, Reason.HELD),
    "SPECIAL_EXIT": (Outcome.PENDING, Reason.HELD),
    "RUNNING": (Outcome.RUNNING, Reason.NONE),
    "COMPLETING": (Outcome.RUNNING, Reason.NONE),
    "SIGNALING": (Outcome.RUNNING, Reason.NONE),
    "STAGE_OUT": (Outcome.RUNNING, Reason.NONE),
    "SUSPENDED": (Outcome.RUNNING, Reason.SUSPENDED),
    "STOPPED": (Outcome.RUNNING, Reason.NONE),
    "COMPLETED": (Outcome.SUCCEEDED, Reason.NONE),
    "FAILED": (Outcome.FAILED, Reason.NON_ZERO_EXIT_CODE),
    "TIMEOUT": (Outcome.FAILED, Reason.TIMEOUT),
    "DEADLINE": (Outcome.FAILED, Reason.TIMEOUT),
    "OUT_OF_MEMORY": (Outcome.FAILED, Reason.OUT_OF_MEMORY),
    "NODE_FAIL": (Outcome.FAILED, Reason.NODE_FAIL),
    "BOOT_FAIL": (Outcome.FAILED, Reason.BOOT_FAIL),
    "PREEMPTED": (Outcome.FAILED, Reason.PREEMPTED),
    "CANCELLED": (Outcome.CANCELLED, Reason.CANCELLED_ON_CLUSTER),
}

HOLD_REASONS = frozenset({"JobHeldUser", "JobHeldAdmin"})

_MESSAGES = {
    Reason.NON_ZERO_EXIT_CODE: "The job failed",
    Reason.TIMEOUT: "The job ran past its time limit",
    Reason.OUT_OF_MEMORY: "The job ran out of memory",
    Reason.NODE_FAIL: "A node of the job failed",
    Reason.BOOT_FAIL: "A node of the job failed to boot",
    Reason.PREEMPTED: "The job was preempted",
    Reason.CANCELLED_ON_CLUSTER: "The job was cancelled on the cluster",
    Reason.SUSPENDED: "The job is suspended",
}


@dataclass(frozen=True, slots=True)
class SlurmRecord:
    """One line of ``squeue`` or ``sacct`` output, fields as SLURM prints them."""

    task_id: str
    state: str
    reason: str = ""
    exit_code: str = ""
    submit_time: str = ""
    start_time: str = ""
    end_time: str = ""
    partition: str = ""
    usage: TaskUsage | None = None
    """sacct's accounting of the task (``accounting.usage``); None from squeue."""


def outcome(state: str) -> Outcome:
    """The outcome of a raw state such as ``RUNNING`` or ``CANCELLED by 1001``."""
    return STATES.get(state.split(" ", 1)[0], (Outcome.UNKNOWN, Reason.UNKNOWN_STATE))[0]


def to_task(record: SlurmRecord) -> TaskState:
    """Map one record to a ``TaskState``. Pure: no I/O."""
    state = record.state.split(" ", 1)[0]
    outcome, reason = STATES.get(state, (Outcome.UNKNOWN, Reason.UNKNOWN_STATE))
    pending_reason = reasons.word(record.reason) if outcome is Outcome.PENDING else ""
    reason, message = _explained(record, state, reason, pending_reason)
    code, signal = _exit_code(record.exit_code)
    return TaskState(
        task_id=record.task_id,
        outcome=outcome,
        reason=reason,
        message=message,
        exit_code=code if _job_outcome(outcome, reason) and not signal else None,
        submit_time=_time(record.submit_time),
        start_time=_time(record.start_time) if outcome is not Outcome.PENDING else None,
        end_time=_time(record.end_time) if not outcome.is_active else None,
        scheduler_reason=pending_reason,
        signal=signal or None if not outcome.is_active else None,
        usage=record.usage if not outcome.is_active else None,
    )


def _explained(
    record: SlurmRecord, state: str, reason: Reason, pending: str
) -> tuple[Reason, str]:
    """The record's reason and message: a hold, why a pending job waits as SLURM says it, or
    what its state and exit code tell."""
    if pending in HOLD_REASONS:
        reason = Reason.HELD
    if state == "PENDING" and reason is Reason.NONE:
        return reasons.describe(record.reason, record.partition)
    code, signal = _exit_code(record.exit_code)
    return reason, _message(state, record.state, reason, pending, code, signal)


def _message(
    state: str, raw: str, reason: Reason, pending: str, code: int | None, signal: int | None
) -> str:
    if reason is Reason.UNKNOWN_STATE:
        return f"SLURM reports the unknown job state {raw!r}"
    if reason is Reason.HELD:
        return f"The job is held on the cluster ({pending or state})"
    if reason is Reason.NON_ZERO_EXIT_CODE and signal:
        return f"The job failed with exit status {code}:{signal} (code:signal)"
    if reason is Reason.NON_ZERO_EXIT_CODE and code is not None:
        return f"The job exited with code {code}"
    if reason is Reason.CANCELLED_ON_CLUSTER and " by " in raw:
        return f"The job was cancelled on the cluster ({raw.split(' ', 1)[1]})"
    return _MESSAGES.get(reason, "")


def _job_outcome(outcome: Outcome, reason: Reason) -> bool:
    """Whether the job's own exit ended it (not a time limit, a node or a cancellation)."""
    return outcome is Outcome.SUCCEEDED or reason is Reason.NON_ZERO_EXIT_CODE


def _exit_code(text: str) -> tuple[int | None, int | None]:
    code, _, signal = text.partition(":")
    if not code.isdigit():
        return None, None
    return int(code), int(signal) if signal.isdigit() else 0


def _time(text: str) -> str | None:
    """SLURM times (printed in UTC by the backend) as RFC 3339, or None for N/A-like values."""
    if len(text) != 19 or text[10] != "T":
        return None
    return text + "Z"
