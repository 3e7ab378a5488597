"""Value types shared by the core: phases, task observations, job requests and the scheduler's
answer to a submission (the reasons are in hooks.core.values.reasons)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hooks.core.values.image import Container
    from hooks.core.values.storage import DataInput, Output, S3Storage


@dataclass(frozen=True, slots=True)
class Resources:
    cpus: int | None = None
    memory_mib: int | None = None
    gpus: int | None = None
    time_limit_seconds: int | None = None
    nodes: int | None = None


DEFAULT_WORK_DIR = ".hpcbridge"
"""Where attempts live when ``spec.cluster.workDir`` is not set: ``~/.hpcbridge``."""


@dataclass(frozen=True, slots=True)
class Hop:
    """A jump host in front of the login node (one entry of ``spec.cluster.jump``)."""

    host: str
    port: int
    secret_name: str
    """The Secret to log in with: the hop's own, or the cluster's when it names none."""
    insecure_skip_host_key_check: bool = False


@dataclass(frozen=True, slots=True)
class ClusterRef:
    host: str
    port: int
    secret_name: str
    insecure_skip_host_key_check: bool
    jump: tuple[Hop, ...] = ()
    """The jump hosts, in order (``ssh -J a,b``): the login node is reached through them."""
    work_dir: str = DEFAULT_WORK_DIR
    """The directory attempts live under: absolute, or relative to the login user's home."""
    site: str = ""
    """The BatchCluster the route comes from (``spec.cluster.name``); empty for a route the
    BatchJob names itself."""
    known_hosts: str = field(default="", repr=False, compare=False)
    """The BatchCluster's ``knownHosts`` at submission: with a ``site``, the only host keys
    trusted along the route besides the BatchCluster's current ones (never a Secret's)."""

    @property
    def secret_names(self) -> tuple[str, ...]:
        """Every Secret the route to the login node needs, the login node's first."""
        return tuple(dict.fromkeys([self.secret_name, *(hop.secret_name for hop in self.jump)]))


@dataclass(frozen=True, slots=True)
class ObjectKey:
    """One key of a Secret or ConfigMap (``secretKeyRef``, ``configMapKeyRef``)."""

    kind: str
    """``Secret`` or ``ConfigMap``."""
    name: str
    key: str
    optional: bool = False


@dataclass(frozen=True, slots=True)
class EnvVar:
    """One entry of ``spec.env``: a literal value, or one read from a Secret or ConfigMap."""

    name: str
    value: str = field(default="", repr=False)
    source: ObjectKey | None = None


@dataclass(frozen=True, slots=True)
class Input:
    """One entry of ``spec.inputs``: files from a Secret's or ConfigMap's keys."""

    kind: str
    """``Secret`` or ``ConfigMap``."""
    name: str
    path: str = ""
    """The sub-directory of the job's directory the files go to; empty for the directory."""
    items: tuple[tuple[str, str], ...] = ()
    """(key, file path) pairs; empty: every key, each as a file of its name."""
    optional: bool = False


class Condition(enum.StrEnum):
    """What a dependency must reach: success, a failure or cancellation, or either."""

    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    FINISHED = "Finished"


@dataclass(frozen=True, slots=True)
class Dependency:
    """One entry of ``spec.dependsOn``: another BatchJob of the namespace, and its condition."""

    name: str
    condition: Condition = Condition.SUCCEEDED


DEPENDENCY_GRACE_SECONDS = 300
"""How long a dependency may not exist, from the dependent's creation, by default."""


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
    env: tuple[EnvVar, ...] = ()
    inputs: tuple[Input, ...] = ()
    suspend: bool = False
    active_deadline_seconds: int | None = None
    depends_on: tuple[Dependency, ...] = ()
    dependency_grace_seconds: int = DEPENDENCY_GRACE_SECONDS
    storage: S3Storage | None = None
    """``spec.storage.s3``: the object store of the S3 inputs and outputs."""
    data_inputs: tuple[DataInput, ...] = ()
    """The entries of ``spec.inputs`` fetched by the inputs mover (S3, claims)."""
    outputs: tuple[Output, ...] = ()
    container: Container | None = None
    """``spec.container``: the image the attempt runs, ``script`` (empty: none) inside it."""


def attempt_key(uid: str, attempt: int) -> str:
    """Attempt ``attempt`` of the BatchJob ``uid`` as the cluster knows it (job name, key)."""
    return f"{uid}-{attempt}"


@dataclass(frozen=True, slots=True)
class InputFile:
    """A file written into the attempt's directory before the job is submitted."""

    path: str
    """Relative to the attempt's directory."""
    content: bytes = field(repr=False)


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
    environment: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    """``spec.env`` resolved: (name, value) pairs the job sees."""
    inputs: tuple[InputFile, ...] = ()
    """``spec.inputs`` resolved."""
    staging: str = ""
    """Where the inputs mover staged the attempt's S3 and claim inputs (moved in by the
    guarded submission); empty without such inputs."""
    staged: tuple[str, ...] = ()
    """The files and directories those inputs make at the top of the attempt's directory."""
    pool_image: str = ""
    """The image the scheduler runs the job in itself (HTCondor's ``container_image``): a
    SIF file in the site's cache, or ``docker://registry/repository@digest``; empty when the
    job's script runs the image, or there is none."""

    @property
    def key(self) -> str:
        """The attempt's identity on the cluster: ``<uid>-<attempt>``."""
        return attempt_key(self.uid, self.attempt)

    @property
    def remote_dir(self) -> str:
        """The attempt's directory: absolute, or relative to the login user's home."""
        return attempt_dir(self.spec.cluster.work_dir, self.namespace, self.name, self.uid,
                           self.attempt)


def job_root(work_dir: str, namespace: str, name: str, uid: str) -> str:
    """The BatchJob's remote directory under ``work_dir``: absolute, or relative to the login
    user's home (remote programs resolve it so)."""
    return f"{work_dir}/{namespace}/{name}/{uid}"


def attempt_dir(work_dir: str, namespace: str, name: str, uid: str, attempt: int) -> str:
    """Attempt ``attempt``'s directory: its guard, script, job id, output and end marker."""
    return f"{job_root(work_dir, namespace, name, uid)}/attempt-{attempt}"


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


