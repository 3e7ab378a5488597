"""One authenticated SSH connection and remote commands with deadlines.

Host keys are checked against the Secret's known_hosts (fail closed); the socket has
TCP_NODELAY (without it each short command pays ~40 ms of Nagle delay); every command is an
argv list joined with ``shlex.join`` here and nowhere else, runs under the remote ``timeout``
so it dies with its deadline, and takes its input on stdin.

Every command takes a ``Deadline``: the remote limit is what is left of it less ``OVERRUN``, the
longest a command can outlive that limit (the remote kill grace plus a second for the answer),
so a command never keeps its caller past the deadline it was given.
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import select
import shlex
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import paramiko

from hooks.core.secret import Credentials
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
class Target:
    host: str
    port: int
    insecure_skip_host_key_check: bool = False

    @property
    def known_hosts_name(self) -> str:
        return self.host if self.port == 22 else f"[{self.host}]:{self.port}"


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
    """An authenticated SSH transport; each ``run`` opens its own channel."""

    def __init__(self, transport: paramiko.Transport, target: Target) -> None:
        self._transport = transport
        self.target = target

    @property
    def alive(self) -> bool:
        return self._transport.is_active()

    def close(self) -> None:
        self._transport.close()

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
            channel.settimeout(_left(deadline))
            channel.exec_command(command)
            if stdin:
                # Remote programs given input read it to its end (see hooks.backends.guard):
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
                return self._transport.open_session(timeout=_left(deadline))
            except (paramiko.SSHException, OSError, EOFError) as err:
                if not self._transport.is_active() or deadline.left() < pause:
                    raise errors.ClusterUnreachable(
                        host, f"{host} refused a new SSH session: {err}") from err
                time.sleep(pause)
                pause = min(pause * 2, 0.5)


def _left(deadline: Deadline) -> float:
    """Seconds for one blocking socket call: what is left, but never zero (which blocks)."""
    return max(0.05, deadline.left())


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
            select.select([channel], [], [], min(0.2, _left(deadline)))


def connect(target: Target, credentials: Credentials, *, deadline: Deadline) -> Connection:
    """Open and authenticate a connection; raise an ``errors.SSHError`` on any failure."""
    host = target.host
    pkey = _usable_key(credentials, host)
    known = None if target.insecure_skip_host_key_check else known_host_keys(credentials, target)
    try:
        sock = socket.create_connection((host, target.port), timeout=_left(deadline))
    except UnicodeError as err:
        raise errors.ClusterUnreachable(host, f"{host!r} is not a host name") from err
    except OSError as err:
        raise errors.ClusterUnreachable(
            host, f"cannot reach {host} port {target.port}: {err.strerror or err}"
        ) from err
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    transport = paramiko.Transport(sock)
    try:
        _handshake(transport, target, known, deadline)
        _authenticate(transport, credentials, pkey, host, deadline)
    except BaseException:
        transport.close()
        raise
    transport.set_keepalive(30)
    return Connection(transport, target)


def _handshake(
    transport: paramiko.Transport, target: Target, known: dict[str, paramiko.PKey] | None,
    deadline: Deadline,
) -> None:
    host = target.host
    if known:
        options = transport.get_security_options()
        preferred = [t for t in options.key_types if _key_family(t) in known]
        options.key_types = preferred + [t for t in options.key_types if t not in preferred]
    transport.banner_timeout = _left(deadline)
    try:
        transport.start_client(timeout=_left(deadline))
    except (paramiko.SSHException, OSError, EOFError) as err:
        if deadline.left() < 1:  # paramiko's banner timeout, which is ours
            raise _timed_out(transport, target) from err
        raise errors.ClusterUnreachable(host, f"SSH handshake with {host} failed: {err}") from err
    if not transport.is_active() or not transport.initial_kex_done:
        # start_client returns when its timeout passes, handshake done or not.
        raise _timed_out(transport, target)
    if known is None:
        return
    offered = transport.get_remote_server_key()
    expected = known.get(offered.get_name())
    if expected is None or expected.asbytes() != offered.asbytes():
        raise errors.HostKeyMismatch(
            host,
            f"the host key of {target.known_hosts_name} ({offered.get_name()} "
            f"{offered.fingerprint}) is not in the Secret's known_hosts",
        )


def _timed_out(transport: paramiko.Transport, target: Target) -> errors.ClusterUnreachable:
    stage = ("it sent no SSH banner" if not transport.remote_version
             else f"{transport.remote_version} did not finish the key exchange")
    return errors.ClusterUnreachable(
        target.host, f"the SSH handshake with {target.host} port {target.port} timed out: {stage}")


def _authenticate(
    transport: paramiko.Transport, credentials: Credentials, pkey: paramiko.PKey | None,
    host: str, deadline: Deadline,
) -> None:
    transport.auth_timeout = _left(deadline)
    user = credentials.username
    try:
        if pkey is not None:
            try:
                transport.auth_publickey(user, pkey)
                return
            except paramiko.AuthenticationException:
                if not credentials.password:
                    raise
        transport.auth_password(user, credentials.password or "")
    except paramiko.AuthenticationException as err:
        raise errors.AuthenticationFailed(host, f"{host} refused the login of {user!r}") from err
    except (paramiko.SSHException, OSError, EOFError) as err:
        raise errors.ClusterUnreachable(host, f"SSH login to {host} failed: {err}") from err


def _usable_key(credentials: Credentials, host: str) -> paramiko.PKey | None:
    """The Secret's key; without one, or with an unreadable one beside a password, None (the
    password is tried then)."""
    if not credentials.private_key:
        return None
    try:
        return load_key(credentials, host)
    except errors.BadCredentials:
        if credentials.password:
            return None
        raise


def load_key(credentials: Credentials, host: str) -> paramiko.PKey:
    text = credentials.private_key or ""
    for kind in (paramiko.Ed25519Key, paramiko.ECDSAKey, paramiko.RSAKey):
        try:
            return kind.from_private_key(io.StringIO(text), password=credentials.passphrase)
        except paramiko.PasswordRequiredException as err:
            raise errors.BadCredentials(
                host, "the Secret's ssh-privatekey is encrypted; add 'ssh-passphrase'"
            ) from err
        except (paramiko.SSHException, ValueError):
            continue
    raise errors.BadCredentials(
        host, "the Secret's ssh-privatekey is not an OpenSSH or PEM private key (or the "
        "passphrase is wrong)"
    )


def known_host_keys(credentials: Credentials, target: Target) -> dict[str, paramiko.PKey]:
    """The keys known_hosts lists for the target, by key type (hashed names included)."""
    keys = paramiko.HostKeys()
    for line in (credentials.known_hosts or "").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            entry = paramiko.hostkeys.HostKeyEntry.from_line(line)
        except (paramiko.SSHException, paramiko.hostkeys.InvalidHostKey, ValueError):
            continue
        if entry is None or entry.key is None:
            continue
        for name in entry.hostnames:
            keys.add(name, entry.key.get_name(), entry.key)
    try:
        found = keys.lookup(target.known_hosts_name)
    except ValueError:  # a malformed hashed entry (|1|salt|hash) fails to decode
        return {}
    return dict(found.items()) if found else {}


def _key_family(key_type: str) -> str:
    """The known_hosts name of a negotiated host key algorithm."""
    if key_type.startswith("rsa-sha2-"):
        return "ssh-rsa"
    return key_type.removesuffix("-cert-v01@openssh.com")
