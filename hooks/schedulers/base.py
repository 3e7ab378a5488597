"""The scheduler contract: what a scheduler package provides, and the transport its commands
go over.

A scheduler owns everything about its scheduler: the pure rules the core asks for
(``hooks.core.values.sdk.SchedulerRules``), the operations below, and which transport they need.
A transport is how the hook server reaches a cluster (the SSH shell of ``hooks.schedulers.shell``;
an HTTP client for a REST API would be another): the runtime builds one of each kind the
registry names, the executor opens it for the route of a call and hands the open connection
to the scheduler, and knows nothing else of either::

    Runtime      builds  scheduler.transport(settings, metrics)    once per kind
    Executor     opens   transport.open(cluster, access, deadline)  -> conn
                 calls   scheduler.<operation>(conn, ..., deadline=...)

    JobRequest ------------>|  submit          (at most one job per attempt)
    SubmitOutcome <---------|---+
    [JobRef] -------------->|  query           (one listing for all, then the
    {key: [TaskState]} <----|---+               accounting/history for what left the queue)
    uid ------------------->|  active_jobs     (every active job of one BatchJob)
    [job id] -------------->|  cancel
    [job id] -------------->|  hold, release   (spec.suspend, for jobs waiting in the queue)
    remote_dir, phase ----->|  mark_ended      (the ``ended`` marker the log Pod waits for)
    ImagePull ------------->|  prepare_image   (the image in the site's cache, or its pull)
                            |  container_support (what the execute nodes run themselves;
                            |                     asked only of a scheduler with own_containers)
    root, stale ----------->|  remove_directory (the BatchJob's directory, when it is deleted)

Every operation takes the open connection and a ``Deadline``; the transport raises
``TransportError`` (a typed reason and one sentence) for its trouble, on opening or under an
operation, and an operation raises ``SchedulerError`` when the scheduler itself fails to
answer. ``docs/schedulers.md`` says what a new scheduler package must provide.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar

from hooks.core.decide.effects import Access, Trouble
from hooks.core.values.image import ImagePull, PoolContainers, PreparedImage
from hooks.core.values.job import ClusterRef, JobRef, JobRequest, SubmitOutcome
from hooks.core.values.phases import TaskState
from hooks.core.values.reasons import Reason
from hooks.core.values.sdk import SchedulerRules
from hooks.deadline import Deadline
from hooks.metrics import Metrics
from hooks.settings import Settings

Opened = TypeVar("Opened", covariant=True)
Taken = TypeVar("Taken", contravariant=True)
"""What a transport opens and a scheduler's operations run over (``hooks.ssh.client.Remote``)."""


def chunks(items: Sequence[str], size: int) -> list[Sequence[str]]:
    """``items`` in runs of at most ``size``, so that no command line grows with N."""
    return [items[i:i + size] for i in range(0, len(items), size)]


class TransportError(Exception):
    """What keeps a transport from reaching the scheduler: the BatchJob's ``reason`` (whether
    waiting can help or the user has to act) and one ``sentence`` fit for ``status.message``."""

    def __init__(self, reason: Reason, sentence: str) -> None:
        super().__init__(sentence)
        self.reason = reason
        self.sentence = sentence


class Transport(Protocol[Opened]):
    """The way to clusters of one kind, one per hook server, shared by its schedulers.

    Its trouble, on ``open`` or under the connection it yields, comes out as
    ``TransportError``."""

    @property
    def overrun(self) -> float:
        """Seconds a command can take past its deadline's remote limit before its caller has
        the answer: the executor keeps them free of each command's timeout."""
        ...

    def key(self, cluster: ClusterRef, access: Access) -> str:
        """Who answers over this route with these logins: calls with the same key share a
        connection and the shared status (a different login sees other jobs)."""
        ...

    def open(
        self, cluster: ClusterRef, access: Access, *, deadline: Deadline
    ) -> AbstractContextManager[Opened]:
        """A connection to the cluster's scheduler, for the length of the ``with``."""
        ...

    def evict_idle(self, idle_seconds: float) -> int:
        """Drop connections unused for ``idle_seconds``; how many were dropped."""
        ...

    def close(self) -> None: ...


TransportKind = Callable[[Settings, Metrics], Transport[Any]]
"""Builds a transport from the server's settings and metrics (a ``Transport`` class)."""


class Scheduler(SchedulerRules, Protocol[Taken]):
    @property
    def transport(self) -> TransportKind:
        """The transport the operations below need; the runtime builds one per kind."""
        ...

    def submit(self, conn: Taken, job: JobRequest, *, deadline: Deadline) -> SubmitOutcome: ...

    def query(
        self, conn: Taken, refs: Sequence[JobRef], *, deadline: Deadline,
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

    def active_jobs(self, conn: Taken, uid: str, *, deadline: Deadline) -> Sequence[str]:
        """The BatchJob's jobs that are still active, one id per job (a SLURM array, an
        HTCondor cluster), ready for ``cancel``."""
        ...

    def cancel(self, conn: Taken, job_ids: Sequence[str], *, deadline: Deadline) -> None: ...

    def hold(self, conn: Taken, job_ids: Sequence[str], *, deadline: Deadline) -> None:
        """Keep these waiting jobs from starting (``spec.suspend``); a job that is held
        already, or has started meanwhile, is no error."""
        ...

    def release(self, conn: Taken, job_ids: Sequence[str], *, deadline: Deadline) -> None:
        """Let these held jobs start; a job that is not held is no error."""
        ...

    def mark_ended(self, conn: Taken, remote_dir: str, phase: str, *,
                   deadline: Deadline) -> None:
        """Record the attempt's final ``phase`` in its directory (the log Pod stops following
        when it appears) and remove what it no longer needs (its env file)."""
        ...

    def prepare_image(self, conn: Taken, pull: ImagePull, *,
                      deadline: Deadline) -> PreparedImage:
        """Find ``spec.container``'s image in the site's cache, or start or follow its pull
        into it, in the background (``hooks.schedulers.image_cache``)."""
        ...

    def container_support(self, conn: Taken, *, deadline: Deadline) -> PoolContainers:
        """Which images the execute nodes run themselves (``own_containers``); a scheduler
        without such support answers ``PoolContainers()``."""
        ...

    def remove_directory(self, conn: Taken, root: str, stale_seconds: int, *,
                         deadline: Deadline) -> str | Trouble:
        """Remove a deleted BatchJob's directory ``root``: ``removed``, ``gone`` (nothing was
        there) or ``busy`` (a submission younger than ``stale_seconds`` may still be in
        flight), or the trouble that kept it."""
        ...


Registry = Mapping[str, Scheduler[Any]]
"""Every scheduler by its ``spec.backend`` name (``hooks.schedulers.registry.REGISTRY``)."""
