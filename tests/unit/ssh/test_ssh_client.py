"""The SSH client against hosts that misbehave, on local listeners: one that accepts and never
speaks, one that stalls after its banner. Both are a ClusterUnreachable that names the cause,
within the deadline; and an unreadable key beside a password falls back to the password.

Routes through jump hosts run against SSH servers in this process (paramiko's server side): a
login node behind a jump host that forwards ``direct-tcpip`` channels, or refuses to; each way
a jump host can fail is an error that names it and carries the login node's host. Also here:
known_hosts lookups (hashed names, ``@revoked`` keys) and certificates put on keys."""

from __future__ import annotations

import base64
import contextlib
import io
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import paramiko
import pytest
from paramiko.common import (
    AUTH_FAILED,
    AUTH_SUCCESSFUL,
    OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED,
    OPEN_SUCCEEDED,
)

from hooks.core.sites.secret import Credentials
from hooks.deadline import Deadline
from hooks.ssh import errors
from hooks.ssh.client import Connection, Jump, Target
from hooks.ssh.host_keys import known_host_keys
from hooks.ssh.login import Leg, connect, usable_key
from tests.unit.conftest import Keygen, need_ssh_keygen, silent_host

HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


@pytest.fixture(params=[pytest.param(b"", id="silent"),
                        pytest.param(b"SSH-2.0-OpenSSH_9.2\r\n", id="banner-then-stall")])
def blackhole(request: pytest.FixtureRequest) -> Iterator[tuple[int, bytes]]:
    with silent_host(request.param) as port:
        yield port, request.param


@pytest.mark.parametrize("known", [pytest.param(True, id="known-hosts"),
                                   pytest.param(False, id="insecure")])
def test_a_host_that_does_not_speak_ssh_is_unreachable_within_the_deadline(
    blackhole: tuple[int, bytes], known: bool
) -> None:
    port, banner = blackhole
    credentials = Credentials("u", password="p",
                              known_hosts=f"[127.0.0.1]:{port} {HOST_KEY}\n" if known else None)
    with pytest.raises(errors.HostUnreachable) as caught:
        connect(Target("127.0.0.1", port, not known), credentials, deadline=Deadline.after(2))
    assert "timed out" in caught.value.message
    assert ("no SSH banner" if not banner else "did not finish the key exchange") in (
        caught.value.message)
    assert "No existing session" not in caught.value.message


LEG = Leg(Target("h", 22), None)


def test_an_unreadable_key_beside_a_password_falls_back_to_the_password() -> None:
    assert usable_key(Credentials("u", private_key="not a key", password="p"), LEG) is None
    with pytest.raises(errors.BadCredentials):
        usable_key(Credentials("u", private_key="not a key"), LEG)


# --- SSH servers in this process ---------------------------------------------------------------

def new_key() -> paramiko.ECDSAKey:
    return paramiko.ECDSAKey.generate()


def private_text(key: paramiko.PKey) -> str:
    out = io.StringIO()
    key.write_private_key(out)
    return out.getvalue()


GONE = (OSError, EOFError, paramiko.SSHException)
"""What a server thread meets when the other side went away first."""


