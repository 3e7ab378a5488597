"""One authenticated SSH connection and remote commands with deadlines.

``hooks.ssh.login`` opens connections: host keys checked against the Secret's known_hosts (fail
closed), through a tunnel across each jump host when the target has any, and the TCP socket with
TCP_NODELAY (without it each short command pays ~40 ms of Nagle delay). Every command is an
argv list joined with ``shlex.join`` here and nowhere else, runs under the remote ``timeout``
so it dies with its deadline, and takes its input on stdin.

Every command takes a ``Deadline``: the remote limit is what is left of it less ``OVERRUN``, the
longest a command can outlive that limit (the remote kill grace plus a second for the answer),
so a command never keeps its caller past the deadline it was given.
"""

from __future__ import annotations

import contextlib
import logging
import math
import select
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import paramiko

from hooks.core.sites.secret import Credentials
from hooks.deadline import Deadline
from hooks.metrics import verb
from hooks.ssh import errors

# paramiko's transport thread logs every failed handshake with a traceback; the failure comes
# back to the caller as an SSHError with one sentence, so only paramiko's critical lines are kept
# (in the hook server's log and in a log Pod's output alike).
logging.getLogger("paramiko").setLevel(logging.CRITICAL)

MAX_OUTPUT = 64 * 1024 * 1024
MAX_STDERR = 64 * 1024
KILL_GRACE = 3
TIMED_OUT = frozenset({124, 137})
"""Exit statuses of the remote ``timeout`` when it stopped the command (TERM, then KILL)."""
NO_EXIT_STATUS = -1
"""What paramiko reports for a channel that closed without an exit status: sshd went away."""
OVERRUN = KILL_GRACE + 1
"""Seconds a command can take past its remote limit before its caller has the answer."""


@dataclass(frozen=True, slots=True)
class Jump:
    """A jump host on the way to a target, with its own login and host-key check."""

    host: str
    port: int
    insecure_skip_host_key_check: bool
    credentials: Credentials


@dataclass(frozen=True, slots=True)
class Target:
    host: str
    port: int
    insecure_skip_host_key_check: bool = False
    jump: tuple[Jump, ...] = ()
    """The jump hosts, in order: the target is reached through a tunnel across each."""
    site: str = ""
    """The BatchCluster the route comes from, if any: its ``knownHosts`` are the keys
    trusted, and it names the cluster in the metrics."""

    @property
    def known_hosts_name(self) -> str:
        return self.host if self.port == 22 else f"[{self.host}]:{self.port}"

    @property
    def cluster(self) -> str:
        """The metrics' ``cluster`` label: the BatchCluster's name, else ``host:port``."""
        return self.site or f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class Completed:
    exit_status: int
    stdout: bytes
    stderr: bytes

    @property
    def out(self) -> str:
        return self.stdout.decode(errors="replace")

    @property
    def err(self) -> str:
        return self.stderr.decode(errors="replace")


class Remote(Protocol):
    """What backends need of a connection: commands with deadlines."""

    target: Target

    def run(self, argv: Sequence[str], *, stdin: bytes = b"", deadline: Deadline) -> Completed: ...

    def stream(
        self, argv: Sequence[str], sink: Callable[[bytes], None], *, stdin: bytes = b"",
        deadline: Deadline,
    ) -> tuple[int, bytes]: ...


