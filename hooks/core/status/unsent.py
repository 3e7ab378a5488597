"""The statuses of an attempt that waits before anything of it is sent to the cluster:
suspended, its inputs being staged, or the BatchJobs it depends on; and its end when one of
those can no longer be met. Pure: no I/O."""

from __future__ import annotations

from dataclasses import replace

from hooks.core.status.dependencies import Seen
from hooks.core.status.lifecycle import Plan, fresh
from hooks.core.status.record import Status
from hooks.core.values.job import ClusterRef
from hooks.core.values.phases import Phase
from hooks.core.values.reasons import Reason


def suspended(prev: Status, p: Plan, *, backend: str) -> Status:
    """``spec.suspend`` before the attempt was submitted: it waits, nothing is sent."""
    return replace(
        fresh(prev, p, backend),
        reason=Reason.SUSPENDED,
        message=f"The BatchJob is suspended; attempt {p.attempt} is submitted once "
                "spec.suspend is false.",
    )


def waiting_for_dependencies(prev: Status, p: Plan, *, backend: str, message: str,
                             seen: tuple[Seen, ...]) -> Status:
    """The attempt waits for the BatchJobs it depends on; nothing is sent, not even its
    inputs."""
    return replace(fresh(prev, p, backend), reason=Reason.WAITING_FOR_DEPENDENCY,
                   message=message, dependencies=seen)


def dependency_failed(prev: Status, p: Plan, *, backend: str, message: str,
                      seen: tuple[Seen, ...]) -> Status:
    """A dependency can no longer reach its condition: the attempt ends unsent."""
    return replace(fresh(prev, p, backend), phase=Phase.FAILED,
                   reason=Reason.DEPENDENCY_FAILED, message=message, dependencies=seen)


def staging(
    prev: Status, p: Plan, *, backend: str, cluster: ClusterRef, reason: Reason, message: str,
) -> Status:
    """The attempt waits for its S3 or claim inputs to be staged (``hooks.core.decide.staging``)."""
    return replace(fresh(prev, p, backend, cluster), reason=reason, message=message)


def refused(
    prev: Status, p: Plan, *, backend: str, cluster: ClusterRef, message: str,
) -> Status:
    """What the attempt asks cannot run where it is routed, found only by asking the cluster
    (``InvalidSpec``): it ends unsent, and an edit of the spec starts a new attempt."""
    return replace(fresh(prev, p, backend, cluster), phase=Phase.FAILED,
                   reason=Reason.INVALID_SPEC, message=message)


def never_pulled(
    prev: Status, p: Plan, *, backend: str, cluster: ClusterRef, message: str,
) -> Status:
    """``imagePullPolicy: Never`` and the image is not in the site's cache: the attempt ends
    unsent (``ErrImageNeverPull``), as a Pod's container does not start."""
    return replace(fresh(prev, p, backend, cluster), phase=Phase.FAILED,
                   reason=Reason.ERR_IMAGE_NEVER_PULL, message=message)
