"""What a site allows of ``spec.container``: a BatchCluster's ``spec.containers``, read into
``SiteContainers``, and applied to a BatchJob's container before anything reaches the cluster.
Pure: no I/O.

The platform team says which runtimes the site offers (in order of preference, with a
default), the image cache the login and compute nodes share, the registries images may come
from (absent: any; empty: none, only image files), the host paths ``mounts`` may bind (absent:
none) and each runtime's fixed flags. A BatchJob that asks for more is ``InvalidSpec`` with a
sentence naming the field and the BatchCluster. A route a BatchJob names itself (where the
installation allows one) has no platform team: its container runs with the runtime it asks for
(Apptainer by default), from a cache in its work directory, from any registry on the public
Internet, with no host paths.

A BatchCluster that lists no runtime still runs images where its scheduler runs them itself
(HTCondor's ``container_image``, ``pool_runtime``): then only a public ``docker://`` image,
without a registry login, mounts or ``imagePullPolicy: Never``, since the execute node pulls
it, where no login can be handed over and no cache is kept. Whether the pool's nodes advertise
such a runtime is asked before the submission (``hooks.core.decide.images``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from hooks.core.runtimes import RUNTIMES
from hooks.core.spec.container import RUNTIME_NAME, absolute_path, within
from hooks.core.spec.layout import work_dir
from hooks.core.values.fields import SpecError, mapping
from hooks.core.values.image import REGISTRY, Container, PullPolicy, Transport
from hooks.core.values.shell_words import bindable
from hooks.core.values.text import has_control, shown

MAX_LIST = 64
MAX_FLAGS = 32
DIRECT_RUNTIME = "apptainer"
IMAGES = "images"
"""The cache of a route a BatchJob names itself: ``<workDir>/images``."""


@dataclass(frozen=True, slots=True)
class SiteContainers:
    """A BatchCluster's ``spec.containers``, checked."""

    runtimes: tuple[str, ...]
    default: str
    image_cache: str
    allowed_registries: tuple[str, ...] | None = None
    """None: any registry; empty: none."""
    allowed_host_paths: tuple[str, ...] = ()
    runtime_args: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def parse_containers(value: object) -> SiteContainers | None:
    """``spec.containers`` of a BatchCluster, or None when it offers no runtime; ``SpecError``
    names the field."""
    if value is None:
        return None
    raw = mapping(value, "spec.containers")
    runtimes = _names(raw.get("runtimes"), "spec.containers.runtimes")
    default = raw.get("default", runtimes[0])
    if default not in runtimes:
        raise SpecError(f"spec.containers.default must be one of spec.containers.runtimes "
                        f"({', '.join(runtimes)}), not {shown(default)}.")
    if raw.get("imageCache") is None:
        raise SpecError("spec.containers.imageCache must name the directory the login and "
                        "compute nodes share for images.")
    registries = raw.get("allowedRegistries")
    paths = raw.get("allowedHostPaths")
    return SiteContainers(
        runtimes, default, work_dir(raw["imageCache"], "spec.containers.imageCache"),
        None if registries is None else _registries(registries),
        () if paths is None else _host_paths(paths),
        _runtime_args(raw.get("runtimeArgs"), runtimes),
    )


def apply(container: Container, site: SiteContainers | None, *, name: str,
          direct_work_dir: str, pool_runtime: str = "") -> Container:
    """``container`` as the site runs it: its runtime, cache and flags; ``SpecError`` when
    it asks for what the site does not allow. ``name`` is the BatchCluster's (empty for a
    route the BatchJob names itself); ``direct_work_dir`` the attempt's work directory (the
    cache of a route of its own is in it); ``pool_runtime`` the name of the scheduler's own
    runtime, when it has one (``SchedulerRules.own_containers``)."""
    if site is None and name and pool_runtime:
        return _pooled(container, name, pool_runtime)
    if site is None and name:
        raise SpecError(f"spec.container is set, but BatchCluster {name} offers no container "
                        "runtime (its spec.containers is empty); ask its platform team.")
    site = site or SiteContainers((container.runtime or DIRECT_RUNTIME,),
                                  container.runtime or DIRECT_RUNTIME,
                                  f"{direct_work_dir.rstrip('/')}/{IMAGES}")
    which = f" (BatchCluster {name})" if name else ""
    if not bindable(direct_work_dir):
        raise SpecError(f"spec.container needs a work directory without ':' or ',' (the "
                        f"runtimes' binds split on them), not {direct_work_dir!r}{which}.")
    runtime = container.runtime or site.default
    if runtime not in site.runtimes or runtime not in RUNTIMES:
        offered = ", ".join(r for r in site.runtimes if r in RUNTIMES) or "none"
        raise SpecError(f"spec.container.runtime {runtime!r} is not offered{which}; "
                        f"offered: {offered}.")
    _check_image(container, site, runtime, which)
    for index, mount in enumerate(container.mounts):
        if not within(mount.host_path, site.allowed_host_paths):
            raise SpecError(f"spec.container.mounts[{index}].hostPath {mount.host_path} is not "
                            f"below a path the site allows{which}: "
                            f"{', '.join(site.allowed_host_paths) or 'none'}.")
        if mount.read_only and not RUNTIMES[runtime].supports_read_only:
            raise SpecError(f"spec.container.mounts[{index}].readOnly cannot be kept by "
                            f"{runtime}, whose binds are writable; choose another runtime.")
    return replace(container, runtime=runtime, image_cache=site.image_cache,
                   runtime_args=tuple(site.runtime_args.get(runtime, ())),
                   allowed_registries=site.allowed_registries or ())


