"""Who may call the hooks, and where: Metacontroller's bearer token, and not the probes' port.

Two settings, read once when the app is built (``ClientRequirements.from_env``):

* ``HPCBRIDGE_AUTH_TOKEN_FILE`` names a file that holds the token (whitespace around it is
  ignored, as Metacontroller trims the value it sends). A hook call must carry
  ``Authorization: Bearer <token>``; the comparison takes the same time whatever the token
  sent. Unset: no token is asked for.
* ``HPCBRIDGE_METRICS_PORT`` is the probes' port (``hooks/gunicorn_conf.py`` binds it): plain
  HTTP for the kubelet and the scraper, past the TLS front. It serves ``/healthz`` and
  ``/metrics`` only; a hook call that arrives there is refused.

Metacontroller's client certificate is required by the TLS front, nginx in the same Pod
(``deploy/base/nginx.conf``), before any request reaches the app. The app applies the requirements
to every view but ``/healthz`` and ``/metrics``. Standard library only.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TOKEN_FILE = "HPCBRIDGE_AUTH_TOKEN_FILE"
PROBES_PORT = "HPCBRIDGE_METRICS_PORT"


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


def probes_port(env: Mapping[str, str]) -> str | None:
    """The probes' port (``HPCBRIDGE_METRICS_PORT``), checked, or None."""
    text = env.get(PROBES_PORT) or None
    if text is None:
        return None
    if not text.isdigit() or not 0 < int(text) < 65536 or text == env.get("PORT", "8080"):
        raise ValueError(f"{PROBES_PORT}={text!r} is not a free port number beside PORT")
    return str(int(text))


@dataclass(frozen=True)
class ClientRequirements:
    """What a hook call must bring (the bearer token, if ``token``), and the port it must not
    come to (``probes_port``)."""

    token: bytes | None = field(default=None, repr=False)
    probes_port: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ClientRequirements:
        path = env.get(TOKEN_FILE)
        return cls(token=read_token(path) if path else None, probes_port=probes_port(env))

    def on_probes_port(self, environ: Mapping[str, Any]) -> bool:
        """Whether the request came to the probes' port (gunicorn's ``SERVER_PORT`` is the
        port of the socket it was accepted on)."""
        return self.probes_port is not None and environ.get("SERVER_PORT") == self.probes_port

    def refusal(self, authorization: str | None) -> str | None:
        """Why a call with this ``Authorization`` header is refused; None when it is allowed."""
        if not token_allows(self.token, authorization):
            if not authorization:
                return "an Authorization: Bearer token is required"
            return "the bearer token is not the one the hooks accept"
        return None
