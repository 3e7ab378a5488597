"""Opening and authenticating one SSH connection: the TCP connect, the handshake with its host
key checked against the Secret's known_hosts (fail closed), and the login with the Secret's key
or password. Every failure is an ``hooks.ssh.errors.SSHError`` with one sentence, within the
deadline given."""

from __future__ import annotations

import io
import socket

import paramiko

from hooks.core.secret import Credentials
from hooks.deadline import Deadline
from hooks.ssh import errors
from hooks.ssh.client import Connection, Target, _left


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
