"""The host keys a Secret's known_hosts lists for a host: plain and hashed host names,
``@revoked`` keys; host certificates (``@cert-authority``) are not read."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac

import paramiko

from hooks.core.sites.secret import Credentials
from hooks.ssh.client import Target


class KnownKeys:
    """The keys a known_hosts lists for one host name: usable ones by key type, and the key
    blobs marked ``@revoked``."""

    def __init__(self) -> None:
        self.keys: dict[str, paramiko.PKey] = {}
        self.revoked: set[bytes] = set()

    def __bool__(self) -> bool:
        return bool(self.keys or self.revoked)


def known_host_keys(credentials: Credentials, target: Target) -> KnownKeys:
    """The keys known_hosts lists for the target's known_hosts name (hashed names included).

    Lines ``hooks.core.sites.openssh.check_known_hosts`` refuses never get here from a Secret the
    hooks parsed; this reads what it can and skips the rest (a key type paramiko does not
    know, say). ``@cert-authority`` lines are skipped: host certificates cannot be verified.
    """
    found = KnownKeys()
    name = target.known_hosts_name
    for line in (credentials.known_hosts or "").splitlines():
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        marker = fields.pop(0) if fields[0].startswith("@") else None
        if marker not in (None, "@revoked") or len(fields) < 3:
            continue
        if not any(name_matches(pattern, name) for pattern in fields[0].split(",")):
            continue
        try:
            key = paramiko.PKey.from_type_string(
                fields[1], base64.b64decode(fields[2], validate=True))
        except (paramiko.SSHException, binascii.Error, ValueError, TypeError):
            continue
        if marker == "@revoked":
            found.revoked.add(key.asbytes())
        else:
            found.keys.setdefault(key.get_name(), key)
    return found


def name_matches(pattern: str, name: str) -> bool:
    """Whether a known_hosts host name field matches ``name``: equal, or hashed from it
    (``|1|salt|hash``, an HMAC-SHA1 of the name keyed with the salt)."""
    if not pattern.startswith("|1|"):
        return pattern == name
    parts = pattern.split("|")
    if len(parts) != 4:
        return False
    try:
        salt, digest = (base64.b64decode(part, validate=True) for part in parts[2:])
    except (binascii.Error, ValueError):
        return False
    return hmac.compare_digest(hmac.new(salt, name.encode(), hashlib.sha1).digest(), digest)


def key_family(key_type: str) -> str:
    """The known_hosts name of a negotiated host key algorithm."""
    if key_type.startswith("rsa-sha2-"):
        return "ssh-rsa"
    return key_type.removesuffix("-cert-v01@openssh.com")
