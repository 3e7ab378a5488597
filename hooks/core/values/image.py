"""Container images: a reference as ``spec.container.image`` writes it, the container a BatchJob
runs, what an image's config says, and what an attempt recorded of its image. Pure: no I/O.

A reference is one of three forms:

- ``[registry/]repository[:tag][@digest]``, ``docker://`` implied: an image in an OCI
  registry, pulled by the runtime into the site's cache by digest;
- ``oras://registry/repository[:tag][@digest]``: an image file (a SIF) stored as an OCI
  artifact, which only Apptainer and SingularityCE pull;
- an absolute path: an image file that is on the cluster already, run as it is.

The grammar is the one OCI registries and ``docker pull`` share (``distribution/reference``),
checked here in full, so that nothing a BatchJob writes reaches a command line unless it is a
reference: no space, quote, ``;``, ``$`` or leading ``-`` passes.
"""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass, field

from hooks.core.values.fields import SpecError
from hooks.core.values.text import shown

MAX_REFERENCE = 255 + 1 + 255 + 1 + 128 + 1 + 71
"""The longest reference: a registry, a repository of 255, a tag of 128 and a digest."""
COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
HOST_LABEL = r"(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])"
REGISTRY = re.compile(rf"(?:{HOST_LABEL}(?:\.{HOST_LABEL})*|\[[0-9A-Fa-f:.]+\])(?::[0-9]{{1,5}})?")
REPOSITORY = re.compile(rf"{COMPONENT}(?:/{COMPONENT})*")
SUBMITTABLE = re.compile(r"[A-Za-z0-9._/@:+\[\]-]+")
"""An image a job description may name as it is (HTCondor's ``container_image``): no space,
quote, ``#`` or ``$`` that the description would read as more than the image."""
TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
DIGEST = re.compile(r"sha256:[a-f0-9]{64}|sha512:[a-f0-9]{128}")
IMAGE_FILE = re.compile(r"/(?:[A-Za-z0-9._+-]+/)*[A-Za-z0-9._+-]+")
"""An image file on the cluster: an absolute path of plain names (no ``..`` component)."""
DEFAULT_REGISTRY = "docker.io"
DEFAULT_TAG = "latest"


class Transport(enum.StrEnum):
    """Where an image comes from."""

    DOCKER = "docker"
    ORAS = "oras"
    FILE = "file"


class PullPolicy(enum.StrEnum):
    """``spec.container.imagePullPolicy``, as a Pod's."""

    ALWAYS = "Always"
    IF_NOT_PRESENT = "IfNotPresent"
    NEVER = "Never"


@dataclass(frozen=True, slots=True)
class ImageRef:
    """A reference, parsed. For an image file only ``path`` is set."""

    text: str
    """As the BatchJob wrote it."""
    transport: Transport
    registry: str = ""
    """``host[:port]``, lower case; ``docker.io`` when the reference names none."""
    repository: str = ""
    tag: str = ""
    """Empty for a reference pinned by digest alone."""
    digest: str = ""
    """``sha256:<hex>`` when the reference pins one."""
    path: str = ""

    @property
    def host(self) -> str:
        """The registry's host without its port (an IPv6 address without brackets)."""
        host = self.registry.rpartition(":")[0] if self.registry.rfind(":") > self.registry.rfind(
            "]") else self.registry
        return host.strip("[]")

    def pinned(self, digest: str) -> str:
        """The reference by ``digest``, as runtimes pull it: ``registry/repository@digest``."""
        return f"{self.registry}/{self.repository}@{digest}"

    @property
    def named(self) -> str:
        """The reference with its registry and tag written out (the cache's index key)."""
        if self.transport is Transport.FILE:
            return self.path
        tail = f":{self.tag}" if self.tag else ""
        tail += f"@{self.digest}" if self.digest else ""
        return f"{self.transport}://{self.registry}/{self.repository}{tail}"


