"""The OpenSSH texts a login Secret (or a BatchCluster) holds, checked where a mistake is
cheapest to explain: every ``known_hosts`` line must be one the SSH layer can use (a line it
cannot read, or an ``@cert-authority`` line, is refused by its number instead of being
skipped), and an ``ssh-certificate`` must be an OpenSSH user certificate (PROTOCOL.certkeys),
valid at the time of the call when that time is given. Pure: no I/O."""

from __future__ import annotations

import base64
import binascii
import datetime
from dataclasses import dataclass

from hooks.core.values.text import shown


class SecretError(ValueError):
    """The Secret is unusable; the message names the key and never shows a value."""


MARKERS = ("@cert-authority", "@revoked")
HASH_SIZE = 20
"""Bytes of the salt and of the digest of a hashed host name (``|1|salt|hash``: HMAC-SHA1)."""


def check_known_hosts(text: str, where: str = "the Secret's known_hosts") -> None:
    """Refuse a ``known_hosts`` that has a line the SSH layer cannot use, naming the line.

    A line is ``[@revoked] NAMES KEY-TYPE BASE64-KEY [COMMENT]``, with NAMES comma-separated
    host names, ``[host]:port`` or hashed ``|1|salt|hash``. ``@revoked`` lines are honoured
    (a host offering that key is refused); ``@cert-authority`` lines are refused, since host
    certificates cannot be verified. Blank lines and ``#`` comments are fine, and so is a
    well-formed line of a key type the SSH layer does not know (the host may offer another).
    """
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        line_of = f"{where} line {number}"
        if fields[0] == "@cert-authority":
            raise SecretError(
                f"{line_of} is an @cert-authority line; host certificates cannot be verified "
                "yet, so list the host's own key (ssh-keyscan -p PORT HOST).")
        if fields[0].startswith("@"):
            if fields[0] not in MARKERS:
                raise SecretError(f"{line_of} starts with an unknown marker (only @revoked and "
                                  "@cert-authority exist).")
            fields = fields[1:]
        if len(fields) < 3:
            raise SecretError(f"{line_of} is not 'HOST KEY-TYPE KEY' (ssh-keyscan -p PORT HOST "
                              "prints such lines).")
        names, key_type, key = fields[:3]
        if not all(_usable_name(name) for name in names.split(",")):
            raise SecretError(f"{line_of} has a host name that is empty or a malformed hashed "
                              "name (|1|salt|hash).")
        if _key_type(key) != key_type:
            raise SecretError(f"{line_of} does not hold a {shown(key_type)} key in base64.")


def _usable_name(name: str) -> bool:
    if not name.startswith("|"):
        return bool(name)
    parts = name.split("|")
    return (len(parts) == 4 and parts[1] == "1"
            and all(len(_b64(part) or b"") == HASH_SIZE for part in parts[2:]))


def _key_type(text: str) -> str | None:
    """The type a base64 public key blob names in its first field, or None if it is none."""
    blob = _b64(text)
    if blob is None:
        return None
    try:
        return _Reader(blob).text()
    except ValueError:
        return None


def _b64(text: str) -> bytes | None:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


# --- ssh-certificate ---------------------------------------------------------------------------

CERT_SUFFIX = "-cert-v01@openssh.com"
PUBLIC_FIELDS = {
    "ssh-ed25519": 1,  # string pk
    "ecdsa-sha2-nistp256": 2,  # string curve, string Q
    "ecdsa-sha2-nistp384": 2,
    "ecdsa-sha2-nistp521": 2,
    "ssh-rsa": 2,  # mpint e, mpint n
}
"""The key types whose certificates the SSH layer can log in with, and how many public fields
follow the nonce in each (PROTOCOL.certkeys; an mpint is encoded as a string is)."""
USER_CERT, HOST_CERT = 1, 2
FOREVER = 0xFFFF_FFFF_FFFF_FFFF
MAX_SHOWN = 253402300799
"""9999-12-31T23:59:59Z: a later bound is shown as ``forever``."""
NOT_A_CERTIFICATE = ("the Secret's ssh-certificate is not an OpenSSH user certificate (the one "
                     "line of an id_*-cert.pub file).")


