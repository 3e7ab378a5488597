"""The cluster Secret: readable errors that never show a value, and a fingerprint that tells
every distinct credential set apart (connections and cached answers are shared by it); a
known_hosts line that cannot be used is refused by its number, and an OpenSSH user certificate
(made here by ssh-keygen) is read, its validity window checked at the call's time."""

from __future__ import annotations

import base64
import dataclasses
import datetime
import hashlib
import hmac
from typing import Any

import pytest

from hooks.core.sites.openssh import FOREVER, SecretError, check_known_hosts, read_certificate
from hooks.core.sites.secret import Credentials, parse_secret
from tests.unit.conftest import Keygen

KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nc2VjcmV0LWtleS1tYXRlcmlhbA\n-----END OPENSSH " \
      "PRIVATE KEY-----\n"
PASSWORD = "hunter2-pa55word"
PASSPHRASE = "correct-horse-battery"
HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
KNOWN_HOSTS = f"login.hpc.example.org {HOST_KEY}\n"
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


# --- known_hosts -------------------------------------------------------------------------------

def hashed(name: str, salt: bytes = b"s" * 20) -> str:
    """``name`` as ``ssh-keygen -H`` writes it."""
    digest = hmac.new(salt, name.encode(), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"


@pytest.mark.parametrize("text", [
    pytest.param(f"# a comment\n\n   \n{KNOWN_HOSTS}", id="comments-and-blank-lines"),
    pytest.param(f"{hashed('[login.hpc.example.org]:2222')} {HOST_KEY}\n", id="hashed"),
    pytest.param(f"login,[login]:2222,10.0.0.5 {HOST_KEY} root@login\n", id="several-names"),
    pytest.param(f"@revoked login.hpc.example.org {HOST_KEY}\n{KNOWN_HOSTS}", id="revoked"),
    pytest.param("login sk-ssh-ed25519@openssh.com "
                 + base64.b64encode(b"\0\0\0\x1ask-ssh-ed25519@openssh.com\0\0\0\0").decode(),
                 id="a-key-type-paramiko-does-not-know"),
])
def test_usable_known_hosts(text: str) -> None:
    check_known_hosts(text)
    assert parse_secret(secret(known_hosts=text), insecure_host_keys=False).known_hosts == text


def test_a_cert_authority_line_is_refused_by_its_number() -> None:
    text = f"# hosts\n{KNOWN_HOSTS}@cert-authority *.hpc.example.org {HOST_KEY}\n"
    assert failure(secret(known_hosts=text)) == (
        "the Secret's known_hosts line 3 is an @cert-authority line; host certificates cannot "
        "be verified yet, so list the host's own key (ssh-keyscan -p PORT HOST).")


@pytest.mark.parametrize(("line", "says"), [
    pytest.param("login.hpc.example.org", "is not 'HOST KEY-TYPE KEY'", id="name-only"),
    pytest.param("login.hpc.example.org ssh-ed25519", "is not 'HOST KEY-TYPE KEY'",
                 id="no-key"),
    pytest.param("login.hpc.example.org ssh-ed25519 AAAA", "does not hold a 'ssh-ed25519' key",
                 id="truncated-key"),
    pytest.param("login.hpc.example.org ssh-ed25519 !!not-base64!!",
                 "does not hold a 'ssh-ed25519' key", id="not-base64"),
    pytest.param(f"login.hpc.example.org ssh-rsa {HOST_KEY.split()[1]}",
                 "does not hold a 'ssh-rsa' key", id="type-mismatch"),
    pytest.param(f"|1|c2FsdA==|aGFzaA== {HOST_KEY}", "malformed hashed name",
                 id="hashed-name-too-short"),
    pytest.param(f"|2|x|y {HOST_KEY}", "malformed hashed name", id="hashed-name-unknown-kind"),
    pytest.param(f"login,,other {HOST_KEY}", "host name that is empty", id="empty-name"),
    pytest.param(f"@trusted login {HOST_KEY}", "unknown marker", id="unknown-marker"),
])
def test_a_known_hosts_line_that_cannot_be_read_is_refused_by_its_number(
    line: str, says: str
) -> None:
    message = failure(secret(known_hosts=f"{KNOWN_HOSTS}\n{line}\n"))
    assert message.startswith("the Secret's known_hosts line 3 ")
    assert says in message


# --- ssh-certificate ---------------------------------------------------------------------------

DAY = "20200101:20200102"
INSIDE = datetime.datetime(2020, 1, 1, 12, tzinfo=datetime.UTC)
NOW_FAR = datetime.datetime(2999, 1, 1, tzinfo=datetime.UTC)


def with_certificate(keygen: Keygen, name: str, *options: str, kind: str = "ed25519",
                     **data: str | None) -> dict[str, Any]:
    return secret(**{"ssh-privatekey": keygen.key(name, kind),
                     "ssh-certificate": keygen.certificate(name, *options, kind=kind), **data})


@pytest.mark.parametrize("kind", ["ed25519", "ecdsa", "rsa"])
def test_a_user_certificate_is_read_with_the_key_it_certifies(keygen: Keygen, kind: str) -> None:
    raw = with_certificate(keygen, f"user-{kind}", "-V", DAY, kind=kind)
    credentials = parse_secret(raw, insecure_host_keys=False, now=INSIDE)
    assert credentials.certificate == (keygen.directory / f"user-{kind}-cert.pub").read_text()
    cert = read_certificate(credentials.certificate)
    assert cert.public_key == keygen.public(f"user-{kind}")
    assert cert.window == "from 2020-01-01T00:00:00Z to 2020-01-02T00:00:00Z"
    assert "certificate" not in repr(credentials)


@pytest.mark.parametrize(("now", "ending"), [
    pytest.param(datetime.datetime(2020, 1, 2, tzinfo=datetime.UTC), "and has expired.",
                 id="expired"),
    pytest.param(datetime.datetime(2019, 12, 31, 23, 59, 59, tzinfo=datetime.UTC),
                 "and is not valid yet.", id="not-yet-valid"),
    pytest.param(datetime.datetime(2030, 1, 1), "and has expired.", id="naive-time-is-utc"),
])
def test_a_certificate_outside_its_window_is_refused_with_the_window(
    keygen: Keygen, now: datetime.datetime, ending: str
) -> None:
    raw = with_certificate(keygen, "window", "-V", DAY)
    with pytest.raises(SecretError) as caught:
        parse_secret(raw, insecure_host_keys=False, now=now)
    assert str(caught.value) == ("the Secret's ssh-certificate is valid from "
                                 f"2020-01-01T00:00:00Z to 2020-01-02T00:00:00Z {ending}")
    assert parse_secret(raw, insecure_host_keys=False).certificate  # no time, no check


def test_a_certificate_without_an_end_never_expires(keygen: Keygen) -> None:
    raw = with_certificate(keygen, "forever", "-V", "always:forever")
    cert = read_certificate(parse_secret(raw, insecure_host_keys=False, now=NOW_FAR).certificate
                            or "")
    assert (cert.valid_after, cert.valid_before) == (0, FOREVER)
    assert cert.window == "from 1970-01-01T00:00:00Z to forever"


def test_a_host_certificate_is_refused(keygen: Keygen) -> None:
    message = failure(with_certificate(keygen, "host", "-h"))
    assert "ssh-certificate is a host certificate" in message
    assert "without -h" in message


def test_a_certificate_needs_the_private_key(keygen: Keygen) -> None:
    raw = secret(**{"ssh-privatekey": None, "password": PASSWORD,
                    "ssh-certificate": keygen.certificate("alone")})
    assert "'ssh-certificate' but no 'ssh-privatekey'" in failure(raw)


@pytest.mark.parametrize("text", [
    pytest.param("not a certificate", id="words"),
    pytest.param(KNOWN_HOSTS.split(maxsplit=1)[1], id="a-plain-public-key"),
    pytest.param("ssh-ed25519-cert-v01@openssh.com AAAAIHNzaC1lZDI1NTE5LWNlcnQtdjAxQG9wZW5zc2gu"
                 "Y29t", id="truncated"),
    pytest.param("ssh-ed25519-cert-v01@openssh.com !!!", id="not-base64"),
    pytest.param("ssh-rsa-cert-v01@openssh.com AAAAIHNzaC1lZDI1NTE5LWNlcnQtdjAxQG9wZW5zc2guY29t",
                 id="type-mismatch"),
])
def test_text_that_is_no_certificate_is_refused(text: str) -> None:
    assert failure(secret(**{"ssh-certificate": text})) == (
        "the Secret's ssh-certificate is not an OpenSSH user certificate (the one line of an "
        "id_*-cert.pub file).")


def test_two_certificates_are_not_one(keygen: Keygen) -> None:
    text = keygen.certificate("twice")
    raw = secret(**{"ssh-privatekey": keygen.key("twice"), "ssh-certificate": text + text})
    assert "not an OpenSSH user certificate" in failure(raw)


def test_a_certificate_for_a_key_type_that_cannot_log_in_is_named() -> None:
    kind = "sk-ssh-ed25519-cert-v01@openssh.com"
    blob = len(kind).to_bytes(4, "big") + kind.encode() + b"\0\0\0\0"
    text = f"{kind} {base64.b64encode(blob).decode()}"
    assert f"is of type {kind!r}" in failure(secret(**{"ssh-certificate": text}))


def test_the_certificate_is_part_of_the_fingerprint() -> None:
    assert fingerprint(dataclasses.replace(CREDENTIALS, certificate="x")) != fingerprint()
