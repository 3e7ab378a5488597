"""Value types shared by the core: phases, reasons, task observations, job requests and the
scheduler's answer to a submission."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class Phase(enum.StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"
    UNKNOWN = "Unknown"


TERMINAL_PHASES = frozenset({Phase.SUCCEEDED, Phase.FAILED, Phase.CANCELLED})


class Reason(enum.StrEnum):
    """Typed reasons of the BatchJob API; ``NONE`` while all is well."""

    NONE = ""
    INVALID_SPEC = "InvalidSpec"
    SECRET_NOT_FOUND = "SecretNotFound"
    INVALID_SECRET = "InvalidSecret"
    HOST_KEY_MISMATCH = "HostKeyMismatch"
    AUTHENTICATION_FAILED = "AuthenticationFailed"
    CLUSTER_UNREACHABLE = "ClusterUnreachable"
    SUBMITTING = "Submitting"
    SUBMIT_FAILED = "SubmitFailed"
    NON_ZERO_EXIT_CODE = "NonZeroExitCode"
    TIMEOUT = "Timeout"
    OUT_OF_MEMORY = "OutOfMemory"
    NODE_FAIL = "NodeFail"
    BOOT_FAIL = "BootFail"
    PREEMPTED = "Preempted"
    BACKOFF_LIMIT_EXCEEDED = "BackoffLimitExceeded"
    HELD = "Held"
    SUSPENDED = "Suspended"
    CANCELLED_ON_CLUSTER = "CancelledOnCluster"
    DELETED = "Deleted"
    JOB_NOT_FOUND = "JobNotFound"
    UNKNOWN_STATE = "UnknownSchedulerState"
    """A scheduler state the hooks do not know: reported as such, never guessed."""


INFRASTRUCTURE_REASONS = frozenset({Reason.NODE_FAIL, Reason.BOOT_FAIL, Reason.PREEMPTED})
"""Failures of the cluster rather than of the job: resubmitted within ``backoffLimit``."""

CONNECTION_REASONS = frozenset(
    {
        Reason.SECRET_NOT_FOUND,
        Reason.INVALID_SECRET,
        Reason.HOST_KEY_MISMATCH,
        Reason.AUTHENTICATION_FAILED,
        Reason.CLUSTER_UNREACHABLE,
    }
)
"""Reasons that say the cluster could not be asked; the user or time fixes them."""


class Outcome(enum.StrEnum):
    """Where one task (SLURM job or array task, HTCondor proc) stands."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    UNKNOWN = "unknown"

    @property
    def is_active(self) -> bool:
        """Pending or running: the task has not ended."""
        return self in (Outcome.PENDING, Outcome.RUNNING)


@dataclass(frozen=True, slots=True)
class TaskState:
    """One task as the scheduler reports it, already mapped to our terms."""

    task_id: str
    outcome: Outcome
    reason: Reason = Reason.NONE
    message: str = ""
    exit_code: int | None = None
    submit_time: str | None = None
    start_time: str | None = None
    end_time: str | None = None


@dataclass(frozen=True, slots=True)
class Resources:
    cpus: int | None = None
    memory_mib: int | None = None
    gpus: int | None = None
    time_limit_seconds: int | None = None
    nodes: int | None = None


@dataclass(frozen=True, slots=True)
class ClusterRef:
    host: str
    port: int
    secret_name: str
    insecure_skip_host_key_check: bool


@dataclass(frozen=True, slots=True)
class Spec:
    """A validated BatchJob spec."""

    backend: str
    cluster: ClusterRef
    script: str
    resources: Resources = field(default_factory=Resources)
    options: Any = None
    """The scheduler's own block (``spec.slurm``, ``spec.htcondor``), as its package parsed it."""
    logs_pod: bool = True
    logs_follow: bool = False
    backoff_limit: int = 0


def attempt_key(uid: str, attempt: int) -> str:
    """Attempt ``attempt`` of the BatchJob ``uid`` as the cluster knows it (job name, key)."""
    return f"{uid}-{attempt}"


@dataclass(frozen=True, slots=True)
class JobRequest:
    """What a backend needs to submit one attempt of one BatchJob."""

    namespace: str
    name: str
    uid: str
    attempt: int
    spec: Spec
    guard_stale: int
    """Seconds after which a submission guard without a job id is taken over
    (``HPCBRIDGE_GUARD_STALE``)."""

    @property
    def key(self) -> str:
        """The attempt's identity on the cluster: ``<uid>-<attempt>``."""
        return attempt_key(self.uid, self.attempt)

    @property
    def remote_dir(self) -> str:
        """The attempt's directory, relative to the login user's home."""
        return attempt_dir(self.namespace, self.name, self.uid, self.attempt)


def job_root(namespace: str, name: str, uid: str) -> str:
    """The BatchJob's remote directory, relative to the login user's home."""
    return f".hpcbridge/{namespace}/{name}/{uid}"


def attempt_dir(namespace: str, name: str, uid: str, attempt: int) -> str:
    """Attempt ``attempt``'s directory: its guard, script, job id, output and end marker."""
    return f"{job_root(namespace, name, uid)}/attempt-{attempt}"


@dataclass(frozen=True, slots=True)
class JobRef:
    """An attempt to look up on the cluster: its key, and the job id if one was recorded."""

    key: str
    job_id: str | None
    expected_tasks: tuple[str, ...] = ()


class SubmitAnswer(enum.StrEnum):
    """The guarded submission's answer (``hooks.schedulers.guard``)."""

    SUBMITTED = "submitted"
    EXISTING = "existing"
    """The attempt had a job already; its id is answered again."""
    IN_FLIGHT = "inflight"
    REFUSED = "refused"
    TRANSIENT = "transient"
    """The scheduler could not be asked; whether the job got in is unknown."""


@dataclass(frozen=True, slots=True)
class SubmitOutcome:
    answer: SubmitAnswer
    job_id: str = ""
    message: str = ""


class SchedulerError(Exception):
    """The scheduler did not answer (e.g. slurmctld down); transient, the cluster is reachable."""
