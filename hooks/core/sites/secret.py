"""The cluster Secret: decoding it into ``Credentials`` without ever exposing its values.

Its ``known_hosts`` and ``ssh-certificate`` are checked as they are read, by the OpenSSH
formats' rules (``hooks.core.sites.openssh``), where a mistake is cheapest to explain.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from hooks.core.sites.openssh import (
    SecretError,
    check_certificate,
    check_known_hosts,
    read_certificate,
)
from hooks.core.values.text import shown


@dataclass(frozen=True, slots=True)
class Credentials:
    """How to log in. Secret values are excluded from ``repr`` so they never reach a log."""

    username: str
    private_key: str | None = field(default=None, repr=False)
    passphrase: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)
    known_hosts: str | None = field(default=None, repr=False)
    certificate: str | None = field(default=None, repr=False)
    """An OpenSSH user certificate for ``private_key`` (the Secret's ``ssh-certificate``)."""

    def fingerprint(self, host: str, port: int, insecure: bool) -> str:
        """A digest of host, port and the whole credential set.

        Connections and cached scheduler answers are shared only between BatchJobs whose
        fingerprints are equal.
        """
        parts = (host, port, insecure, self.username, self.private_key, self.passphrase,
                 self.password, self.known_hosts, self.certificate)
        # The repr of a tuple of strings, ints, bools and None is unambiguous (strings are
        # quoted and escaped), and cheaper than JSON on this per-sync path.
        return hashlib.sha256(repr(parts).encode()).hexdigest()[:32]


def parse_secret(
    secret: Mapping[str, object], *, insecure_host_keys: bool,
    now: datetime.datetime | None = None,
) -> Credentials:
    """Decode a Secret object (base64 ``data``, as the API server sends it). Pure: no I/O.

    With ``now``, an ``ssh-certificate`` that is expired or not valid yet is refused.
    """
    values = _values(secret)
    username = _username(values)
    key, password = _key_or_password(values)
    certificate = _certificate(values, key, now)
    known_hosts = _known_hosts(values, insecure_host_keys)
    return Credentials(
        username=username,
        private_key=key,
        passphrase=values.get("ssh-passphrase") or None,
        password=password,
        known_hosts=known_hosts,
        certificate=certificate,
    )


def _values(secret: Mapping[str, object]) -> dict[str, str]:
    """The Secret's ``data``, each value decoded to text."""
    raw = secret.get("data") or {}
    if not isinstance(raw, dict):
        raise SecretError("the Secret has no data.")
    return {key: _decode(key, value) for key, value in raw.items()}


def _username(values: Mapping[str, str]) -> str:
    """The ``username`` to log in as, which must not be blank."""
    username = (values.get("username") or "").strip()
    if not username:
        raise SecretError("the Secret has no 'username' key.")
    return username


def _key_or_password(values: Mapping[str, str]) -> tuple[str | None, str | None]:
    """The ``ssh-privatekey`` and the ``password``, at least one of them given."""
    key = values.get("ssh-privatekey") or None
    password = values.get("password") or None
    if key is None and password is None:
        raise SecretError("the Secret needs 'ssh-privatekey' or 'password'.")
    return key, password


def _certificate(
    values: Mapping[str, str], key: str | None, now: datetime.datetime | None
) -> str | None:
    """The ``ssh-certificate``, if any: a user certificate beside the key it signs, valid at
    ``now`` when that is given."""
    certificate = values.get("ssh-certificate") or None
    if certificate is not None:
        if key is None:
            raise SecretError(
                "the Secret has an 'ssh-certificate' but no 'ssh-privatekey': a certificate "
                "signs a key, and that key's private half must be in the Secret too.")
        check_certificate(read_certificate(certificate), now)
    return certificate


def _known_hosts(values: Mapping[str, str], insecure_host_keys: bool) -> str | None:
    """The ``known_hosts``, every line of it usable; None only when host keys go unchecked."""
    known_hosts = values.get("known_hosts") or None
    if known_hosts is None and not insecure_host_keys:
        raise SecretError(
            "the Secret has no 'known_hosts' key, and spec.cluster.insecureSkipHostKeyCheck is "
            "not set; add the host's key line (ssh-keyscan -p PORT HOST)."
        )
    if known_hosts is not None:
        check_known_hosts(known_hosts)
    return known_hosts


def _decode(key: object, value: object) -> str:
    if not isinstance(value, str):
        raise SecretError(f"the Secret's key {shown(key)} is not base64 text.")
    try:
        return base64.b64decode(value, validate=True).decode()
    except (binascii.Error, ValueError) as err:  # ValueError: non-ASCII text, not UTF-8
        raise SecretError(f"the Secret's key {shown(key)} is not base64-encoded UTF-8.") from err


# --- known_hosts -------------------------------------------------------------------------------
