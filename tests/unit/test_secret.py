"""The cluster Secret: readable errors that never show a value, and a fingerprint that tells
every distinct credential set apart (connections and cached answers are shared by it)."""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

import pytest

from hooks.core.secret import Credentials, SecretError, parse_secret

KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nc2VjcmV0LWtleS1tYXRlcmlhbA\n-----END OPENSSH " \
      "PRIVATE KEY-----\n"
PASSWORD = "hunter2-pa55word"
PASSPHRASE = "correct-horse-battery"
KNOWN_HOSTS = "login.hpc.example.org ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHostKeyValue\n"
SECRET_VALUES = (KEY, PASSWORD, PASSPHRASE, KNOWN_HOSTS)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def secret(**data: str | None) -> dict[str, Any]:
    """A Secret as the API server sends it; ``None`` leaves a key out."""
    values = {"username": "alice", "ssh-privatekey": KEY, "known_hosts": KNOWN_HOSTS, **data}
    return {"apiVersion": "v1", "kind": "Secret",
            "data": {key: b64(value) for key, value in values.items() if value is not None}}


def failure(raw: dict[str, Any], *, insecure: bool = False) -> str:
    with pytest.raises(SecretError) as caught:
        parse_secret(raw, insecure_host_keys=insecure)
    message = str(caught.value)
    for value in SECRET_VALUES:
        assert value.strip() not in message
        assert b64(value) not in message
    return message


@pytest.mark.parametrize(
    ("raw", "insecure", "names"),
    [
        pytest.param(secret(username=None), False, "'username'", id="no-username"),
        pytest.param(secret(username="  \n"), False, "'username'", id="blank-username"),
        pytest.param(secret(**{"ssh-privatekey": None}), False, "'ssh-privatekey' or 'password'",
                     id="neither-key-nor-password"),
        pytest.param(secret(**{"ssh-privatekey": ""}), False, "'ssh-privatekey' or 'password'",
                     id="empty-key"),
        pytest.param(secret(known_hosts=None), False, "'known_hosts'", id="no-known-hosts"),
        pytest.param(secret(known_hosts=""), False, "'known_hosts'", id="empty-known-hosts"),
        pytest.param({"kind": "Secret"}, False, "'username'", id="no-data"),
        pytest.param({"data": ["username"]}, False, "no data", id="data-not-an-object"),
        pytest.param({"data": {"username": b64("alice"), "password": "!!not base64!!"}}, False,
                     "'password' is not base64", id="bad-base64"),
        pytest.param({"data": {"username": b64("alice"), "password": b64(PASSWORD)[:-2]}}, False,
                     "'password' is not base64", id="truncated-base64"),
        pytest.param({"data": {"username": "/w==", "password": b64(PASSWORD)}}, False,
                     "'username' is not base64-encoded UTF-8", id="not-utf8"),
        pytest.param({"data": {"username": b64("alice"), "password": 42}}, False,
                     "'password' is not base64 text", id="not-text"),
    ],
)
def test_unusable_secret(raw: dict[str, Any], insecure: bool, names: str) -> None:
    message = failure(raw, insecure=insecure)
    assert names in message
    assert message.endswith(".")


def test_no_known_hosts_says_how_to_fix_it() -> None:
    message = failure(secret(known_hosts=None))
    assert "insecureSkipHostKeyCheck" in message and "ssh-keyscan" in message


def test_no_known_hosts_with_insecure_skip() -> None:
    credentials = parse_secret(secret(known_hosts=None), insecure_host_keys=True)
    assert credentials.known_hosts is None


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(secret(), Credentials("alice", KEY, None, None, KNOWN_HOSTS), id="key"),
        pytest.param(secret(**{"ssh-privatekey": None, "password": PASSWORD}),
                     Credentials("alice", None, None, PASSWORD, KNOWN_HOSTS), id="password"),
        pytest.param(secret(**{"ssh-passphrase": PASSPHRASE}),
                     Credentials("alice", KEY, PASSPHRASE, None, KNOWN_HOSTS), id="passphrase"),
        pytest.param(secret(username=" alice\n"),
                     Credentials("alice", KEY, None, None, KNOWN_HOSTS), id="username-trimmed"),
        pytest.param(secret(password="", **{"ssh-passphrase": ""}),
                     Credentials("alice", KEY, None, None, KNOWN_HOSTS), id="empty-is-absent"),
    ],
)
def test_usable_secret(raw: dict[str, Any], expected: Credentials) -> None:
    assert parse_secret(raw, insecure_host_keys=False) == expected


