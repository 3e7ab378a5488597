"""What an image registry answers, read: its login challenge, its manifests, its errors and an
image's config. Pure: no I/O.

The hook server asks the registry a reference names which manifest digest it stands for, and
what the image's config says (``hooks.registry``), before the cluster pulls the image by that
digest. A BatchJob may name any registry, so every reader here takes what it reads as hostile:
it bounds the size, checks every type, and answers anything malformed with ``ValueError`` and
one sentence for the BatchJob's status — never another exception, never a credential.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from hooks.core.values.image import DIGEST, ImageConfig
from hooks.core.values.text import readable, shown

MAX_DOCUMENT = 4 * 1024 * 1024
"""The largest manifest, index or config read (a registry's own limit on a manifest)."""
MAX_CHALLENGE = 8192
MAX_ENTRIES = 4096
"""The most items of a list an index or a config may hold."""
MAX_TOKEN = 16384

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
SIF_CONFIG = "application/vnd.sylabs.sif.config.v1+json"
"""The config of a SIF stored as an OCI artifact (``oras://``), which holds no image config."""
INDEXES = frozenset({OCI_INDEX, DOCKER_LIST})
MANIFESTS = frozenset({OCI_MANIFEST, DOCKER_MANIFEST})
IMAGE_CONFIGS = frozenset({OCI_CONFIG, DOCKER_CONFIG})

DOCKER_HUB = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io"})
"""The names of Docker Hub: a reference's, a Docker client's login key's, and its API's."""
DOCKER_HUB_API = "registry-1.docker.io"

Platform = tuple[str, str]
"""An operating system and an architecture, as an index names them: ``("linux", "amd64")``."""

TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
SCHEME = re.compile(rf"[ \t,]*({TOKEN})(?=[ \t,]|\Z)[ \t]*")
PARAM = re.compile(rf'({TOKEN})[ \t]*=[ \t]*(?:({TOKEN})|"((?:[^"\\\x00-\x08\x0a-\x1f\x7f]'
                   r'|\\[^\x00-\x08\x0a-\x1f\x7f])*)")[ \t]*')
"""An auth-param (RFC 9110 §11.2): a name, and a token or a quoted string with escapes."""
TOKEN68 = re.compile(r"[A-Za-z0-9._~+/-]+=*[ \t]*(?=,|\Z)")
SEPARATOR = re.compile(r"(?:,[ \t]*)+")
END = re.compile(r"[ \t,]*\Z")
ESCAPE = re.compile(r"\\(.)", re.DOTALL)
BEARER_TOKEN = re.compile(rf"[\x21-\x7e]{{1,{MAX_TOKEN}}}")
"""A token fit for an ``Authorization`` header: printable ASCII without a space."""


@dataclass(frozen=True, slots=True)
class Challenge:
    """How a registry asks for a login (``WWW-Authenticate``): ``basic``, or ``bearer`` with
    the token service's ``realm`` (a URL), ``service`` and ``scope``."""

    scheme: str
    realm: str = ""
    service: str = ""
    scope: str = ""


def parse_challenge(header: str) -> Challenge:
    """The challenge of a ``WWW-Authenticate`` header the hooks can answer: Bearer when the
    registry offers it, else Basic; ``ValueError`` for a header that does not read or offers
    neither.

    >>> parse_challenge('Bearer realm="https://auth.example.org/token",service="reg"')
    Challenge(scheme='bearer', realm='https://auth.example.org/token', service='reg', scope='')
    >>> parse_challenge('Basic realm="Registry Realm"').scheme
    'basic'
    """
    if len(header) > MAX_CHALLENGE:
        raise ValueError(f"The registry's login challenge is longer than {MAX_CHALLENGE} "
                         "characters.")
    offered = dict(reversed(_challenges(header)))
    if "bearer" in offered:
        params = offered["bearer"]
        if not params.get("realm"):
            raise ValueError("The registry asks for a Bearer token but names no token service "
                             "(realm).")
        return Challenge("bearer", params["realm"], params.get("service", ""),
                         params.get("scope", ""))
    if "basic" in offered:
        return Challenge("basic", offered["basic"].get("realm", ""))
    schemes = readable(", ".join(offered), 100) or "no scheme"
    raise ValueError(f"The registry asks for a login by {schemes}, neither Basic nor Bearer.")


def _challenges(header: str) -> list[tuple[str, dict[str, str]]]:
    """Each challenge of ``header`` in order: its scheme in lower case, and its parameters."""
    found: list[tuple[str, dict[str, str]]] = []
    at = 0
    while not END.match(header, at):
        scheme = SCHEME.match(header, at)
        if scheme is None:
            raise ValueError(_unreadable(header))
        params, at = _params(header, scheme.end())
        if at < len(header) and header[at] != ",":
            raise ValueError(_unreadable(header))
        found.append((scheme.group(1).lower(), params))
    return found


def _params(header: str, at: int) -> tuple[dict[str, str], int]:
    """The parameters of the challenge from ``at``, and where they end: at the comma before
    the next challenge, or at the end."""
    token68 = TOKEN68.match(header, at)
    if token68 is not None:
        return {}, token68.end()
    params: dict[str, str] = {}
    while (param := PARAM.match(header, at)) is not None:
        name, quoted = param.group(1).lower(), param.group(3)
        if name in params:
            raise ValueError(f"The registry's login challenge names {shown(name)} twice.")
        params[name] = param.group(2) if quoted is None else ESCAPE.sub(r"\1", quoted)
        at = param.end()
        separator = SEPARATOR.match(header, at)
        if separator is None or PARAM.match(header, separator.end()) is None:
            break
        at = separator.end()
    return params, at


def _unreadable(header: str) -> str:
    return (f"The registry's login challenge (WWW-Authenticate) does not read: "
            f"{shown(readable(header, 60))}.")


def accept_header() -> str:
    """The ``Accept`` header of a manifest request: every manifest and index the hooks read."""
    return ", ".join((OCI_INDEX, DOCKER_LIST, OCI_MANIFEST, DOCKER_MANIFEST))


def media_type(document: bytes, content_type: str = "") -> str:
    """What kind of manifest ``document`` is: its own ``mediaType``, else the ``Content-Type``
    it was served with; ``ValueError`` when that is no manifest or index the hooks read."""
    declared = _document(document, "manifest").get("mediaType")
    kind = declared if isinstance(declared, str) and declared else (
        content_type.partition(";")[0].strip().lower())
    if kind not in INDEXES | MANIFESTS:
        raise ValueError(f"The registry answered a document of type {shown(readable(kind, 80))}"
                         ", not an image manifest or index.")
    return kind


def pick_manifest(index_json: bytes, platform: Platform = ("linux", "amd64")) -> str:
    """The digest of the manifest an index (or Docker manifest list) lists for ``platform``;
    ``ValueError`` naming the platforms it has when none matches.

    >>> entry = {"mediaType": OCI_MANIFEST, "digest": "sha256:" + "a" * 64,
    ...          "platform": {"os": "linux", "architecture": "amd64"}}
    >>> pick_manifest(json.dumps({"manifests": [entry]}).encode())[:10]
    'sha256:aaa'
    """
    entries = _items(_document(index_json, "image index").get("manifests"),
                     "The image index's manifests")
    seen: list[str] = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise ValueError("The image index lists a manifest that is not an object.")
        listed = _platform(entry.get("platform"))
        if listed == platform and entry.get("mediaType", OCI_MANIFEST) in MANIFESTS:
            return _digest(entry.get("digest"), f"The image index's manifest for {listed}")
        seen.append("/".join(listed))
    has = ", ".join(readable(name, 40) for name in dict.fromkeys(seen) if name != "/")
    raise ValueError(f"The image index lists no manifest for {'/'.join(platform)}; it has "
                     f"{has or 'none for a named platform'}.")


def _platform(value: object) -> Platform:
    if not isinstance(value, dict):
        return "", ""
    system, architecture = value.get("os"), value.get("architecture")
    return (system if isinstance(system, str) else "",
            architecture if isinstance(architecture, str) else "")


def config_digest(manifest_json: bytes) -> tuple[str, str]:
    """The digest and the media type of the config an image manifest names."""
    config = _document(manifest_json, "image manifest").get("config")
    if not isinstance(config, dict):
        raise ValueError("The image manifest names no config.")
    kind = config.get("mediaType")
    if not isinstance(kind, str) or not kind or len(kind) > 255:
        raise ValueError("The image manifest's config has no media type.")
    return _digest(config.get("digest"), "The image manifest's config"), kind


def parse_config(config_json: bytes) -> ImageConfig:
    """What an image's config says about running it: ``Entrypoint``, ``Cmd``, ``Env`` (each
    ``NAME=value`` split at the first ``=``) and ``WorkingDir``; any of them may be absent.

    >>> parse_config(b'{"config": {"Cmd": ["sh"], "Env": ["A=b=c"], "WorkingDir": "/w"}}')
    ImageConfig(entrypoint=(), cmd=('sh',), working_dir='/w')
    """
    config = _document(config_json, "image config").get("config")
    if config is None:
        return ImageConfig()
    if not isinstance(config, dict):
        raise ValueError("The image config's config is not an object.")
    return ImageConfig(
        entrypoint=_strings(config.get("Entrypoint"), "Entrypoint"),
        cmd=_strings(config.get("Cmd"), "Cmd"),
        env=tuple(_variable(item) for item in _strings(config.get("Env"), "Env")),
        working_dir=_string(config.get("WorkingDir"), "WorkingDir"))


def _strings(value: object, field: str) -> tuple[str, ...]:
    if value is None:
        return ()
    return tuple(_string(item, field) for item in _items(value, f"The image config's {field}"))


def _string(value: object, field: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or "\0" in value:
        raise ValueError(f"The image config's {field} holds {shown(value)}, not a string "
                         "without NUL.")
    return value


def _variable(item: str) -> tuple[str, str]:
    name, equals, value = item.partition("=")
    if not equals or not name:
        raise ValueError(f"The image config's Env holds {shown(item)}, which is not "
                         "NAME=value.")
    return name, value


def bearer_token(answer: bytes) -> str:
    """The token of a token service's answer (``token``, or OAuth's ``access_token``)."""
    document = _document(answer, "token service's answer")
    token = document.get("token") or document.get("access_token")
    if not isinstance(token, str) or not BEARER_TOKEN.fullmatch(token):
        raise ValueError("The token service's answer holds no token.")
    return token


def error_text(answer: bytes) -> str:
    """What a registry's error answer says (the ``message`` or ``code`` of its ``errors``),
    readable and short; empty when it says nothing the hooks can read.

    >>> error_text(b'{"errors": [{"code": "MANIFEST_UNKNOWN", "message": "manifest unknown"}]}')
    'manifest unknown'
    """
    try:
        errors = _document(answer, "error answer").get("errors")
    except ValueError:
        return ""
    if not isinstance(errors, list):
        return ""
    said = [error.get("message") or error.get("code") for error in errors[:3]
            if isinstance(error, dict)]
    return readable("; ".join(text for text in said if isinstance(text, str)), 200)


def docker_hub_api(registry: str) -> str:
    """The ``host[:port]`` that serves ``registry``'s API: Docker Hub's is not docker.io.

    >>> docker_hub_api("docker.io"), docker_hub_api("127.0.0.1:5443")
    ('registry-1.docker.io', '127.0.0.1:5443')
    """
    return DOCKER_HUB_API if registry in DOCKER_HUB else registry


def _document(data: bytes, what: str) -> dict[str, Any]:
    """``data`` as a JSON object, or ``ValueError`` naming ``what`` it should be."""
    if len(data) > MAX_DOCUMENT:
        raise ValueError(f"The {what} is larger than {MAX_DOCUMENT // 1024 // 1024} MiB.")
    try:
        document = json.loads(data)
    except (ValueError, RecursionError):
        raise ValueError(f"The {what} is not JSON.") from None
    if not isinstance(document, dict):
        raise ValueError(f"The {what} is not a JSON object.")
    return document


def _items(value: object, what: str) -> list[object]:
    if not isinstance(value, list) or len(value) > MAX_ENTRIES:
        raise ValueError(f"{what} is not a list of at most {MAX_ENTRIES} items.")
    return value


def _digest(value: object, what: str) -> str:
    if not isinstance(value, str) or not DIGEST.fullmatch(value):
        raise ValueError(f"{what} has no digest of the form sha256:<64 hex digits>.")
    return value
