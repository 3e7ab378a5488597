"""The SSH shell as a scheduler's transport, and the attempt-directory operations every
scheduler over it shares.

``ShellTransport`` opens the pooled SSH connection to a login node behind its jump hosts
(``hooks.ssh.pool``) and turns the SSH layer's errors into the contract's ``TransportError``; a
scheduler whose commands are programs on the login node (``sbatch``, ``condor_submit``) takes
``OverSSH`` among its bases, which names that transport and writes the ``ended`` marker and
removes a BatchJob's directory with the guard's shell programs (``hooks.schedulers.guard``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from hooks.core.decide.effects import Access, Trouble
from hooks.core.values.image import ImagePull, PoolContainers, PreparedImage
from hooks.core.values.job import ClusterRef
from hooks.core.values.reasons import Reason
from hooks.deadline import Deadline
from hooks.metrics import Metrics
from hooks.schedulers import files, guard, image_cache
from hooks.schedulers.base import TransportError
from hooks.settings import Settings
from hooks.ssh import errors
from hooks.ssh.client import OVERRUN, Jump, Remote, Target
from hooks.ssh.pool import Connections, Pool
from hooks.ssh.pool_keys import pool_key

SSH_REASONS: Mapping[type[errors.SSHError], Reason] = {
    errors.HostKeyMismatch: Reason.HOST_KEY_MISMATCH,
    errors.AuthenticationFailed: Reason.AUTHENTICATION_FAILED,
    errors.BadCredentials: Reason.INVALID_SECRET,
}
"""The reason of each SSH error that the user has to act on; any other is unreachable."""


class ShellTransport:
    """The pooled SSH connections of one hook server (``pool``, or a stand-in in tests)."""

    overrun = OVERRUN

    def __init__(self, settings: Settings, metrics: Metrics, *,
                 pool: Connections | None = None) -> None:
        self.pool = pool or Pool(metrics, max_channels=settings.max_channels,
                                max_connections=settings.max_connections)
        self.connect_timeout = settings.connect_timeout

    def key(self, cluster: ClusterRef, access: Access) -> str:
        return pool_key(target(cluster, access), access.login)

    @contextmanager
    def open(self, cluster: ClusterRef, access: Access, *, deadline: Deadline) -> Iterator[Remote]:
        """The pooled connection, connecting within the connect timeout if need be."""
        deadline.require(1, "connecting")
        try:
            with self.pool.open(target(cluster, access), access.login,
                                deadline=deadline.within(self.connect_timeout)) as conn:
                yield conn
        except errors.SSHError as err:
            raise transport_error(err) from err

    def evict_idle(self, idle_seconds: float) -> int:
        return self.pool.evict_idle(idle_seconds)

    def close(self) -> None:
        self.pool.close()


def transport_error(err: errors.SSHError) -> TransportError:
    """The SSH error as the contract's: its reason, and its message as one sentence."""
    reason = SSH_REASONS.get(type(err), Reason.CLUSTER_UNREACHABLE)
    return TransportError(reason, err.message[:1].upper() + err.message[1:] + ".")


def target(cluster: ClusterRef, access: Access) -> Target:
    """The login node of ``cluster``, behind its jump hosts, with the route's logins."""
    jump = tuple(Jump(hop.host, hop.port, hop.insecure_skip_host_key_check, credentials)
                 for hop, credentials in zip(cluster.jump, access.hops, strict=True))
    return Target(cluster.host, cluster.port, cluster.insecure_skip_host_key_check, jump,
                  site=cluster.site)


class OverSSH:
    """What every scheduler run through a login node's shell shares: the transport, the
    guard's files in the attempt directory, the ``ended`` marker, the image cache
    (``hooks.schedulers.image_cache``) and the directory's removal."""

    transport = ShellTransport

    def writes_file(self, name: str) -> bool:
        return guard.writes_file(name) or files.TASK_OUTPUT.fullmatch(name) is not None

    def mark_ended(self, conn: Remote, remote_dir: str, phase: str, *,
                   deadline: Deadline) -> None:
        conn.run(guard.mark_ended_command(remote_dir=remote_dir, phase=phase),
                 deadline=deadline)

    def prepare_image(self, conn: Remote, pull: ImagePull, *,
                      deadline: Deadline) -> PreparedImage:
        return image_cache.prepare(conn, pull, deadline=deadline)

    def container_support(self, conn: Remote, *, deadline: Deadline) -> PoolContainers:
        return PoolContainers()

    def remove_directory(self, conn: Remote, root: str, stale_seconds: int, *,
                         deadline: Deadline) -> str | Trouble:
        result = conn.run(guard.cleanup_command(root=root, stale_seconds=stale_seconds),
                          deadline=deadline)
        word = result.out.strip()
        if word in ("removed", "gone", "busy"):
            return word
        detail = (result.err.strip().splitlines() or ["no answer"])[-1][:200]
        return Trouble(Reason.CLUSTER_UNREACHABLE,
                       f"Removing the BatchJob's remote directory failed: {detail}")