def test_repr_never_shows_secret_values() -> None:
    credentials = parse_secret(
        secret(password=PASSWORD, **{"ssh-passphrase": PASSPHRASE}), insecure_host_keys=False
    )
    for text in (repr(credentials), str(credentials)):
        assert "alice" in text
        for fragment in ("BEGIN OPENSSH", "c2VjcmV0", "hunter2", "horse", "AAAAC3"):
            assert fragment not in text


BASE = {"host": "login.hpc.example.org", "port": 22, "insecure": False}
CREDENTIALS = Credentials("alice", KEY, PASSPHRASE, PASSWORD, KNOWN_HOSTS)


def fingerprint(credentials: Credentials = CREDENTIALS, **target: Any) -> str:
    where = {**BASE, **target}
    return credentials.fingerprint(where["host"], where["port"], where["insecure"])


@pytest.mark.parametrize(
    ("credentials", "target"),
    [
        pytest.param(CREDENTIALS, {"host": "login2.hpc.example.org"}, id="host"),
        pytest.param(CREDENTIALS, {"port": 2222}, id="port"),
        pytest.param(CREDENTIALS, {"insecure": True}, id="insecure"),
        pytest.param(dataclasses.replace(CREDENTIALS, username="bob"), {}, id="user"),
        pytest.param(dataclasses.replace(CREDENTIALS, private_key=KEY + " "), {}, id="key"),
        pytest.param(dataclasses.replace(CREDENTIALS, private_key=None), {}, id="no-key"),
        pytest.param(dataclasses.replace(CREDENTIALS, passphrase="other"), {}, id="passphrase"),
        pytest.param(dataclasses.replace(CREDENTIALS, password="other"), {}, id="password"),
        pytest.param(dataclasses.replace(CREDENTIALS, password=None), {}, id="no-password"),
        pytest.param(dataclasses.replace(CREDENTIALS, known_hosts=KNOWN_HOSTS + "x"), {},
                     id="known-hosts"),
        pytest.param(dataclasses.replace(CREDENTIALS, known_hosts=None), {},
                     id="no-known-hosts"),
    ],
)
def test_fingerprint_differs_when_anything_differs(
    credentials: Credentials, target: dict[str, Any]
) -> None:
    assert fingerprint(credentials, **target) != fingerprint()


def test_fingerprint_is_stable_and_hides_the_values() -> None:
    again = Credentials("alice", KEY, PASSPHRASE, PASSWORD, KNOWN_HOSTS)
    assert fingerprint(again) == fingerprint()
    assert all(value.strip() not in fingerprint() for value in SECRET_VALUES)


def test_a_key_moved_into_the_password_is_another_credential_set() -> None:
    swapped = Credentials("alice", None, PASSPHRASE, KEY, KNOWN_HOSTS)
    as_key = Credentials("alice", KEY, PASSPHRASE, None, KNOWN_HOSTS)
    assert fingerprint(swapped) != fingerprint(as_key)


def test_fingerprint_field_boundaries_are_unambiguous() -> None:
    one = dataclasses.replace(CREDENTIALS, private_key="k\0", passphrase="p")
    other = dataclasses.replace(CREDENTIALS, private_key="k", passphrase="\0p")
    assert fingerprint(one) != fingerprint(other)


@pytest.mark.parametrize("value", [
    pytest.param("é", id="non-ascii-text"),
    pytest.param("\x00", id="nul"),
    pytest.param(base64.b64encode(b"\xff\xfe").decode(), id="not-utf8"),
])
def test_secret_data_that_is_not_base64_utf8_is_invalid_not_an_error(value: str) -> None:
    raw = {"data": {"username": b64("u"), "password": value}}
    with pytest.raises(SecretError, match="'password' is not base64"):
        parse_secret(raw, insecure_host_keys=True)
