"""The backend interface: what the hooks ask of a scheduler, over one SSH connection.

::

    JobRequest ------------>|  submit          (guarded: at most one job per attempt)
    SubmitOutcome <---------|---+
    [JobRef] -------------->|  query           (one squeue/condor_q for all, then the
    {key: [TaskState]} <----|---+               accounting/history for what left the queue)
    uid ------------------->|  active_jobs     (every active job of one BatchJob)
    [job id] -------------->|  cancel
    JobRequest.remote_dir   |  output location: the scheduler writes <task>.out/.err there

Every method takes the connection and a deadline in seconds, raises ``hooks.ssh.errors``
for transport trouble and ``SchedulerError`` when the scheduler itself fails to answer.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from hooks.core.model import JobRef, JobRequest, Spec, TaskState
from hooks.ssh.client import Remote


class Deadline:
    """Seconds left of a budget shared by the commands of one batched query."""

    def __init__(self, seconds: float) -> None:
        self._end = time.monotonic() + seconds

    def __call__(self) -> float:
        left = self._end - time.monotonic()
        if left < 1:
            raise TimeoutError("the batched query ran out of time")
        return left


def chunks(items: Sequence[str], size: int) -> list[Sequence[str]]:
    """``items`` in runs of at most ``size``, so that no command line grows with N."""
    return [items[i:i + size] for i in range(0, len(items), size)]


class SchedulerError(Exception):
    """The scheduler did not answer (e.g. slurmctld down); transient, the cluster is reachable."""


class Submitted(enum.StrEnum):
    NEW = "submitted"
    EXISTING = "existing"
    IN_FLIGHT = "inflight"
    REFUSED = "refused"
    TRANSIENT = "transient"


@dataclass(frozen=True, slots=True)
class SubmitOutcome:
    kind: Submitted
    job_id: str = ""
    message: str = ""


class Backend(Protocol):
    name: str

    def submit(self, conn: Remote, job: JobRequest, *, timeout: float) -> SubmitOutcome: ...

    def query(
        self, conn: Remote, refs: Sequence[JobRef], *, timeout: float, whole_queue: bool = True
    ) -> Mapping[str, Sequence[TaskState]]:
        """The tasks of every attempt in ``refs`` by key (an empty list for one the scheduler
        does not show), from one listing of the login user's jobs of ours plus the accounting
        or history of those that left it.

        With ``whole_queue``, the answer also holds every other attempt of ours that the queue
        listing showed, as the listing shows it: without the accounting of its finished tasks
        and without the check against a recorded job id, which only ``refs`` carry.
        """
        ...

    def active_jobs(self, conn: Remote, uid: str, *, timeout: float) -> Sequence[str]:
        """The BatchJob's jobs that are still active, one id per job (a SLURM array, an
        HTCondor cluster), ready for ``cancel``."""
        ...

    def cancel(self, conn: Remote, job_ids: Sequence[str], *, timeout: float) -> None: ...

    def expected_tasks(self, spec: Spec, job_id: str) -> tuple[str, ...]: ...

    def job_name(self, key: str) -> str: ...

    def job_id(self, task_id: str) -> str:
        """The id of the job (SLURM array, HTCondor cluster) a task id belongs to."""
        ...
