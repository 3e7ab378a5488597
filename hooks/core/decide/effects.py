"""What a decision of the core asks the shell to do, and what it answers in the end.

A hook call is decided by a pure generator (``hooks.core.decide.sync.decide``,
``hooks.core.decide.finalize.decide``), read top to bottom: it yields each ``Effect`` (one remote
action on one cluster, with the logins of its route), receives the action's result
(``outcome = yield Effect(where, access, Submit(job))``) and returns the ``Answer``. The shell
(``hooks.executor``) runs each effect and sends the result back until the answer comes out; it
never decides anything itself. Results are the action's value (``SubmitOutcome``, the
attempt's ``TaskState`` list, job ids, ``None`` for a cancel, the cleanup's word) or a
``Trouble`` when the cluster could not be asked.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from hooks.core.sites.secret import Credentials
from hooks.core.spec.batchjob import Placement
from hooks.core.status.record import Status
from hooks.core.values.image import (
    ImagePull,
    ImageRef,
    PoolContainers,
    PreparedImage,
    ResolvedImage,
)
from hooks.core.values.job import JobRef, JobRequest, SubmitOutcome
from hooks.core.values.phases import TaskState
from hooks.core.values.reasons import Reason


@dataclass(frozen=True, slots=True)
class Trouble:
    """The cluster could not be asked: the typed reason and one sentence."""

    reason: Reason
    message: str


@dataclass(frozen=True, slots=True)
class Submit:
    """Submit the attempt, guarded (answers ``SubmitOutcome``)."""

    job: JobRequest


@dataclass(frozen=True, slots=True)
class Query:
    """Look the attempt up, through the shared status (answers its ``TaskState`` list)."""

    ref: JobRef


@dataclass(frozen=True, slots=True)
class Track:
    """Include the just submitted attempt in the shared status's next refresh."""

    ref: JobRef


@dataclass(frozen=True, slots=True)
class Forget:
    """Leave the attempt ``key`` out of the shared status's refreshes: it is over."""

    key: str


@dataclass(frozen=True, slots=True)
class MarkEnded:
    """Write the attempt's end (its final phase) into its directory ``remote_dir``, where a
    following log Pod reads it instead of asking the scheduler, and remove the attempt's env
    file, which no job of it reads any more (answers ``None``)."""

    remote_dir: str
    phase: str


@dataclass(frozen=True, slots=True)
class Hold:
    """Hold these pending jobs: ``spec.suspend`` (answers ``None``)."""

    job_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Release:
    """Release these held jobs: ``spec.suspend`` is false again (answers ``None``)."""

    job_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ListActive:
    """Every active job of the BatchJob ``uid`` (answers a tuple of job ids)."""

    uid: str


@dataclass(frozen=True, slots=True)
class Cancel:
    """Cancel these jobs (answers ``None``)."""

    job_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ResolveImage:
    """Ask the image's registry which digest the reference names, and the image's config
    (answers ``ResolvedImage``, or ``Trouble`` with the registry's word: ``ImagePullBackOff``
    for an answer that refuses, ``ClusterUnreachable`` when it could not be asked). ``allowed``
    are the registries the site lists, asked whatever their address."""

    image: ImageRef
    credentials: tuple[str, str] | None = field(repr=False)
    allowed: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PrepareImage:
    """Find the image in the site's cache on the login node, or start or follow its pull
    there (answers ``PreparedImage``)."""

    pull: ImagePull


@dataclass(frozen=True, slots=True)
class ProbeContainers:
    """Ask the scheduler whether its execute nodes run images themselves (answers
    ``PoolContainers``)."""


@dataclass(frozen=True, slots=True)
class Cleanup:
    """Remove the BatchJob's remote directory ``root`` unless a submission younger than
    ``stale`` seconds is in flight there (answers ``removed``, ``gone`` or ``busy``)."""

    root: str
    stale: int


Action = (Submit | Query | Track | Forget | MarkEnded | Hold | Release | ListActive | Cancel
          | Cleanup | ResolveImage | PrepareImage | ProbeContainers)
Result = (SubmitOutcome | Sequence[TaskState] | tuple[str, ...] | str | None | Trouble
          | ResolvedImage | PreparedImage | PoolContainers)


@dataclass(frozen=True, slots=True)
class Access:
    """The logins of a route: the login node's, and each jump host's in the order of
    ``placement.cluster.jump``."""

    login: Credentials
    hops: tuple[Credentials, ...] = ()


@dataclass(frozen=True, slots=True)
class Effect:
    """Run ``action`` on the cluster of ``placement``, logged in with ``access``."""

    placement: Placement
    access: Access
    action: Action


@dataclass(frozen=True, slots=True)
class Answer:
    """The response body, the status it carries, and what the shell logs and counts."""

    body: dict[str, Any]
    status: Status
    notes: tuple[str, ...] = ()
    """Lines for the hook server's log (info)."""
    gave_up: bool = False
    """A deletion finished without reaching the cluster (logged as a warning and counted)."""


T = TypeVar("T")
Effects = Generator[Effect, Any, T]
"""A part of a decision: yields effects, receives each one's ``Result``, returns a ``T``."""
Decision = Effects[Answer]
"""A whole hook call: the effects it runs, then its ``Answer``."""
