"""The BatchJob status: reading the last one from a request, and rendering a new one.

Status is a pure function of what was observed: the same observation renders the same status,
byte for byte, so Metacontroller's status write does not trigger syncs forever. The only time
that enters is ``now`` for a condition whose status flips, and the submit time of a new attempt.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from hooks.core.status import dependencies, image, route, stored, transfers, usage
from hooks.core.status.usage import Usage
from hooks.core.values.image import ImageRecord
from hooks.core.values.job import ClusterRef
from hooks.core.values.phases import TERMINAL_PHASES, Phase
from hooks.core.values.reasons import Reason
from hooks.core.values.sdk import Rules
from hooks.core.values.text import readable

CONDITION_TYPES = ("Submitted", "Running", "Complete", "Failed", "Scheduled",
                   "ClusterReachable", "Suspended")


@dataclass(frozen=True, slots=True)
class Status:
    phase: Phase = Phase.PENDING
    reason: Reason = Reason.NONE
    message: str = ""
    backend: str = ""
    job_ids: tuple[str, ...] = ()
    attempt: int = 0
    attempt_generation: int = 0
    retries: int = 0
    active: int = 0
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0
    exit_code: int | None = None
    signal: int | None = None
    """The signal that ended a single job, if one did."""
    scheduler_reason: str = ""
    """The scheduler's own word for why the attempt waits, as it says it."""
    usage: Usage | None = None
    """What the attempt used, once it ended (``hooks.core.status.usage``)."""
    submit_time: str | None = None
    start_time: str | None = None
    completion_time: str | None = None
    logs_pod: str | None = None
    cluster: ClusterRef | None = None
    """Where the attempt was submitted; tracking and cancelling go there, whatever the spec
    says now (a spec edit waits for the attempt's end)."""
    reachable: bool | None = None
    """Whether the last contact with the cluster worked; None before the first one."""
    reachability_reason: str = ""
    reachability_message: str = ""
    spec_hash: str = ""
    """The digest of the attempt's spec without ``suspend`` and ``activeDeadlineSeconds``
    (``hooks.core.spec.batchjob.digest``): a new generation with the same digest is no new spec."""
    inputs: transfers.Transfer | None = None
    """What the inputs mover did for the attempt (``spec.inputs`` from S3 or a claim)."""
    outputs: transfers.Transfer | None = None
    """What the outputs mover did after the attempt's end (``spec.outputs``)."""
    dependencies: tuple[dependencies.Seen, ...] = ()
    """What the attempt saw of the BatchJobs it waited for (``spec.dependsOn``)."""
    image: ImageRecord | None = None
    """The image the attempt runs (``spec.container``), and how its pulls went."""

    @property
    def finished(self) -> bool:
        """The attempt is over."""
        return self.phase in TERMINAL_PHASES

    def reached(self) -> Status:
        return replace(self, reachable=True, reachability_reason="", reachability_message="")


def from_raw(raw: object, rules: Rules) -> Status:
    """The status as Metacontroller last stored it; unknown or broken fields fall back. Job
    ids are kept only in the form of the stored backend's scheduler (of ``rules``)."""
    if not isinstance(raw, dict):
        return Status()
    reach = condition(raw, "ClusterReachable")
    return Status(
        phase=stored.enum(Phase, raw.get("phase"), Phase.PENDING),
        reason=stored.enum(Reason, raw.get("reason"), Reason.NONE),
        message=stored.text(raw.get("message")),
        backend=stored.text(raw.get("backend")),
        job_ids=stored.job_ids(raw.get("jobIDs"), rules.get(stored.text(raw.get("backend")))),
        attempt=stored.count(raw.get("attempt")),
        attempt_generation=stored.count(raw.get("attemptGeneration")),
        retries=stored.count(raw.get("retries")),
        active=stored.count(raw.get("active")),
        succeeded=stored.count(raw.get("succeeded")),
        failed=stored.count(raw.get("failed")),
        cancelled=stored.count(raw.get("cancelled")),
        exit_code=stored.exit_code(raw.get("exitCode")),
        signal=stored.signal(raw.get("signal")),
        scheduler_reason=stored.word(raw.get("schedulerReason")),
        usage=usage.from_raw(raw.get("usage")),
        submit_time=stored.timestamp(raw.get("submitTime")),
        start_time=stored.timestamp(raw.get("startTime")),
        completion_time=stored.timestamp(raw.get("completionTime")),
        logs_pod=stored.name(raw.get("logsPod")),
        cluster=route.from_raw(raw.get("cluster")),
        reachable={"True": True, "False": False}.get(stored.text(reach.get("status"))),
        reachability_reason=stored.text(reach.get("reason")),
        reachability_message=stored.text(reach.get("message")),
        spec_hash=stored.spec_hash(raw.get("attemptSpecHash")),
        inputs=transfers.from_raw(raw.get("inputs")),
        outputs=transfers.from_raw(raw.get("outputs")),
        dependencies=dependencies.from_raw(raw.get("dependencies")),
        image=image.from_raw(raw.get("image")),
    )


def to_raw(
    status: Status, *, previous: object, now: str, generation: int | None = None
) -> dict[str, Any]:
    """Render ``status`` for the API server.

    ``previous`` is the last stored status; a condition keeps its ``lastTransitionTime`` unless
    its status changed. ``generation`` is written as ``observedGeneration`` only when given
    (the DecoratorController shape, where Metacontroller does not inject it).
    """
    raw = _required(status)
    raw.update(_optional(status, generation))
    raw["conditions"] = _stamped(conditions(status), previous, now)
    return raw