class Server(paramiko.ServerInterface):
    """One SSH server: logs ``user`` in by ``key``, answers every command with the user's
    name, and forwards ``direct-tcpip`` channels when ``forwards`` (else refuses them as
    administratively prohibited)."""

    def __init__(self, user: str, key: paramiko.PKey, *, forwards: bool = False) -> None:
        self.user, self.key, self.forwards = user, key, forwards
        self.host_key = new_key()
        self.tunnels: list[tuple[str, int]] = []
        self._destinations: dict[int, tuple[str, int]] = {}
        self.transports: list[paramiko.Transport] = []
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen()
        self.port: int = self._listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def known_hosts(self, name: str = "127.0.0.1") -> str:
        where = name if self.port == 22 else f"[{name}]:{self.port}"
        return f"{where} {self.host_key.get_name()} {self.host_key.get_base64()}\n"

    def credentials(self, **changes: str) -> Credentials:
        values = {"username": self.user, "private_key": private_text(self.key),
                  "known_hosts": self.known_hosts(), **changes}
        return Credentials(**values)

    def close(self) -> None:
        self._listener.close()
        for transport in self.transports:
            transport.close()

    def _serve(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            transport = paramiko.Transport(sock)
            transport.add_server_key(self.host_key)
            self.transports.append(transport)
            with contextlib.suppress(*GONE):
                transport.start_server(server=self)
                threading.Thread(target=self._channels, args=(transport,), daemon=True).start()

    def _channels(self, transport: paramiko.Transport) -> None:
        while transport.is_active():
            channel = transport.accept(0.2)
            destination = channel and self._destinations.pop(channel.get_id(), None)
            if channel is not None and destination is not None:
                threading.Thread(target=self._pipe, args=(channel, destination),
                                 daemon=True).start()

    def _pipe(self, channel: paramiko.Channel, destination: tuple[str, int]) -> None:
        with contextlib.suppress(*GONE), \
                socket.create_connection(destination, timeout=5) as upstream:
            upstream.settimeout(None)

            def back() -> None:
                with contextlib.suppress(*GONE):
                    while data := upstream.recv(65536):
                        channel.sendall(data)
                    channel.close()

            threading.Thread(target=back, daemon=True).start()
            while data := channel.recv(65536):
                upstream.sendall(data)
        with contextlib.suppress(*GONE):
            channel.close()

    def get_allowed_auths(self, username: str) -> str:
        return "publickey"

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        ok = username == self.user and key.asbytes() == self.key.asbytes()
        return AUTH_SUCCESSFUL if ok else AUTH_FAILED

    def check_channel_request(self, kind: str, chanid: int) -> int:
        return OPEN_SUCCEEDED if kind == "session" else OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED

    def check_channel_direct_tcpip_request(
        self, chanid: int, origin: tuple[str, int], destination: tuple[str, int]
    ) -> int:
        if not self.forwards:
            return OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED
        self.tunnels.append(destination)
        self._destinations[chanid] = destination
        return OPEN_SUCCEEDED

    def check_channel_exec_request(self, channel: paramiko.Channel, command: bytes) -> bool:
        def answer() -> None:
            with contextlib.suppress(*GONE):
                channel.sendall(f"{self.user}\n".encode())
                channel.send_exit_status(0)
                channel.close()

        # After paramiko has sent the request's success, which follows this return.
        threading.Timer(0.05, answer).start()
        return True


@pytest.fixture
def servers() -> Iterator[tuple[Server, Server]]:
    """A jump host (user ``jumper``) that forwards, and a login node (user ``alice``)."""
    bastion = Server("jumper", new_key(), forwards=True)
    login = Server("alice", new_key())
    yield bastion, login
    bastion.close()
    login.close()


def route(bastion: Server, login: Server, **changes: str) -> Target:
    return Target("127.0.0.1", login.port,
                  jump=(Jump("127.0.0.1", bastion.port, False, bastion.credentials(**changes)),))


def fails(target: Target, credentials: Credentials, seconds: float = 10) -> errors.SSHError:
    with pytest.raises(errors.SSHError) as caught:
        connect(target, credentials, deadline=Deadline.after(seconds))
    return caught.value


def test_a_login_node_behind_a_jump_host(servers: tuple[Server, Server]) -> None:
    bastion, login = servers
    conn = connect(route(bastion, login), login.credentials(), deadline=Deadline.after(10))
    assert conn.run(["id", "-un"], deadline=Deadline.after(10)).out == "alice\n"
    assert bastion.tunnels == [("127.0.0.1", login.port)]
    assert conn.via is not None and conn.via.alive
    conn.close()
    assert not conn.via.alive  # a route opened alone closes with its connection


def test_jump_hosts_in_a_row(servers: tuple[Server, Server]) -> None:
    bastion, login = servers
    inner = Server("inner", new_key(), forwards=True)
    try:
        target = Target("127.0.0.1", login.port, jump=(
            Jump("127.0.0.1", bastion.port, False, bastion.credentials()),
            Jump("127.0.0.1", inner.port, False, inner.credentials())))
        conn = connect(target, login.credentials(), deadline=Deadline.after(10))
        assert conn.run(["id", "-un"], deadline=Deadline.after(10)).out == "alice\n"
        assert (bastion.tunnels, inner.tunnels) == ([("127.0.0.1", inner.port)],
                                                    [("127.0.0.1", login.port)])
        conn.close()
    finally:
        inner.close()


def test_a_jump_host_that_cannot_be_reached(servers: tuple[Server, Server]) -> None:
    bastion, login = servers
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    target = Target("login.hpc.example.org", 22,
                    jump=(Jump("127.0.0.1", port, False, bastion.credentials()),))
    err = fails(target, login.credentials())
    assert isinstance(err, errors.ClusterUnreachable)
    assert err.host == "login.hpc.example.org"
    assert err.message == f"cannot reach jump host 127.0.0.1 port {port}: Connection refused"


def test_a_jump_host_with_another_host_key(servers: tuple[Server, Server]) -> None:
    bastion, login = servers
    other = login.host_key
    listed = f"[127.0.0.1]:{bastion.port} {other.get_name()} {other.get_base64()}\n"
    err = fails(route(bastion, login, known_hosts=listed), login.credentials())
    assert isinstance(err, errors.HostKeyMismatch)
    assert err.host == "127.0.0.1"
    assert err.message.startswith(f"the host key of jump host [127.0.0.1]:{bastion.port} (")
    assert err.message.endswith(
        "is not in the known_hosts of the Secret of jump host 127.0.0.1")
    assert login.transports == []


def test_a_jump_host_that_refuses_the_login(servers: tuple[Server, Server]) -> None:
    bastion, login = servers
    err = fails(route(bastion, login, username="mallory"), login.credentials())
    assert isinstance(err, errors.AuthenticationFailed)
    assert err.message == "jump host 127.0.0.1 refused the login of 'mallory'"


def test_a_jump_host_that_refuses_the_tunnel(servers: tuple[Server, Server]) -> None:
    bastion, login = servers
    bastion.forwards = False
    err = fails(route(bastion, login), login.credentials())
    assert isinstance(err, errors.ClusterUnreachable)
    assert err.message == (f"jump host 127.0.0.1 could not open a tunnel to 127.0.0.1 port "
                           f"{login.port}: administratively prohibited (its sshd does not allow "
                           "this tunnel)")


def test_an_unreadable_key_for_a_jump_host_names_it(servers: tuple[Server, Server]) -> None:
    bastion, login = servers
    err = fails(route(bastion, login, private_key="not a key"), login.credentials())
    assert isinstance(err, errors.BadCredentials)
    assert err.message.startswith(
        "the ssh-privatekey of the Secret of jump host 127.0.0.1 is not an OpenSSH or PEM")


def test_the_login_node_behind_a_jump_host_keeps_its_own_messages(
    servers: tuple[Server, Server]
) -> None:
    bastion, login = servers
    err = fails(route(bastion, login), login.credentials(username="bob"))
    assert (type(err), err.message) == (errors.AuthenticationFailed,
                                        "127.0.0.1 refused the login of 'bob'")
    # The jump host's connection, opened for this route alone, closed with the failure.
    closed = time.monotonic() + 10
    while any(t.is_active() for t in bastion.transports) and time.monotonic() < closed:
        time.sleep(0.05)
    assert not any(transport.is_active() for transport in bastion.transports)


def test_a_jump_host_that_does_not_speak_ssh(blackhole: tuple[int, bytes]) -> None:
    port, _ = blackhole
    jump = Jump("127.0.0.1", port, True, Credentials("u", password="p"))
    err = fails(Target("login.hpc.example.org", 22, jump=(jump,)), Credentials("u", password="p"),
                seconds=2)
    assert err.host == "login.hpc.example.org"
    assert err.message.startswith(f"the SSH handshake with jump host 127.0.0.1 port {port} "
                                  "timed out")


def test_a_revoked_host_key_is_refused_as_revoked(servers: tuple[Server, Server]) -> None:
    _, login = servers
    revoked = f"@revoked {login.known_hosts()}{login.known_hosts()}"
    err = fails(Target("127.0.0.1", login.port), login.credentials(known_hosts=revoked))
    assert isinstance(err, errors.HostKeyMismatch)
    assert err.message.endswith("is marked @revoked in the Secret's known_hosts")


# --- known_hosts and certificates ----------------------------------------------------------------

def test_hashed_known_hosts_names_are_found(tmp_path: Path) -> None:
    need_ssh_keygen()
    key = new_key()
    plain = f"[login.hpc]:2222 {key.get_name()} {key.get_base64()}\nother.hpc {HOST_KEY}\n"
    (tmp_path / "known_hosts").write_text(plain)
    subprocess.run(["ssh-keygen", "-H", "-f", str(tmp_path / "known_hosts")], check=True,
                   capture_output=True, timeout=60)
    hashed = (tmp_path / "known_hosts").read_text()
    assert "login.hpc" not in hashed and hashed.startswith("|1|")
    found = known_host_keys(Credentials("u", known_hosts=hashed), Target("login.hpc", 2222))
    assert [k.asbytes() for k in found.keys.values()] == [key.asbytes()]
    assert not known_host_keys(Credentials("u", known_hosts=hashed), Target("login.hpc", 22))


@pytest.fixture(scope="module")
def certified(keygen: Keygen) -> Path:
    """An ed25519 key ``user`` with its certificate ``user-cert.pub``, and a key ``other``."""
    keygen.certificate("user")
    keygen.key("other")
    return keygen.directory


def test_a_certificate_goes_onto_its_key(certified: Path) -> None:
    cert = (certified / "user-cert.pub").read_text()
    pkey = usable_key(Credentials("alice", private_key=(certified / "user").read_text(),
                                   certificate=cert), LEG)
    assert pkey is not None and pkey.public_blob is not None
    assert pkey.public_blob.key_type == "ssh-ed25519-cert-v01@openssh.com"
    assert pkey.public_blob.key_blob == base64.b64decode(cert.split()[1])


def test_a_certificate_of_another_key_is_bad_credentials(certified: Path) -> None:
    credentials = Credentials("alice", private_key=(certified / "other").read_text(),
                              certificate=(certified / "user-cert.pub").read_text(),
                              password="a password does not make it right")
    with pytest.raises(errors.BadCredentials) as caught:
        usable_key(credentials, Leg(Target("bastion", 22), "login.hpc"))
    assert caught.value.host == "login.hpc"
    assert caught.value.message.startswith(
        "the ssh-certificate of the Secret of jump host bastion certifies another key than the "
        "ssh-privatekey beside it")


def test_a_certificate_is_never_read_as_a_file_name(tmp_path: Path, certified: Path) -> None:
    (tmp_path / "cert").write_text((certified / "user-cert.pub").read_text())
    credentials = Credentials("alice", private_key=(certified / "user").read_text(),
                              certificate=str(tmp_path / "cert"))
    with pytest.raises(errors.BadCredentials, match="not an OpenSSH user certificate"):
        usable_key(credentials, LEG)


def test_a_connection_is_dead_when_its_jump_hosts_is() -> None:
    class Transport:
        """The part of a ``paramiko.Transport`` that a connection's liveness and closing use."""

        active = True

        def is_active(self) -> bool:
            return self.active

        def close(self) -> None:
            self.active = False

    hop = Connection(cast(paramiko.Transport, Transport()), Target("bastion", 22))
    conn = Connection(cast(paramiko.Transport, Transport()), Target("login", 22), via=hop)
    assert conn.alive
    hop.close()
    assert not conn.alive
