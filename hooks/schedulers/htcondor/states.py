"""HTCondor JobStatus values mapped to our outcomes and reasons.

JobStatus is authoritative, ExitCode is not (a removed job can carry ExitCode 0): see
https://htcondor.readthedocs.io/en/latest/classad-attributes/job-classad-attributes.html#JobStatus
A value missing from the table maps to ``Outcome.UNKNOWN`` with the raw value in the message.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from hooks.core.model import Outcome, Reason, TaskState

STATES: dict[int, tuple[Outcome, Reason]] = {
    1: (Outcome.PENDING, Reason.NONE),  # Idle
    2: (Outcome.RUNNING, Reason.NONE),  # Running
    3: (Outcome.CANCELLED, Reason.CANCELLED_ON_CLUSTER),  # Removed
    4: (Outcome.SUCCEEDED, Reason.NONE),  # Completed: succeeded or failed by its exit
    5: (Outcome.PENDING, Reason.HELD),  # Held
    6: (Outcome.RUNNING, Reason.NONE),  # Transferring output
    7: (Outcome.RUNNING, Reason.SUSPENDED),  # Suspended
}

TIME_LIMIT_MARKER = "hpcbridge: time limit exceeded"
"""The ``periodic_remove`` reason our submit description sets; a removal with it is a Timeout."""


@dataclass(frozen=True, slots=True)
class CondorRecord:
    """One job ad from ``condor_q``/``condor_history``, the attributes we read."""

    cluster: int
    proc: int
    job_status: int
    exit_code: int | None = None
    exit_by_signal: bool = False
    exit_signal: int | None = None
    hold_reason: str = ""
    remove_reason: str = ""
    submit_time: int | None = None
    start_time: int | None = None
    end_time: int | None = None


def to_task(record: CondorRecord) -> TaskState:
    """Map one job ad to a ``TaskState``. Pure: no I/O."""
    outcome, reason = STATES.get(record.job_status, (Outcome.UNKNOWN, Reason.UNKNOWN_STATE))
    message = ""
    exit_code = None
    if reason is Reason.UNKNOWN_STATE:
        message = f"HTCondor reports the unknown JobStatus {record.job_status}"
    elif reason is Reason.HELD:
        message = record.hold_reason or "The job is held on the pool"
    elif reason is Reason.SUSPENDED:
        message = "The job is suspended"
    elif outcome is Outcome.CANCELLED and TIME_LIMIT_MARKER in record.remove_reason:
        outcome, reason, message = Outcome.FAILED, Reason.TIMEOUT, "The job ran past its time limit"
    elif outcome is Outcome.CANCELLED:
        message = f"The job was removed on the pool ({record.remove_reason or 'condor_rm'})"
    elif record.job_status == 4 and record.exit_by_signal:
        outcome, reason = Outcome.FAILED, Reason.NON_ZERO_EXIT_CODE
        message = f"The job was killed by signal {record.exit_signal}"
    elif record.job_status == 4:
        exit_code = record.exit_code
        if exit_code != 0:
            outcome, reason = Outcome.FAILED, Reason.NON_ZERO_EXIT_CODE
            message = f"The job exited with code {exit_code}"
    return TaskState(
        task_id=f"{record.cluster}.{record.proc}",
        outcome=outcome,
        reason=reason,
        message=message,
        exit_code=exit_code,
        submit_time=_iso(record.submit_time),
        start_time=_iso(record.start_time),
        end_time=_iso(record.end_time) if not outcome.is_active else None,
    )


def _iso(epoch: int | None) -> str | None:
    """Epoch seconds as RFC 3339 UTC (a conversion, not a clock reading)."""
    if not epoch:
        return None
    try:
        moment = datetime.datetime.fromtimestamp(epoch, tz=datetime.UTC)
    except (OverflowError, ValueError, OSError):
        return None
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
