"""The cluster Secret: decoding it into ``Credentials`` without ever exposing its values."""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from hooks.core.text import shown


class SecretError(ValueError):
    """The Secret is unusable; the message names the key and never shows a value."""


@dataclass(frozen=True, slots=True)
class Credentials:
    """How to log in. Secret values are excluded from ``repr`` so they never reach a log."""

    username: str
    private_key: str | None = field(default=None, repr=False)
    passphrase: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)
    known_hosts: str | None = field(default=None, repr=False)

    def fingerprint(self, host: str, port: int, insecure: bool) -> str:
        """A digest of host, port and the whole credential set.

        Connections and cached scheduler answers are shared only between BatchJobs whose
        fingerprints are equal.
        """
        parts = (host, port, insecure, self.username, self.private_key, self.passphrase,
                 self.password, self.known_hosts)
        # The repr of a tuple of strings, ints, bools and None is unambiguous (strings are
        # quoted and escaped), and cheaper than JSON on this per-sync path.
        return hashlib.sha256(repr(parts).encode()).hexdigest()[:32]


def parse_secret(secret: Mapping[str, object], *, insecure_host_keys: bool) -> Credentials:
    """Decode a Secret object (base64 ``data``, as the API server sends it). Pure: no I/O."""
    raw = secret.get("data") or {}
    if not isinstance(raw, dict):
        raise SecretError("the Secret has no data.")
    values = {key: _decode(key, value) for key, value in raw.items()}
    username = (values.get("username") or "").strip()
    if not username:
        raise SecretError("the Secret has no 'username' key.")
    key = values.get("ssh-privatekey") or None
    password = values.get("password") or None
    if key is None and password is None:
        raise SecretError("the Secret needs 'ssh-privatekey' or 'password'.")
    known_hosts = values.get("known_hosts") or None
    if known_hosts is None and not insecure_host_keys:
        raise SecretError(
            "the Secret has no 'known_hosts' key, and spec.cluster.insecureSkipHostKeyCheck is "
            "not set; add the host's key line (ssh-keyscan -p PORT HOST)."
        )
    return Credentials(
        username=username,
        private_key=key,
        passphrase=values.get("ssh-passphrase") or None,
        password=password,
        known_hosts=known_hosts,
    )


def _decode(key: object, value: object) -> str:
    if not isinstance(value, str):
        raise SecretError(f"the Secret's key {shown(key)} is not base64 text.")
    try:
        return base64.b64decode(value, validate=True).decode()
    except (binascii.Error, ValueError) as err:  # ValueError: non-ASCII text, not UTF-8
        raise SecretError(f"the Secret's key {shown(key)} is not base64-encoded UTF-8.") from err
