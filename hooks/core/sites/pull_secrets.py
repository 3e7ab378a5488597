"""The registry logins of ``spec.container.imagePullSecrets``: ``kubernetes.io/dockerconfigjson``
Secrets as Metacontroller hands them over, read as hostile as every Secret. Pure: no I/O.

A login is looked up by the registry an image names (``host[:port]``; Docker Hub by any of its
names) in each Secret in turn; a Secret that is missing, of another type or does not read is a
``PullSecretError`` that names it, never one that shows a password.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from typing import Any

from hooks.core.spec.manifests import DOCKER_HUB
from hooks.core.values.text import shown

DOCKERCONFIGJSON = "kubernetes.io/dockerconfigjson"
PULL_SECRETS = "spec.container.imagePullSecrets"


class PullSecretError(ValueError):
    """An ``imagePullSecrets`` Secret that is missing or does not read. The message names the
    Secret and what is wrong with it, never a value it holds."""


def pull_credentials(secrets: Mapping[str, Mapping[str, Any]], names: Sequence[str],
                     registry: str) -> tuple[str, str] | None:
    """The user and password for ``registry`` (``host[:port]``) in the first of the Secrets
    ``names`` that holds a login for it, or None when none does. ``secrets`` are the Secrets
    as Metacontroller hands them over (``data`` in base64); ``PullSecretError`` names a Secret
    that is missing, of another type, or does not read.
    """
    aliases = DOCKER_HUB if registry in DOCKER_HUB else frozenset({registry.lower()})
    for name in names:
        for key, entry in _auths(secrets.get(name), name).items():
            if _registry_of(key) in aliases:
                login = _login(entry, name, key)
                if login is not None:
                    return login
    return None


def _auths(secret: Mapping[str, Any] | None, name: str) -> dict[str, Any]:
    """The ``auths`` of Secret ``name``'s ``.dockerconfigjson``, keyed by registry."""
    if secret is None:
        raise PullSecretError(f"Secret {name!r} ({PULL_SECRETS}) was not found.")
    if secret.get("type") != DOCKERCONFIGJSON:
        raise PullSecretError(f"Secret {name!r} ({PULL_SECRETS}) is of type "
                              f"{shown(secret.get('type'))}, not {DOCKERCONFIGJSON}.")
    data = secret.get("data")
    encoded = data.get(".dockerconfigjson") if isinstance(data, Mapping) else None
    if not isinstance(encoded, str):
        raise PullSecretError(f"Secret {name!r} ({PULL_SECRETS}) has no .dockerconfigjson.")
    try:
        document = json.loads(base64.b64decode(encoded, validate=True))
    except (ValueError, RecursionError):
        raise PullSecretError(f"Secret {name!r} ({PULL_SECRETS}) has no .dockerconfigjson that "
                              "is base64 of a JSON document.") from None
    auths = document.get("auths", {}) if isinstance(document, dict) else None
    if not isinstance(auths, dict):
        raise PullSecretError(f"Secret {name!r} ({PULL_SECRETS}): .dockerconfigjson's auths is "
                              "not an object of registries.")
    return auths


def _registry_of(key: str) -> str:
    """The registry an ``auths`` key names (``host``, ``host:port`` or a URL of either),
    as ``host[:port]`` in lower case."""
    rest = key.strip().lower()
    for scheme in ("https://", "http://"):
        rest = rest.removeprefix(scheme)
    return rest.partition("/")[0]


def _login(entry: object, name: str, key: str) -> tuple[str, str] | None:
    """The login of one ``auths`` entry: ``auth`` (base64 of ``user:password``), else
    ``username`` and ``password``; None when it holds neither."""
    where = f"Secret {name!r} ({PULL_SECRETS}): the entry for {shown(key)}"
    if not isinstance(entry, dict):
        raise PullSecretError(f"{where} is not an object.")
    auth = entry.get("auth")
    if isinstance(auth, str) and auth:
        try:
            user, colon, password = base64.b64decode(auth, validate=True).decode().partition(":")
        except ValueError:
            user, colon, password = "", "", ""
        if not user or not colon:
            raise PullSecretError(f"{where} has an auth that is not base64 of user:password.")
        return user, password
    username, secret = entry.get("username"), entry.get("password")
    if isinstance(username, str) and username and isinstance(secret, str):
        return username, secret
    return None