@dataclass(frozen=True, slots=True)
class Certificate:
    """What the SSH layer needs of an OpenSSH user certificate (none of it is secret)."""

    public_key: bytes
    """The certified key as an SSH public key blob (what ``ssh-keygen -y`` prints in base64)."""
    valid_after: int
    valid_before: int
    """Seconds since the epoch; ``FOREVER`` when the certificate does not expire."""

    @property
    def window(self) -> str:
        return f"from {_when(self.valid_after)} to {_when(self.valid_before)}"


def read_certificate(text: str) -> Certificate:
    """Parse the text of an ``id_*-cert.pub`` file (``TYPE BASE64 [COMMENT]``)."""
    lines = text.strip().splitlines()
    fields = lines[0].split() if len(lines) == 1 else []
    if len(fields) < 2 or not fields[0].endswith(CERT_SUFFIX):
        raise SecretError(NOT_A_CERTIFICATE)
    blob = _b64(fields[1])
    if blob is None:
        raise SecretError(NOT_A_CERTIFICATE)
    try:
        reader = _Reader(blob)
        cert_type = reader.text()
        if cert_type != fields[0]:
            raise SecretError(NOT_A_CERTIFICATE)
        key_type = cert_type.removesuffix(CERT_SUFFIX)
        if key_type not in PUBLIC_FIELDS:
            raise SecretError(
                f"the Secret's ssh-certificate is of type {shown(cert_type)}; certificates of "
                "ed25519, ECDSA and RSA keys can be used.")
        reader.string()  # nonce
        start = reader.at
        for _ in range(PUBLIC_FIELDS[key_type]):
            reader.string()
        public = _string(key_type.encode()) + blob[start:reader.at]
        reader.uint64()  # serial
        kind = reader.uint32()
        reader.string()  # key id
        reader.string()  # principals
        valid_after, valid_before = reader.uint64(), reader.uint64()
    except ValueError as err:
        if isinstance(err, SecretError):
            raise
        raise SecretError(NOT_A_CERTIFICATE) from err
    if kind != USER_CERT:
        what = "a host certificate" if kind == HOST_CERT else "not a user certificate"
        raise SecretError(f"the Secret's ssh-certificate is {what}; logging in takes a user "
                          "certificate (ssh-keygen -s CA_KEY -I ID -n USER KEY.pub, without -h).")
    return Certificate(public, valid_after, valid_before)


def check_certificate(cert: Certificate, now: datetime.datetime | None) -> None:
    """Refuse a certificate that is not valid at ``now`` (unchecked when ``now`` is None)."""
    if now is None:
        return
    moment = now if now.tzinfo else now.replace(tzinfo=datetime.UTC)
    seconds = int(moment.timestamp())
    if seconds < cert.valid_after:
        raise SecretError(f"the Secret's ssh-certificate is valid {cert.window} and is not "
                          "valid yet.")
    if cert.valid_before != FOREVER and seconds >= cert.valid_before:
        raise SecretError(f"the Secret's ssh-certificate is valid {cert.window} and has "
                          "expired.")


def _when(seconds: int) -> str:
    if seconds > MAX_SHOWN:
        return "forever"
    moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _string(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


class _Reader:
    """Reads the SSH wire encoding (RFC 4251): ``ValueError`` when the data runs out."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def take(self, size: int) -> bytes:
        if self.at + size > len(self.data):
            raise ValueError("truncated")
        part = self.data[self.at:self.at + size]
        self.at += size
        return part

    def uint32(self) -> int:
        return int.from_bytes(self.take(4), "big")

    def uint64(self) -> int:
        return int.from_bytes(self.take(8), "big")

    def string(self) -> bytes:
        return self.take(self.uint32())

    def text(self) -> str:
        return self.string().decode()  # UnicodeDecodeError is a ValueError
