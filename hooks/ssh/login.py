"""Opening and authenticating SSH connections: the TCP connect, the handshake with its host key
checked against the Secret's known_hosts (fail closed), and the login with the Secret's key (with
its certificate, if the Secret has one) or password. Every failure is an
``hooks.ssh.errors.SSHError`` with one sentence, within the deadline given.

A target behind jump hosts is reached like ``ssh -J a,b``: a TCP connection to the first jump
host, then for each next host a ``direct-tcpip`` tunnel across the connection before it, with an
SSH connection of its own inside. Each such leg checks its own host key and logs in with its own
credentials; a failure on a jump host's leg names the jump host, and the error's ``host`` is the
target's, whose BatchJobs it concerns.

AES-GCM is offered first (``CIPHERS``), where the server has it: paramiko then decrypts and
checks each packet in one call of the cryptography library, where AES-CTR adds an HMAC per
packet, and a channel carries about half as many bytes per second of CPU (bench/results.md,
"Data"). The rest follow in paramiko's order, and a server without AES-GCM picks one of them.
"""

from __future__ import annotations

import base64
import io
import socket

import paramiko

from hooks.core.sites.openssh import SecretError, read_certificate
from hooks.core.sites.secret import Credentials
from hooks.deadline import Deadline
from hooks.ssh import errors
from hooks.ssh.client import Connection, Target
from hooks.ssh.host_keys import KnownKeys, key_family, known_host_keys
from hooks.ssh.transport import Transport

CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")
"""The ciphers offered first, in this order."""
OPEN_FAILURES = {
    1: "administratively prohibited (its sshd does not allow this tunnel)",
    2: "connect failed (it cannot resolve that name, or nothing answers on that port)",
    3: "unknown channel type (its sshd does not forward TCP)",
    4: "resource shortage",
}
"""The reasons of RFC 4254 for a refused channel (paramiko keeps the code, not the server's
text)."""


def connect(target: Target, credentials: Credentials, *, deadline: Deadline) -> Connection:
    """Open and authenticate a connection along the target's whole route, jump hosts first;
    raise an ``errors.SSHError`` on any failure. The connection owns its jump hosts'
    connections: closing it closes them."""
    via: Connection | None = None
    try:
        for number, jump in enumerate(target.jump):
            hop = jump_target(target, number)
            via = connect_leg(hop, jump.credentials, deadline=deadline, via=via, owns_via=True,
                              toward=target.host)
        return connect_leg(target, credentials, deadline=deadline, via=via, owns_via=True)
    except BaseException:
        if via is not None:
            via.close()
        raise


def jump_target(target: Target, number: int) -> Target:
    """The ``number``-th jump host of the target's route, as a target with the jump hosts
    before it as its own route."""
    jump = target.jump[number]
    return Target(jump.host, jump.port, jump.insecure_skip_host_key_check,
                  jump=target.jump[:number], site=target.site)


def connect_leg(
    target: Target, credentials: Credentials, *, deadline: Deadline,
    via: Connection | None = None, owns_via: bool = False, toward: str | None = None,
) -> Connection:
    """One leg of a route: a connection to ``target``, directly when ``via`` is None, else
    through a tunnel across ``via`` (the connection to the target's last jump host).

    ``toward`` says that the target is a jump host on the way to the login node ``toward``:
    messages then name it as a jump host, and errors carry ``toward`` as their host.
    """
    leg = Leg(target, toward)
    pkey = usable_key(credentials, leg)
    known = (None if target.insecure_skip_host_key_check
             else known_host_keys(credentials, target))
    sock = _tunnel(via, leg, deadline) if via is not None else _dial(leg, deadline)
    transport = Transport(sock)
    try:
        _handshake(transport, leg, known, deadline)
        _authenticate(transport, credentials, pkey, leg, deadline)
    except BaseException:
        transport.close()
        raise
    transport.set_keepalive(30)
    return Connection(transport, target, via=via, owns_via=owns_via)


class Leg:
    """How messages name one leg's host, and the host its errors carry."""

    def __init__(self, target: Target, toward: str | None) -> None:
        self.target = target
        self.host = target.host
        self.port = target.port
        self.jump = toward is not None
        self.name = f"jump host {target.host}" if self.jump else target.host
        self.error_host = toward if toward is not None else target.host

    def secret_key(self, key: str) -> str:
        """The Secret's key ``key``, as a message names it (on a BatchCluster's route, its
        ``knownHosts`` stand for every Secret's ``known_hosts``)."""
        if key == "known_hosts" and self.target.site:
            return f"the knownHosts of BatchCluster {self.target.site}"
        return (f"the {key} of the Secret of {self.name}" if self.jump
                else f"the Secret's {key}")


def _dial(leg: Leg, deadline: Deadline) -> socket.socket:
    try:
        sock = socket.create_connection((leg.host, leg.port), timeout=deadline.socket_timeout())
    except UnicodeError as err:
        raise errors.HostUnreachable(
            leg.error_host, f"{leg.host!r} is not a host name"
            + (" (a jump host)" if leg.jump else "")) from err
    except OSError as err:
        raise errors.HostUnreachable(
            leg.error_host, f"cannot reach {leg.name} port {leg.port}: {err.strerror or err}"
        ) from err
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _tunnel(via: Connection, leg: Leg, deadline: Deadline) -> paramiko.Channel:
    """A ``direct-tcpip`` channel across ``via`` to the leg's host and port (``ssh -J``)."""
    jump = f"jump host {via.target.host}"
    try:
        return via.transport.open_channel("direct-tcpip", (leg.host, leg.port),
                                          ("127.0.0.1", 0), timeout=deadline.socket_timeout())
    except (paramiko.SSHException, OSError, EOFError) as err:
        reason = (OPEN_FAILURES.get(err.code, f"refused ({err.text})")
                  if isinstance(err, paramiko.ChannelException) else err)
        raise errors.ClusterUnreachable(
            leg.error_host,
            f"{jump} could not open a tunnel to {leg.host} port {leg.port}: {reason}") from err