class Connection:
    """An authenticated SSH transport; each ``run`` opens its own channel.

    Behind a jump host, the transport runs in a tunnel across ``via``, the connection to the
    target's last jump host: the connection is alive only while that one is too. It closes
    ``via`` with itself when it owns it (a route opened for it alone); a shared one (pooled,
    tunnelling for other targets as well) is left open.
    """

    def __init__(self, transport: paramiko.Transport, target: Target, *,
                 via: Connection | None = None, owns_via: bool = False) -> None:
        self._transport = transport
        self.target = target
        self.via = via
        self._owns_via = owns_via

    @property
    def transport(self) -> paramiko.Transport:
        return self._transport

    @property
    def alive(self) -> bool:
        return self._transport.is_active() and (self.via is None or self.via.alive)

    def close(self) -> None:
        self._transport.close()
        if self.via is not None and self._owns_via:
            self.via.close()

    def run(self, argv: Sequence[str], *, stdin: bytes = b"", deadline: Deadline) -> Completed:
        """Run ``argv`` remotely with ``stdin``; raise ``CommandTimeout`` by the deadline."""
        out = bytearray()

        def keep(chunk: bytes) -> None:
            out.extend(chunk)
            if len(out) > MAX_OUTPUT:
                raise errors.ClusterUnreachable(self.target.host, "a command printed too much")

        status, err = self.stream(argv, keep, stdin=stdin, deadline=deadline)
        return Completed(status, bytes(out), err)

    def stream(
        self, argv: Sequence[str], sink: Callable[[bytes], None], *, stdin: bytes = b"",
        deadline: Deadline,
    ) -> tuple[int, bytes]:
        """Run ``argv``, handing stdout to ``sink`` as it arrives; the exit status and stderr."""
        host = self.target.host
        remote_limit = math.floor(deadline.left() - OVERRUN)
        if remote_limit < 1:
            raise errors.CommandTimeout(host, f"no time was left to run {verb(argv)} on {host}")
        command = shlex.join(["timeout", "-k", str(KILL_GRACE), str(remote_limit), *argv])
        status, err = self._exchange(command, argv, sink, stdin,
                                     deadline.within(remote_limit + OVERRUN))
        if status in TIMED_OUT:
            raise errors.CommandTimeout(
                host, f"{verb(argv)} on {host} ran past its {remote_limit} s limit and was stopped")
        if status == NO_EXIT_STATUS:
            raise errors.ClusterUnreachable(
                host, f"the SSH connection to {host} closed while {verb(argv)} ran")
        return status, err

    def _exchange(
        self, command: str, argv: Sequence[str], sink: Callable[[bytes], None], stdin: bytes,
        deadline: Deadline,
    ) -> tuple[int, bytes]:
        host = self.target.host
        channel = self._open_session(deadline)
        try:
            channel.settimeout(deadline.socket_timeout())
            channel.exec_command(command)
            if stdin:
                # Remote programs given input read it to its end (see hooks.schedulers.guard):
                # an EOF sent after sshd freed the channel would end the whole connection.
                channel.sendall(stdin)
                channel.shutdown_write()
            return _collect(channel, sink, deadline, host)
        except TimeoutError as err:
            raise errors.CommandTimeout(host, f"{verb(argv)} on {host} timed out") from err
        except (paramiko.SSHException, OSError, EOFError) as err:
            raise errors.ClusterUnreachable(host, f"SSH to {host} failed: {err}") from err
        finally:
            with contextlib.suppress(paramiko.SSHException, OSError, EOFError):
                channel.close()


    def _open_session(self, deadline: Deadline) -> paramiko.Channel:
        """A new session channel. sshd counts a closed session against MaxSessions until it
        has cleaned it up, so a refusal right after other channels closed is retried while the
        connection itself is up. (paramiko keeps one saved exception per transport, so under
        concurrency the refusal may arrive as a plain SSHException.)"""
        host = self.target.host
        pause = 0.01
        while True:
            try:
                return self._transport.open_session(timeout=deadline.socket_timeout())
            except (paramiko.SSHException, OSError, EOFError) as err:
                if not self._transport.is_active() or deadline.left() < pause:
                    raise errors.ClusterUnreachable(
                        host, f"{host} refused a new SSH session: {err}") from err
                time.sleep(pause)
                pause = min(pause * 2, 0.5)


def _collect(
    channel: paramiko.Channel, sink: Callable[[bytes], None], deadline: Deadline, host: str
) -> tuple[int, bytes]:
    err = bytearray()
    while True:
        if channel.recv_ready():
            sink(channel.recv(65536))
        elif channel.recv_stderr_ready():
            err += channel.recv_stderr(65536)
            del err[:-MAX_STDERR]
        elif channel.exit_status_ready() and (channel.eof_received or channel.closed):
            return channel.recv_exit_status(), bytes(err)
        elif deadline.left() <= 0:
            raise errors.CommandTimeout(host, f"a command on {host} timed out")
        else:
            select.select([channel], [], [], min(0.2, deadline.socket_timeout()))