def parse_reference(value: object, where: str) -> ImageRef:
    """``value`` as an image reference, or ``SpecError`` naming ``where``.

    >>> parse_reference("python:3.12", "image").named
    'docker://docker.io/library/python:3.12'
    >>> ref = parse_reference("127.0.0.1:5443/lab/sim@sha256:" + "a" * 64, "image")
    >>> (ref.registry, ref.repository, ref.tag, ref.host)
    ('127.0.0.1:5443', 'lab/sim', '', '127.0.0.1')
    >>> parse_reference("/scratch/images/sim.sif", "image").path
    '/scratch/images/sim.sif'
    """
    if not isinstance(value, str) or not value or len(value) > MAX_REFERENCE:
        raise SpecError(f"{where} must be an image reference, not {shown(value)}.")
    if value.startswith("/"):
        if not IMAGE_FILE.fullmatch(value) or "/../" in f"{value}/" or "/./" in f"{value}/":
            raise SpecError(f"{where} must be an absolute path of plain names (letters, digits, "
                            f"'._+-'), not {shown(value)}.")
        return ImageRef(value, Transport.FILE, path=value)
    transport, rest = Transport.DOCKER, value
    for prefix in (Transport.DOCKER, Transport.ORAS):
        if value.startswith(f"{prefix}://"):
            transport, rest = prefix, value[len(prefix) + 3:]
    name, at, digest = rest.partition("@")
    if at and not DIGEST.fullmatch(digest):
        raise SpecError(f"{where} has a digest that is not sha256:<64 hex digits>: "
                        f"{shown(value)}.")
    registry, repository = _split_registry(name)
    repository, tag = _split_tag(repository)
    if not REGISTRY.fullmatch(registry) or not REPOSITORY.fullmatch(repository) or (
            tag and not TAG.fullmatch(tag)) or len(repository) > 255:
        raise SpecError(f"{where} must be an image reference ([registry/]repository[:tag]"
                        f"[@digest], oras://..., or an absolute path), not {shown(value)}.")
    if registry == DEFAULT_REGISTRY and "/" not in repository:
        repository = f"library/{repository}"
    if not tag and not digest:
        tag = DEFAULT_TAG
    return ImageRef(value, transport, registry.lower(), repository, tag, digest)


def _split_registry(name: str) -> tuple[str, str]:
    """The registry and the rest: the first component names a registry when it has a dot or
    a port, or is ``localhost`` (as ``docker pull`` reads it)."""
    first, slash, rest = name.partition("/")
    if slash and (first == "localhost" or "." in first or ":" in first or first.startswith("[")):
        return first, rest
    return DEFAULT_REGISTRY, name


def _split_tag(repository: str) -> tuple[str, str]:
    path, colon, tag = repository.rpartition(":")
    return (path, tag) if colon else (repository, "")


@dataclass(frozen=True, slots=True)
class Mount:
    """One entry of ``spec.container.mounts``: a path on the cluster, bound into the image."""

    host_path: str
    mount_path: str
    read_only: bool = False


@dataclass(frozen=True, slots=True)
class Container:
    """``spec.container``, checked, with what the route's site decides filled in
    (``hooks.core.sites.containers``): the runtime, the cache and the site's own flags."""

    image: ImageRef
    pull_policy: PullPolicy = PullPolicy.IF_NOT_PRESENT
    pull_secrets: tuple[str, ...] = ()
    """``imagePullSecrets``: names of ``kubernetes.io/dockerconfigjson`` Secrets."""
    command: tuple[str, ...] | None = None
    """Replaces the image's entrypoint when set."""
    args: tuple[str, ...] = ()
    working_dir: str = ""
    """Empty: the attempt's directory, bound at its own path."""
    mounts: tuple[Mount, ...] = ()
    runtime: str = ""
    """As the BatchJob asks; after routing, the runtime the attempt uses."""
    image_cache: str = ""
    """The site's cache directory: absolute, or relative to the login user's home."""
    runtime_args: tuple[str, ...] = ()
    """The site's fixed flags for the runtime (``spec.containers.runtimeArgs``)."""
    allowed_registries: tuple[str, ...] = ()
    """The registries the site lists, which the hooks may ask whatever their address."""