def _handshake(
    transport: paramiko.Transport, leg: Leg, known: KnownKeys | None, deadline: Deadline,
) -> None:
    options = transport.get_security_options()
    first = tuple(c for c in CIPHERS if c in options.ciphers)
    options.ciphers = first + tuple(c for c in options.ciphers if c not in first)
    if known and known.keys:
        preferred = [t for t in options.key_types if key_family(t) in known.keys]
        options.key_types = preferred + [t for t in options.key_types if t not in preferred]
    transport.banner_timeout = deadline.socket_timeout()
    try:
        transport.start_client(timeout=deadline.socket_timeout())
    except (paramiko.SSHException, OSError, EOFError) as err:
        if deadline.left() < 1:  # paramiko's banner timeout, which is ours
            raise _timed_out(transport, leg) from err
        raise errors.HostUnreachable(
            leg.error_host, f"SSH handshake with {leg.name} failed: {err}") from err
    if not transport.is_active() or not transport.initial_kex_done:
        # start_client returns when its timeout passes, handshake done or not.
        raise _timed_out(transport, leg)
    if known is None:
        return
    offered = transport.get_remote_server_key()
    where = f"{'jump host ' if leg.jump else ''}{leg.target.known_hosts_name}"
    shown = f"{offered.get_name()} {offered.fingerprint}"
    known_hosts = leg.secret_key("known_hosts")
    if offered.asbytes() in known.revoked:
        raise errors.HostKeyMismatch(
            leg.error_host,
            f"the host key of {where} ({shown}) is marked @revoked in {known_hosts}")
    expected = known.keys.get(offered.get_name())
    if expected is None or expected.asbytes() != offered.asbytes():
        raise errors.HostKeyMismatch(
            leg.error_host, f"the host key of {where} ({shown}) is not in {known_hosts}")


def _timed_out(transport: paramiko.Transport, leg: Leg) -> errors.HostUnreachable:
    stage = ("it sent no SSH banner" if not transport.remote_version
             else f"{transport.remote_version} did not finish the key exchange")
    return errors.HostUnreachable(
        leg.error_host, f"the SSH handshake with {leg.name} port {leg.port} timed out: {stage}")


def _authenticate(
    transport: paramiko.Transport, credentials: Credentials, pkey: paramiko.PKey | None,
    leg: Leg, deadline: Deadline,
) -> None:
    transport.auth_timeout = deadline.socket_timeout()
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
        raise errors.AuthenticationFailed(
            leg.error_host, f"{leg.name} refused the login of {user!r}") from err
    except (paramiko.SSHException, OSError, EOFError) as err:
        raise errors.ClusterUnreachable(
            leg.error_host, f"SSH login to {leg.name} failed: {err}") from err


def usable_key(credentials: Credentials, leg: Leg) -> paramiko.PKey | None:
    """The Secret's key, with its certificate if the Secret has one; without a key, or with an
    unreadable one beside a password, None (the password is tried then). A certificate that
    is not the key's is an error even beside a password: the Secret contradicts itself."""
    if not credentials.private_key:
        return None
    try:
        pkey = load_key(credentials, leg)
    except errors.BadCredentials:
        if credentials.password:
            return None
        raise
    if credentials.certificate:
        _load_certificate(pkey, credentials.certificate, leg)
    return pkey


def load_key(credentials: Credentials, leg: Leg) -> paramiko.PKey:
    """The Secret's private key (without its certificate)."""
    host, name = leg.error_host, leg.secret_key("ssh-privatekey")
    text = credentials.private_key or ""
    for kind in (paramiko.Ed25519Key, paramiko.ECDSAKey, paramiko.RSAKey):
        try:
            return kind.from_private_key(io.StringIO(text), password=credentials.passphrase)
        except paramiko.PasswordRequiredException as err:
            raise errors.BadCredentials(
                host, f"{name} is encrypted; add 'ssh-passphrase'") from err
        except (paramiko.SSHException, ValueError):
            continue
    raise errors.BadCredentials(
        host, f"{name} is not an OpenSSH or PEM private key (or the passphrase is wrong)")


def _load_certificate(pkey: paramiko.PKey, text: str, leg: Leg) -> None:
    """Put the certificate on the key, so that logging in offers it; it must certify that
    very key."""
    host, name = leg.error_host, leg.secret_key("ssh-certificate")
    try:
        cert = read_certificate(text)
    except SecretError as err:
        raise errors.BadCredentials(
            host, f"{name} is not an OpenSSH user certificate (id_*-cert.pub)") from err
    if cert.public_key != pkey.asbytes():
        raise errors.BadCredentials(
            host, f"{name} certifies another key than the ssh-privatekey beside it "
            "(sign the public half of that very key: ssh-keygen -s CA_KEY -I ID -n USER "
            "KEY.pub)")
    # The certificate as a message, never as text: paramiko reads a text that names a file.
    pkey.load_certificate(paramiko.Message(base64.b64decode(text.split()[1])))
