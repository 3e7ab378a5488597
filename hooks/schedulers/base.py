"""What a scheduler package provides: its pure part (the core's ``SchedulerRules``) and the
remote commands the hooks run over one SSH connection.

::

    JobRequest ------------>|  submit          (guarded: at most one job per attempt)
    SubmitOutcome <---------|---+
    [JobRef] -------------->|  query           (one squeue/condor_q for all, then the
    {key: [TaskState]} <----|---+               accounting/history for what left the queue)
    uid ------------------->|  active_jobs     (every active job of one BatchJob)
    [job id] -------------->|  cancel
    [job id] -------------->|  hold, release   (spec.suspend, for jobs waiting in the queue)
    JobRequest.remote_dir   |  output location: the scheduler writes <task>.out/.err there

Every remote method takes the connection and a ``Deadline``, raises ``hooks.ssh.errors`` for
transport trouble and ``SchedulerError`` when the scheduler itself fails to answer.
``docs/schedulers.md`` says what a new scheduler package must provide.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from hooks.core.model import JobRef, JobRequest, SubmitOutcome, TaskState
from hooks.core.scheduler import SchedulerRules
from hooks.deadline import Deadline
from hooks.ssh.client import Remote


def chunks(items: Sequence[str], size: int) -> list[Sequence[str]]:
    """``items`` in runs of at most ``size``, so that no command line grows with N."""
    return [items[i:i + size] for i in range(0, len(items), size)]


class Scheduler(SchedulerRules, Protocol):
    def submit(self, conn: Remote, job: JobRequest, *, deadline: Deadline) -> SubmitOutcome: ...

    def query(
        self, conn: Remote, refs: Sequence[JobRef], *, deadline: Deadline,
        whole_queue: bool = True,
    ) -> Mapping[str, Sequence[TaskState]]:
        """The tasks of every attempt in ``refs`` by key (an empty list for one the scheduler
        does not show), from one listing of the login user's jobs of ours plus the accounting
        or history of those that left it.

        With ``whole_queue``, the answer also holds every other attempt of ours that the queue
        listing showed, as the listing shows it: without the accounting of its finished tasks
        and without the check against a recorded job id, which only ``refs`` carry.
        """
        ...

    def active_jobs(self, conn: Remote, uid: str, *, deadline: Deadline) -> Sequence[str]:
        """The BatchJob's jobs that are still active, one id per job (a SLURM array, an
        HTCondor cluster), ready for ``cancel``."""
        ...

    def cancel(self, conn: Remote, job_ids: Sequence[str], *, deadline: Deadline) -> None: ...

    def hold(self, conn: Remote, job_ids: Sequence[str], *, deadline: Deadline) -> None:
        """Keep these waiting jobs from starting (``spec.suspend``); a job that is held
        already, or has started meanwhile, is no error."""
        ...

    def release(self, conn: Remote, job_ids: Sequence[str], *, deadline: Deadline) -> None:
        """Let these held jobs start; a job that is not held is no error."""
        ...


Registry = Mapping[str, Scheduler]
"""Every scheduler by its ``spec.backend`` name (``hooks.schedulers.REGISTRY``)."""