def _pooled(container: Container, name: str, pool_runtime: str) -> Container:
    """``container`` run by the pool's own runtime, on a BatchCluster ``name`` that lists
    none of its own."""
    which = f"BatchCluster {name} lists no container runtime (spec.containers)"
    if container.runtime:
        raise SpecError(f"spec.container.runtime {container.runtime!r} is not offered: {which}; "
                        "leave it unset to run the image with its pool's own runtime.")
    if container.image.transport is not Transport.DOCKER:
        raise SpecError(f"spec.container.image must be a docker:// reference: {which}, and its "
                        "pool's own runtime pulls only those.")
    if container.pull_secrets:
        raise SpecError(f"spec.container.imagePullSecrets cannot be used: {which}, and its "
                        "pool's own runtime pulls on the execute node, where no registry login "
                        "is handed over.")
    if container.pull_policy is PullPolicy.NEVER:
        raise SpecError(f"spec.container.imagePullPolicy Never needs an image cache: {which}, "
                        "and its pool's own runtime pulls on the execute node.")
    if container.mounts:
        raise SpecError(f"spec.container.mounts cannot be bound: {which}, so no host path is "
                        "allowed.")
    return replace(container, runtime=pool_runtime, image_cache="", runtime_args=(),
                   allowed_registries=())


def _check_image(container: Container, site: SiteContainers, runtime: str, which: str) -> None:
    image = container.image
    if image.transport is Transport.FILE:
        if not within(image.path, (*site.allowed_host_paths, site.image_cache)):
            raise SpecError(f"spec.container.image {image.path} is not below the image cache "
                            f"or a path the site allows{which}.")
        return
    if not RUNTIMES[runtime].pulls(image.transport):
        raise SpecError(f"spec.container.image is an {image.transport}:// reference, which "
                        f"{runtime} cannot pull; use apptainer or singularity.")
    allowed = site.allowed_registries
    if allowed is not None and image.registry not in allowed:
        raise SpecError(f"spec.container.image's registry {image.registry} is not one the site "
                        f"allows{which}: {', '.join(allowed) or 'none, only image files'}.")


def _names(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not 1 <= len(value) <= len(RUNTIMES):
        raise SpecError(f"{where} must list 1 to {len(RUNTIMES)} runtimes "
                        f"({', '.join(RUNTIMES)}).")
    for item in value:
        if not isinstance(item, str) or item not in RUNTIMES:
            raise SpecError(f"{where} lists {shown(item)}, which is none of "
                            f"{', '.join(RUNTIMES)}.")
    return tuple(dict.fromkeys(value))


def _registries(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or len(value) > MAX_LIST:
        raise SpecError(f"spec.containers.allowedRegistries must be a list of at most {MAX_LIST}"
                        " registries (host or host:port).")
    for item in value:
        if not isinstance(item, str) or not REGISTRY.fullmatch(item):
            raise SpecError(f"spec.containers.allowedRegistries lists {shown(item)}, which is "
                            "not a registry (host or host:port).")
    return tuple(item.lower() for item in value)


def _host_paths(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or len(value) > MAX_LIST:
        raise SpecError(f"spec.containers.allowedHostPaths must be a list of at most {MAX_LIST}"
                        " absolute paths.")
    return tuple(absolute_path(item, "spec.containers.allowedHostPaths[]") for item in value)


def _runtime_args(value: object, runtimes: tuple[str, ...]) -> Mapping[str, tuple[str, ...]]:
    raw: Mapping[str, Any] = mapping(value or {}, "spec.containers.runtimeArgs")
    flags = {}
    for runtime, items in raw.items():
        where = f"spec.containers.runtimeArgs.{runtime}"
        if runtime not in runtimes or not RUNTIME_NAME.fullmatch(runtime):
            raise SpecError(f"{where}: {shown(runtime)} is not one of spec.containers.runtimes.")
        if not isinstance(items, list) or len(items) > MAX_FLAGS or not all(
                isinstance(item, str) and item.startswith("-") and not has_control(item)
                and len(item) <= 1024 for item in items):
            raise SpecError(f"{where} must be a list of at most {MAX_FLAGS} flags, each "
                            "starting with '-'.")
        flags[runtime] = tuple(items)
    return flags
