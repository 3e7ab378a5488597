"""Why a pending SLURM job waits: squeue's reason (``%r``) mapped to a typed reason and one
sentence. Pure: no I/O.

The reasons are SLURM's "JOB REASON CODES" (https://slurm.schedmd.com/job_reason_codes.html).
A reason missing from the table is ordinary queueing (``Reason.NONE``), shown raw: never a
failure.
"""

from __future__ import annotations

from hooks.core.values.reasons import Reason

ORDINARY = {
    "Priority": "SLURM queues it behind jobs of higher priority",
    "Resources": "SLURM queues it until the resources it asks for are free",
}
WAITING = {
    "Dependency": (Reason.WAITING_FOR_DEPENDENCY,
                   "SLURM starts it once the jobs it depends on have ended as it asks"),
    "BeginTime": (Reason.WAITING_FOR_START_TIME,
                  "SLURM starts it no earlier than the start time it was given"),
}
UNSCHEDULABLE = {
    "PartitionTimeLimit": "its time limit is longer than partition {partition} allows; ask for "
                          "less (spec.resources.timeLimit) or another partition "
                          "(spec.slurm.partition)",
    "PartitionNodeLimit": "it asks for more nodes than partition {partition} allows; ask for "
                          "fewer (spec.resources.nodes) or another partition "
                          "(spec.slurm.partition)",
    "PartitionConfig": "it asks for more than the nodes of partition {partition} have; ask "
                       "for less (spec.resources) or another partition (spec.slurm.partition)",
    "PartitionDown": "partition {partition} is down; the site may bring it back, or choose "
                     "another partition (spec.slurm.partition)",
    "PartitionInactive": "partition {partition} is inactive; the site may start it again, or "
                         "choose another partition (spec.slurm.partition)",
    "ReqNodeNotAvail": "nodes it needs are not available (down, drained or reserved); the "
                       "site may bring them back",
    "BadConstraints": "no node meets its constraints; change them (spec.slurm.extraArgs)",
    "DependencyNeverSatisfied": "a job it depends on ended in a way its dependency rules out; "
                                "delete the BatchJob or change the dependency",
    "InvalidAccount": "its account is not valid for this user; choose another "
                      "(spec.slurm.account)",
    "InvalidQOS": "its QOS is not valid for this user or account; choose another "
                  "(spec.slurm.qos)",
}
PER_JOB = ("it asks for more than its account or QOS allows any one job; ask for less "
           "(spec.resources) or use another account or QOS (spec.slurm.account, spec.slurm.qos)")
"""A per-job limit of an association or QOS (``AssocMaxWallDurationPerJobLimit``,
``QOSMaxCpuPerJobLimit``...): it never lifts for this job."""
LIMIT = ("SLURM holds it back until other jobs end: a limit of its QOS, account or user is "
         "reached; it starts once they end, or with another QOS or account "
         "(spec.slurm.qos, spec.slurm.account)")


def word(raw: str) -> str:
    """The reason itself: squeue adds detail after a comma (``ReqNodeNotAvail,
    UnavailableNodes:node3``); ``None`` and ``(null)`` are no reason."""
    text = raw.split(",", 1)[0].strip()
    return "" if text in ("None", "(null)") else text


def describe(raw: str, partition: str) -> tuple[Reason, str]:
    """The typed reason and the message of a job pending for ``raw``.

    >>> describe("QOSMaxJobsPerUserLimit", "debug")[0], describe("Foo", "debug")
    (<Reason.LIMIT_REACHED: 'LimitReached'>, (<Reason.NONE: ''>, 'The job is queued (Foo)'))
    """
    reason = word(raw)
    if not reason:
        return Reason.NONE, "The job is queued"
    if reason in ORDINARY:
        return Reason.NONE, f"{ORDINARY[reason]} ({reason})"
    if reason in WAITING:
        kind, text = WAITING[reason]
        return kind, f"{text} ({reason})"
    if reason in UNSCHEDULABLE or _per_job(reason):
        what = UNSCHEDULABLE.get(reason, PER_JOB).format(partition=partition or "?")
        return Reason.UNSCHEDULABLE, f"SLURM will not start it as submitted: {what} ({reason})"
    if _limit(reason):
        return Reason.LIMIT_REACHED, f"{LIMIT} ({reason})"
    return Reason.NONE, f"The job is queued ({reason})"


def _per_job(reason: str) -> bool:
    return reason.startswith(("QOSMax", "AssocMax")) and "PerJob" in reason


def _limit(reason: str) -> bool:
    return (reason.startswith(("QOSMax", "AssocGrp", "QOSGrp"))
            or (reason.startswith("AssocMax") and "Jobs" in reason) or "PerUser" in reason
            or "PerAccount" in reason)
