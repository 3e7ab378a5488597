"""The SSH client against hosts that misbehave, on local listeners: one that accepts and never
speaks, one that stalls after its banner. Both are a ClusterUnreachable that names the cause,
within the deadline; and an unreadable key beside a password falls back to the password."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from hooks.core.secret import Credentials
from hooks.deadline import Deadline
from hooks.ssh import errors
from hooks.ssh.client import Target
from hooks.ssh.login import _usable_key, connect

HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


@pytest.fixture(params=[pytest.param(b"", id="silent"),
                        pytest.param(b"SSH-2.0-OpenSSH_9.2\r\n", id="banner-then-stall")])
def blackhole(request: pytest.FixtureRequest) -> Iterator[tuple[int, bytes]]:
    held: list[socket.socket] = []
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()

        def accept() -> None:
            conn, _ = listener.accept()
            held.append(conn)
            conn.sendall(request.param)

        threading.Thread(target=accept, daemon=True).start()
        yield listener.getsockname()[1], request.param
    for conn in held:
        conn.close()


@pytest.mark.parametrize("known", [pytest.param(True, id="known-hosts"),
                                   pytest.param(False, id="insecure")])
def test_a_host_that_does_not_speak_ssh_is_unreachable_within_the_deadline(
    blackhole: tuple[int, bytes], known: bool
) -> None:
    port, banner = blackhole
    credentials = Credentials("u", password="p",
                              known_hosts=f"[127.0.0.1]:{port} {HOST_KEY}\n" if known else None)
    started = time.monotonic()
    with pytest.raises(errors.ClusterUnreachable) as caught:
        connect(Target("127.0.0.1", port, not known), credentials, deadline=Deadline.after(2))
    assert time.monotonic() - started < 4
    assert "timed out" in caught.value.message
    assert ("no SSH banner" if not banner else "did not finish the key exchange") in (
        caught.value.message)
    assert "No existing session" not in caught.value.message


def test_an_unreadable_key_beside_a_password_falls_back_to_the_password() -> None:
    assert _usable_key(Credentials("u", private_key="not a key", password="p"), "h") is None
    with pytest.raises(errors.BadCredentials):
        _usable_key(Credentials("u", private_key="not a key"), "h")
