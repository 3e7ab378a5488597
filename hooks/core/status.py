"""The BatchJob status: reading the last one from a request, and rendering a new one.

Status is a pure function of what was observed: the same observation renders the same status,
byte for byte, so Metacontroller's status write does not trigger syncs forever. The only time
that enters is ``now`` for a condition whose status flips, and the submit time of a new attempt.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from hooks.core import transfers
from hooks.core.fields import INT32, INT64, SpecError
from hooks.core.layout import DNS_SUBDOMAIN, cluster_ref
from hooks.core.model import DEFAULT_WORK_DIR, TERMINAL_PHASES, ClusterRef, Phase, Reason
from hooks.core.scheduler import Rules, SchedulerRules
from hooks.core.text import readable

CONDITION_TYPES = ("Submitted", "Running", "Complete", "Failed", "ClusterReachable",
                   "Suspended")
SPEC_HASH = re.compile(r"[0-9a-f]{16}")
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


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
    (``hooks.core.spec.digest``): a new generation with the same digest is no new spec."""
    inputs: transfers.Transfer | None = None
    """What the inputs mover did for the attempt (``spec.inputs`` from S3 or a claim)."""
    outputs: transfers.Transfer | None = None
    """What the outputs mover did after the attempt's end (``spec.outputs``)."""

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
        phase=_enum(Phase, raw.get("phase"), Phase.PENDING),
        reason=_enum(Reason, raw.get("reason"), Reason.NONE),
        message=_text(raw.get("message")),
        backend=_text(raw.get("backend")),
        job_ids=_job_ids(raw.get("jobIDs"), rules.get(_text(raw.get("backend")))),
        attempt=_count(raw.get("attempt")),
        attempt_generation=_count(raw.get("attemptGeneration")),
        retries=_count(raw.get("retries")),
        active=_count(raw.get("active")),
        succeeded=_count(raw.get("succeeded")),
        failed=_count(raw.get("failed")),
        cancelled=_count(raw.get("cancelled")),
        exit_code=_exit_code(raw.get("exitCode")),
        submit_time=_time(raw.get("submitTime")),
        start_time=_time(raw.get("startTime")),
        completion_time=_time(raw.get("completionTime")),
        logs_pod=_name(raw.get("logsPod")),
        cluster=_cluster(raw.get("cluster")),
        reachable={"True": True, "False": False}.get(_text(reach.get("status"))),
        reachability_reason=_text(reach.get("reason")),
        reachability_message=_text(reach.get("message")),
        spec_hash=_spec_hash(raw.get("attemptSpecHash")),
        inputs=transfers.from_raw(raw.get("inputs")),
        outputs=transfers.from_raw(raw.get("outputs")),
    )


