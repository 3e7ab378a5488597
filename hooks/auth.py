"""Who may call the hooks: Metacontroller's bearer token and its client certificate.

Two settings, read once when the app is built (``ClientRequirements.from_env``), each on its own:

* ``HPCBRIDGE_AUTH_TOKEN_FILE`` names a file that holds the token (whitespace around it is
  ignored, as Metacontroller trims the value it sends). A hook call must carry
  ``Authorization: Bearer <token>``; the comparison takes the same time whatever the token
  sent. Unset: no token is asked for.
* ``HPCBRIDGE_TLS_CLIENT_CA`` is the CA of the client certificates. The server fails the TLS
  handshake of a client that presents no certificate or one that this CA did not sign
  (``hooks/server.py``; the kubelet probes ``/healthz`` on the plain port of
  ``HPCBRIDGE_METRICS_PORT`` instead). The app checks it once more: a hook call must have come
  over a connection whose certificate the handshake verified. Unset: no certificate is asked
  for.

The app applies the requirements to every view but ``/healthz`` and ``/metrics``. Standard library
only.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TOKEN_FILE = "HPCBRIDGE_AUTH_TOKEN_FILE"
CLIENT_CA = "HPCBRIDGE_TLS_CLIENT_CA"
PEER_CERTIFICATE = "hpcbridge.peer_certificate"
"""The WSGI environ key under which the server passes the client certificate that the TLS
handshake verified (``ssl.SSLSocket.getpeercert()``'s dict); absent without one."""


def read_token(path: str) -> bytes:
    """The token in the file at ``path``, without surrounding whitespace; refuses an unreadable
    or empty file, so that a broken mount stops the server instead of opening it."""
    try:
        token = Path(path).read_bytes().strip()
    except OSError as error:
        raise ValueError(f"{TOKEN_FILE}={path!r} cannot be read: {error.strerror}") from None
    if not token:
        raise ValueError(f"{TOKEN_FILE}={path!r} is empty")
    return token


def token_allows(expected: bytes | None, authorization: str | None) -> bool:
    """Whether an ``Authorization`` header value carries the expected bearer token.

    ``expected`` None means that no token is required. The scheme is case-insensitive, as
    Metacontroller's ``authorization.type`` is. The header is latin-1 text in WSGI, so its
    bytes are the ones that came over the wire.
    """
    if expected is None:
        return True
    scheme, _, credentials = (authorization or "").strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    try:
        sent = credentials.strip().encode("latin-1")
    except UnicodeEncodeError:  # not from a WSGI environ: no header can carry it
        return False
    return hmac.compare_digest(sent, expected)


def presented_certificate(environ: Mapping[str, Any]) -> bool:
    """Whether the request's connection presented a client certificate that the TLS handshake
    verified: a verified peer certificate is a non-empty dict; plain HTTP, a connection without
    one or another server leave none."""
    certificate = environ.get(PEER_CERTIFICATE)
    return isinstance(certificate, dict) and bool(certificate)


@dataclass(frozen=True)
class ClientRequirements:
    """What a hook call must bring: the bearer token (if ``token``) and a verified client
    certificate (if ``client_certificate``)."""

    token: bytes | None = field(default=None, repr=False)
    client_certificate: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ClientRequirements:
        path = env.get(TOKEN_FILE)
        return cls(token=read_token(path) if path else None,
                   client_certificate=bool(env.get(CLIENT_CA)))

    def refusal(self, authorization: str | None, environ: Mapping[str, Any]) -> str | None:
        """Why a call with this ``Authorization`` header, over this connection, is refused;
        None when it is allowed."""
        if self.client_certificate and not presented_certificate(environ):
            return "a client certificate signed by the hooks' client CA is required"
        if not token_allows(self.token, authorization):
            if not authorization:
                return "an Authorization: Bearer token is required"
            return "the bearer token is not the one the hooks accept"
        return None
