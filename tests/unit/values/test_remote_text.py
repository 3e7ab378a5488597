"""Text from a remote host is as hostile as a request: an SSH banner or a scheduler's error line
reaches the BatchJob's status readable (no control or format character, escaped instead) and
bounded, whichever way it came in. The banners come from a listener on 127.0.0.1 that the real
SSH client connects to."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from typing import Any

import pytest

from hooks.core.sites.secret import Credentials
from hooks.core.status.record import Status, to_raw
from hooks.core.values.text import MAX_MESSAGE, readable
from hooks.deadline import Deadline
from hooks.ssh import errors
from hooks.ssh.client import Target
from hooks.ssh.login import connect
from tests.unit.conftest import FakeConnection, FakePool, completed, silent_host
from tests.unit.server.test_app import client, load, post

HOSTILE = "\x1b]0;pwned\x07\x1b[2J\r\x00\x9b31m\u202egnp.exe\x7f"
"""A terminal title and screen clear, a carriage return, NUL, a C1 CSI, a bidirectional
override and DEL."""


def shown(status: dict[str, Any]) -> list[str]:
    """Every message of a rendered status."""
    return [status["message"], *(c["message"] for c in status["conditions"])]


def assert_readable(text: str) -> None:
    hidden = [c for c in text if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs")]
    assert not hidden, (hidden, text)
    assert len(text) <= MAX_MESSAGE


@pytest.fixture(params=[
    pytest.param(f"SSH-2.0-{HOSTILE}\r\n".encode(),
                 id="banner-then-stall"),
    pytest.param(b"SSH-\x1b]0;pwned\x07-x\r\n", id="bad-version"),
])
def hostile_host(request: pytest.FixtureRequest) -> Iterator[int]:
    """A host whose SSH server sends ``request.param`` as its banner, then says nothing."""
    with silent_host(request.param) as port:
        yield port


def test_a_hostile_ssh_banner_reaches_the_status_readable(hostile_host: int) -> None:
    with pytest.raises(errors.SSHError) as caught:
        connect(Target("127.0.0.1", hostile_host, True), Credentials("u", password="p"),
                deadline=Deadline.after(2))
    assert "\x1b" in caught.value.message  # what the host sent, as it sent it
    code, body, _ = post(client(FakePool(error=caught.value)), "/sync", load("sync-running"))
    assert code == 200
    messages = shown(body["status"])
    for text in messages:
        assert_readable(text)
    assert any("\\x1b]0;pwned\\x07" in text for text in messages), messages


def test_a_hostile_scheduler_error_line_reaches_the_status_readable() -> None:
    squeue = completed(err=f"squeue: error: {HOSTILE}{'x' * 5000}\n", status=1)
    conn = FakeConnection({"squeue": [squeue]})
    code, body, _ = post(client(FakePool(conn)), "/sync", load("sync-running"))
    assert code == 200
    messages = shown(body["status"])
    for text in messages:
        assert_readable(text)
    # The last line of stderr (\r ends one), bounded.
    assert any(text.startswith("The scheduler did not answer: squeue failed: \\x00\\x9b31m"
                               "\\u202egnp.exe\\x7fxxx") and text.endswith("...")
               for text in messages), messages


def test_every_message_of_the_status_is_made_readable_once_and_for_all() -> None:
    status = Status(message=f"refused: {HOSTILE}", reachable=False,
                    reachability_reason="ClusterUnreachable",
                    reachability_message=f"{HOSTILE}" * 500)
    raw = to_raw(status, previous=None, now="2026-11-22T10:00:00Z")
    for text in shown(raw):
        assert_readable(text)
        assert readable(text) == text
    assert raw["message"] == ("refused: \\x1b]0;pwned\\x07\\x1b[2J \\x00\\x9b31m\\u202egnp.exe"
                              "\\x7f")


def test_readable_text_is_left_as_it_is() -> None:
    text = "Attempt 1 was submitted as job 4242 — à l'heure, 東京 (OK)."
    assert readable(text) == text