def to_raw(
    status: Status, *, previous: object, now: str, generation: int | None = None
) -> dict[str, Any]:
    """Render ``status`` for the API server.

    ``previous`` is the last stored status; a condition keeps its ``lastTransitionTime`` unless
    its status changed. ``generation`` is written as ``observedGeneration`` only when given
    (the DecoratorController shape, where Metacontroller does not inject it).
    """
    raw: dict[str, Any] = {
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
    optional = {
        "exitCode": status.exit_code,
        "submitTime": status.submit_time,
        "startTime": status.start_time,
        "completionTime": status.completion_time,
        "logsPod": status.logs_pod,
        "cluster": _cluster_raw(status.cluster),
        "attemptSpecHash": status.spec_hash or None,
        "inputs": transfers.to_raw(status.inputs),
        "outputs": transfers.to_raw(status.outputs),
        "observedGeneration": generation,
    }
    raw.update({key: value for key, value in optional.items() if value is not None})
    raw["conditions"] = _stamped(conditions(status), previous, now)
    return raw


def _stamped(
    current: list[dict[str, str]], previous: object, now: str
) -> list[dict[str, str]]:
    """``current`` with each condition's ``lastTransitionTime`` from ``previous``, unless its
    status changed."""
    stored: dict[str, Mapping[str, Any]] = {}
    for item in _list(previous.get("conditions") if isinstance(previous, dict) else None):
        if isinstance(item, dict) and isinstance(item.get("type"), str):
            stored.setdefault(item["type"], item)
    return [_stamp(condition, stored.get(condition["type"]), now) for condition in current]


def conditions(status: Status) -> list[dict[str, str]]:
    """The five conditions, in a fixed order, without timestamps."""
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
        _make("Failed", phase is Phase.FAILED, reason if phase is Phase.FAILED else str(phase),
              status.message if phase is Phase.FAILED else ""),
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


def _make(kind: str, true: bool, reason: str, message: str) -> dict[str, str]:
    return {"type": kind, "status": "True" if true else "False", "reason": reason,
            "message": message}


def _stamp(
    condition: dict[str, str], old: Mapping[str, Any] | None, now: str
) -> dict[str, str]:
    unchanged = old is not None and old.get("status") == condition["status"]
    when = _time(old.get("lastTransitionTime")) if unchanged and old is not None else None
    return {**condition, "message": readable(condition["message"]),
            "lastTransitionTime": when or now}


def condition(raw: object, kind: str) -> Mapping[str, Any]:
    """The stored status's first condition of that type, or an empty mapping."""
    for item in _list(raw.get("conditions") if isinstance(raw, dict) else None):
        if isinstance(item, dict) and item.get("type") == kind:
            return item
    return {}


def _cluster(raw: object) -> ClusterRef | None:
    """Where the attempt was submitted, if the stored status says so in a form the spec takes
    (``hooks.core.layout.cluster_ref``): anything else is no cluster."""
    try:
        return cluster_ref(raw, "status.cluster")
    except SpecError:
        return None


def _cluster_raw(cluster: ClusterRef | None) -> dict[str, Any] | None:
    if cluster is None:
        return None
    raw = _login_raw(cluster.host, cluster.port, cluster.secret_name,
                     cluster.insecure_skip_host_key_check)
    if cluster.jump:
        raw["jump"] = [_login_raw(hop.host, hop.port, hop.secret_name,
                                  hop.insecure_skip_host_key_check) for hop in cluster.jump]
    if cluster.work_dir != DEFAULT_WORK_DIR:
        raw["workDir"] = cluster.work_dir
    return raw


def _login_raw(host: str, port: int, secret: str, insecure: bool) -> dict[str, Any]:
    return {"host": host, "port": port, "secretRef": {"name": secret},
            "insecureSkipHostKeyCheck": insecure}


def _job_ids(value: object, scheduler: SchedulerRules | None) -> tuple[str, ...]:
    """The stored task ids of the attempt, if they are all of one job and of its scheduler's
    form; else none (a sync then submits the attempt again, and its guard answers the job id
    it recorded)."""
    if scheduler is None:
        return ()
    ids = [i if isinstance(i, str) else str(i) if 0 <= i < 10**20 else "" for i in _list(value)
           if isinstance(i, (str, int)) and not isinstance(i, bool)]
    found = [scheduler.task_id_pattern.fullmatch(i) for i in ids]
    if not all(found) or len({m.group(1) for m in found if m}) > 1:
        return ()
    return tuple(ids)


def _spec_hash(value: object) -> str:
    return value if isinstance(value, str) and SPEC_HASH.fullmatch(value) else ""


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _enum(kind: Any, value: object, default: Any) -> Any:
    try:
        return kind(value)
    except ValueError:
        return default


def _count(value: object) -> int:
    """A stored count or generation: positive, and within int64 like a generation."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= INT64:
        return value
    return 0


def _exit_code(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and -INT32 <= value <= INT32:
        return value
    return None


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _time(value: object) -> str | None:
    """A stored time as the hooks write it (``2026-11-22T10:00:05Z``), else None."""
    return value if isinstance(value, str) and TIME.fullmatch(value) else None


def _name(value: object) -> str | None:
    return value if isinstance(value, str) and DNS_SUBDOMAIN.fullmatch(value) else None