@dataclass(frozen=True, slots=True)
class PoolContainers:
    """What a pool's execute nodes advertise of running an image themselves (HTCondor's
    ``HasContainer`` with ``HasSIF`` or ``HasDockerURL``): a scheduler without such support
    advertises neither."""

    sif: bool = False
    """Some execute node runs a SIF file named by its path."""
    docker: bool = False
    """Some execute node pulls a ``docker://`` reference itself and runs it."""


@dataclass(frozen=True, slots=True)
class ImageConfig:
    """What an image's config says about running it (OCI image config ``config``)."""

    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    working_dir: str = ""


def config_bytes(config: ImageConfig) -> bytes:
    """``config`` as an OCI image config holds it, for the site's cache to keep beside the
    image (read back by ``hooks.core.spec.manifests.parse_config``).

    >>> config_bytes(ImageConfig(("/bin/echo",), env=(("A", "1"),)))
    b'{"config":{"Entrypoint":["/bin/echo"],"Cmd":[],"Env":["A=1"],"WorkingDir":""}}'
    """
    return json.dumps({"config": {
        "Entrypoint": list(config.entrypoint), "Cmd": list(config.cmd),
        "Env": [f"{name}={value}" for name, value in config.env],
        "WorkingDir": config.working_dir}}, separators=(",", ":")).encode()


@dataclass(frozen=True, slots=True)
class ImageRecord:
    """``status.image``: the image of the attempt as asked, as resolved, and with what it
    runs; and how its pull went, for the back-off of a pull that fails."""

    reference: str
    runtime: str
    digest: str = ""
    """The manifest digest the attempt runs (empty for an image file)."""
    pull_failures: int = 0
    last_failure: str = ""
    """When the last pull failed (RFC 3339), the start of its back-off."""


BACKOFF_FIRST, BACKOFF_MAX = 10, 300
"""Seconds before the first retry of a failed pull, and the longest wait: a kubelet's."""


def pull_backoff(failures: int) -> int:
    """Seconds to wait after ``failures`` pulls failed in a row before the next.

    >>> [pull_backoff(n) for n in (1, 2, 3, 6, 40)]
    [10, 20, 40, 300, 300]
    """
    return int(min(BACKOFF_MAX, BACKOFF_FIRST << min(max(failures - 1, 0), 16)))


@dataclass(frozen=True, slots=True)
class ResolvedImage:
    """What the registry said of a reference: the manifest digest, and the image's config."""

    digest: str
    config: ImageConfig


class Prepared(enum.StrEnum):
    """Where the image stands in the site's cache, as the login node answers."""

    READY = "ready"
    PULLING = "pulling"
    FAILED = "failed"
    MISSING = "missing"


@dataclass(frozen=True, slots=True)
class PreparedImage:
    """The login node's answer: the state, and for a ready image its digest, its path in the
    cache and its config; for a failed pull, the puller's last word."""

    state: Prepared
    digest: str = ""
    path: str = ""
    config: ImageConfig | None = None
    message: str = ""


@dataclass(frozen=True, slots=True)
class ImagePull:
    """What the login node needs to find ``reference`` in the cache, or pull it there.

    With a ``digest`` the image is pulled unless it is cached (``retry`` starts a pull that
    failed again); without one, only the cache's record of ``key`` is looked up
    (``imagePullPolicy: Never``, or a registry out of reach)."""

    cache: str
    runtime: str
    suffix: str
    """What the runtime's cache name adds to ``sha256-<hex>``."""
    key: str
    """The reference with its registry and tag written out (``ImageRef.named``)."""
    digest: str
    source: str
    """The pinned reference with its transport, as the runtime pulls it."""
    pinned: str
    """The pinned reference without transport."""
    pull_dir: str
    """The attempt's pull directory: its log, its status and, while it runs, its login."""
    config: bytes = b""
    credentials: tuple[str, str] | None = field(default=None, repr=False)
    retry: bool = False