def _required(status: Status) -> dict[str, Any]:
    """The fields every rendered status has: the phase, the attempt and its tasks' counts."""
    return {
        "phase": str(status.phase),
        "reason": str(status.reason),
        "message": readable(status.message),
        "backend": status.backend,
        "jobIDs": list(status.job_ids),
        "attempt": status.attempt,
        "attemptGeneration": status.attempt_generation,
        "retries": status.retries,
        "active": status.active,
        "succeeded": status.succeeded,
        "failed": status.failed,
        "cancelled": status.cancelled,
    }


def _optional(status: Status, generation: int | None) -> dict[str, Any]:
    """The fields a status has only when they are known, in a fixed order."""
    fields = {
        "exitCode": status.exit_code,
        "signal": status.signal,
        "schedulerReason": readable(status.scheduler_reason, stored.WORD_LENGTH) or None,
        "usage": usage.to_raw(status.usage),
        "submitTime": status.submit_time,
        "startTime": status.start_time,
        "completionTime": status.completion_time,
        "logsPod": status.logs_pod,
        "cluster": route.to_raw(status.cluster),
        "attemptSpecHash": status.spec_hash or None,
        "inputs": transfers.to_raw(status.inputs),
        "outputs": transfers.to_raw(status.outputs),
        "dependencies": dependencies.to_raw(status.dependencies) or None,
        "image": image.to_raw(status.image),
        "observedGeneration": generation,
    }
    return {key: value for key, value in fields.items() if value is not None}


def _stamped(
    current: list[dict[str, str]], previous: object, now: str
) -> list[dict[str, str]]:
    """``current`` with each condition's ``lastTransitionTime`` from ``previous``, unless its
    status changed."""
    kept: dict[str, Mapping[str, Any]] = {}
    for item in stored.as_list(previous.get("conditions") if isinstance(previous, dict) else None):
        if isinstance(item, dict) and isinstance(item.get("type"), str):
            kept.setdefault(item["type"], item)
    return [_stamp(condition, kept.get(condition["type"]), now) for condition in current]


NOT_COMPLETE = frozenset({Phase.FAILED, Phase.CANCELLED, Phase.UNKNOWN})
"""The phases whose ``Failed`` condition is True: as a Kubernetes Job's, every end but success
is ``Failed`` (cancelled, or a job the scheduler lost), so a wait on ``Complete`` or ``Failed``
is told of every end; the phase and reason say which."""


def conditions(status: Status) -> list[dict[str, str]]:
    """The conditions, in a fixed order, without timestamps."""
    phase, reason = status.phase, str(status.reason)
    submitted = bool(status.job_ids)
    job = ", ".join(status.job_ids[:3]) + (", ..." if len(status.job_ids) > 3 else "")
    reach_status = {None: "Unknown", True: "True", False: "False"}[status.reachable]
    return [
        _make(
            "Submitted",
            submitted,
            "Submitted" if submitted else (reason or "NotSubmitted"),
            f"Attempt {status.attempt} was submitted as {job}." if submitted else status.message,
        ),
        _make(
            "Running",
            phase is Phase.RUNNING,
            (reason or "Running") if phase is Phase.RUNNING else str(phase),
            status.message if phase is Phase.RUNNING else "",
        ),
        _make("Complete", phase is Phase.SUCCEEDED, "Succeeded" if phase is Phase.SUCCEEDED
              else str(phase), status.message if phase is Phase.SUCCEEDED else ""),
        _make("Failed", phase in NOT_COMPLETE, (reason or str(phase)) if phase in NOT_COMPLETE
              else str(phase), status.message if phase in NOT_COMPLETE else ""),
        _scheduled(status),
        {
            "type": "ClusterReachable",
            "status": reach_status,
            "reason": status.reachability_reason or ("Reachable" if status.reachable else
                                                     "NotContacted"),
            "message": status.reachability_message,
        },
        _make("Suspended", status.reason is Reason.SUSPENDED,
              "Suspended" if status.reason is Reason.SUSPENDED else "NotSuspended",
              status.message if status.reason is Reason.SUSPENDED else ""),
        *transfers.conditions(status.inputs, status.outputs),
    ]


def _scheduled(status: Status) -> dict[str, str]:
    """``Scheduled``, as a Pod's ``PodScheduled``: True once the attempt started; False while
    it waits, with its typed reason (``Queued`` for ordinary queueing)."""
    if status.start_time is not None:
        return _make("Scheduled", True, "Scheduled", "")
    if status.phase is Phase.PENDING and status.job_ids:
        return _make("Scheduled", False, str(status.reason) or "Queued", status.message)
    if status.phase is Phase.PENDING:
        return _make("Scheduled", False, "NotSubmitted", "")
    return _make("Scheduled", False, str(status.phase), "")


def _make(kind: str, true: bool, reason: str, message: str) -> dict[str, str]:
    return {"type": kind, "status": "True" if true else "False", "reason": reason,
            "message": message}


def _stamp(
    condition: dict[str, str], old: Mapping[str, Any] | None, now: str
) -> dict[str, str]:
    unchanged = old is not None and old.get("status") == condition["status"]
    when = (stored.timestamp(old.get("lastTransitionTime")) if unchanged and old is not None
            else None)
    return {**condition, "message": readable(condition["message"]),
            "lastTransitionTime": when or now}


def condition(raw: object, kind: str) -> Mapping[str, Any]:
    """The stored status's first condition of that type, or an empty mapping."""
    for item in stored.as_list(raw.get("conditions") if isinstance(raw, dict) else None):
        if isinstance(item, dict) and item.get("type") == kind:
            return item
    return {}
