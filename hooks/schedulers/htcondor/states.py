"""HTCondor JobStatus values mapped to our outcomes and reasons.

JobStatus is authoritative, ExitCode is not (a removed job can carry ExitCode 0): see
https://htcondor.readthedocs.io/en/latest/classad-attributes/job-classad-attributes.html#JobStatus
A value missing from the table maps to ``Outcome.UNKNOWN`` with the raw value in the message.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass

from hooks.core.values.phases import Outcome, TaskState, TaskUsage
from hooks.core.values.reasons import Reason
from hooks.schedulers.htcondor import waiting
from hooks.schedulers.htcondor.rules import USER_PERIODIC_REMOVE
from hooks.schedulers.htcondor.waiting import Unmet

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
"""The string the time limit's ``periodic_remove`` carries: RemoveReason quotes the expression."""
PERIODIC_REMOVAL = "The job attribute PeriodicRemove expression "
"""How RemoveReason starts when ``periodic_remove`` removed the job (HTCondor 23.9 and 25.x)."""
USER_PART = f"MY.{USER_PERIODIC_REMOVE}"
"""The user's own ``periodic_remove`` in the job's, next to a time limit."""
_LIMIT = re.compile(r"time\(\) - JobCurrentStartDate > (\d+)")


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
    matches: int = 0
    """``NumJobMatches``: how often the negotiator matched the job."""
    rejected: str = ""
    """``LastRejMatchReason``: why the negotiator last passed the job over."""
    unmet: Unmet | None = None
    """The requirements of an idle job that no machine of the pool meets, even with all of its
    resources free; None when some machine does, or when not judged."""
    usage: TaskUsage | None = None
    """What the proc used, once it left the queue (``waiting.usage``)."""


def to_task(record: CondorRecord) -> TaskState:
    """Map one job ad to a ``TaskState``. Pure: no I/O."""
    outcome, reason, message = _verdict(record)
    return TaskState(
        task_id=f"{record.cluster}.{record.proc}",
        outcome=outcome,
        reason=reason,
        message=message,
        exit_code=record.exit_code if _exited(record) else None,
        submit_time=_iso(record.submit_time),
        start_time=_iso(record.start_time),
        end_time=_iso(record.end_time) if not outcome.is_active else None,
        scheduler_reason=record.rejected if record.job_status == 1 else "",
        signal=record.exit_signal if record.exit_by_signal and not outcome.is_active else None,
        usage=record.usage if not outcome.is_active else None,
    )


def _verdict(record: CondorRecord) -> tuple[Outcome, Reason, str]:
    """The job's outcome, reason and message: its JobStatus, told apart by why it waits, why
    it was removed and how it exited."""
    outcome, reason = STATES.get(record.job_status, (Outcome.UNKNOWN, Reason.UNKNOWN_STATE))
    if record.job_status == 1 and not record.matches:
        reason, message = waiting.describe(record.rejected, record.unmet)
        return outcome, reason, message
    if reason is Reason.UNKNOWN_STATE:
        return outcome, reason, f"HTCondor reports the unknown JobStatus {record.job_status}"
    if reason is Reason.HELD:
        return outcome, reason, record.hold_reason or "The job is held on the pool"
    if reason is Reason.SUSPENDED:
        return outcome, reason, "The job is suspended"
    if outcome is Outcome.CANCELLED:
        return _removal(record, outcome, reason)
    if record.job_status == 4 and record.exit_by_signal:
        return (Outcome.FAILED, Reason.NON_ZERO_EXIT_CODE,
                f"The job was killed by signal {record.exit_signal}")
    if record.job_status == 4 and record.exit_code != 0:
        return (Outcome.FAILED, Reason.NON_ZERO_EXIT_CODE,
                f"The job exited with code {record.exit_code}")
    return outcome, reason, ""


def _removal(
    record: CondorRecord, outcome: Outcome, reason: Reason
) -> tuple[Outcome, Reason, str]:
    """A removed job's outcome, reason and message: failed when its time limit removed it,
    else cancelled, by its own ``periodic_remove`` or on the pool."""
    if timed_out(record):
        return Outcome.FAILED, Reason.TIMEOUT, "The job ran past its time limit"
    if record.remove_reason.startswith(PERIODIC_REMOVAL):
        return outcome, reason, ("The job was removed on the pool by its own periodic_remove "
                                 "(spec.htcondor.submitOptions)")
    return outcome, reason, ("The job was removed on the pool "
                             f"({record.remove_reason or 'condor_rm'})")


def _exited(record: CondorRecord) -> bool:
    """Whether the job completed by its own exit, not by a signal: then its exit code counts."""
    return record.job_status == 4 and not record.exit_by_signal


def timed_out(record: CondorRecord) -> bool:
    """Whether the time limit's ``periodic_remove`` removed the job. RemoveReason quotes the
    whole expression, which holds the user's own next to a time limit: then the job's run
    until its removal (``EnteredCurrentStatus``) tells, for the time limit's part was true
    exactly once the run was longer than the limit.

    >>> reason = (f"{PERIODIC_REMOVAL}'(JobStatus == 2 && time() - JobCurrentStartDate > 20 "
    ...           f"&& \\"{TIME_LIMIT_MARKER}\\" != \\"\\") || {USER_PART}' evaluated to TRUE")
    >>> [timed_out(CondorRecord(1, 0, 3, remove_reason=reason, start_time=100, end_time=end))
    ...  for end in (121, 105)]
    [True, False]
    """
    text = record.remove_reason
    if TIME_LIMIT_MARKER not in text:
        return False
    limit = _LIMIT.search(text)
    if USER_PART not in text or limit is None:
        return True
    ran = (record.end_time or 0) - (record.start_time or 0)
    return bool(record.start_time) and ran > int(limit.group(1))


def _iso(epoch: int | None) -> str | None:
    """Epoch seconds as RFC 3339 UTC (a conversion, not a clock reading)."""
    if not epoch:
        return None
    try:
        moment = datetime.datetime.fromtimestamp(epoch, tz=datetime.UTC)
    except (OverflowError, ValueError, OSError):
        return None
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
