"""BatchClusters: HPC sites defined once by the platform team, read into a ``Site``.

A BatchCluster (cluster-scoped, ``hpcbridge.io/v1alpha1``) names a login node, its jump hosts
and the host keys vouched for along that route, a default work directory, which namespaces'
BatchJobs may use it (``namespaceSelector``), defaults for the fields a BatchJob leaves out,
limits a BatchJob may not exceed and the object stores its BatchJobs may name whatever their
address (``spec.storage.allowedEndpoints``). Metacontroller hands it over as a related object;
nothing in it is trusted before ``parse_site`` has checked every field the way a BatchJob's are
checked (``hooks.core.sites.routing`` applies it to a BatchJob). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hooks.core.sites.containers import SiteContainers, parse_containers
from hooks.core.sites.limits import Limits, free_form_beyond, read_limits, within
from hooks.core.sites.openssh import SecretError, check_known_hosts
from hooks.core.sites.selector import Selector, parse_selector
from hooks.core.spec.batchjob import parse_resources
from hooks.core.spec.endpoints import Endpoint, parse_list
from hooks.core.spec.layout import DNS_SUBDOMAIN, MAX_JUMPS, host_name, port_number, work_dir
from hooks.core.values.fields import SpecError, mapping
from hooks.core.values.sdk import Rules
from hooks.core.values.text import shown

API_VERSION = "hpcbridge.io/v1alpha1"
KIND = "BatchCluster"
MAX_KNOWN_HOSTS = 64 * 1024
"""Characters of ``spec.knownHosts``: every attempt keeps them in its status."""
MAX_ENDPOINTS = 32
class SiteError(ValueError):
    """The BatchCluster breaks a rule; one sentence naming it and the field."""


@dataclass(frozen=True, slots=True)
class SiteHop:
    """A jump host of the BatchCluster; its login is the BatchJob's cluster Secret unless
    ``secret_name`` names another Secret of the BatchJob's namespace."""

    host: str
    port: int
    secret_name: str | None = None


@dataclass(frozen=True, slots=True)
class Site:
    name: str
    backend: str
    host: str
    port: int
    known_hosts: str = field(repr=False)
    jump: tuple[SiteHop, ...] = ()
    work_dir: str | None = None
    selector: Selector | None = None
    """Which namespaces may use it; None: none."""
    default_resources: Mapping[str, Any] = field(default_factory=dict)
    default_options: Mapping[str, Any] = field(default_factory=dict)
    """Defaults for ``spec.<backend>``, field by field."""
    limits: Limits = field(default_factory=Limits)
    endpoints: tuple[Endpoint, ...] = ()
    """``spec.storage.allowedEndpoints``: object stores the BatchJobs routed through it may
    name whatever their address (``hooks.core.spec.endpoints``)."""
    containers: SiteContainers | None = None
    """``spec.containers``: the runtimes offered and what a container may use; None: none."""


def parse_site(obj: Mapping[str, Any], rules: Rules) -> Site:
    """The BatchCluster ``obj`` as Metacontroller handed it over, checked, or ``SiteError``
    with one sentence naming the field."""
    metadata = obj.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    if not isinstance(name, str) or not DNS_SUBDOMAIN.fullmatch(name):
        raise SiteError(f"The BatchCluster's metadata.name {shown(name)} is not an object "
                        "name.")
    if obj.get("apiVersion") != API_VERSION or obj.get("kind") != KIND:
        raise SiteError(f"The object handed over as BatchCluster {name} is no {KIND} of "
                        f"{API_VERSION}.")
    try:
        return _site(name, mapping(obj.get("spec"), "spec"), rules)
    except SpecError as err:
        raise SiteError(f"BatchCluster {name} is invalid: {err}") from err


def _site(name: str, spec: Mapping[str, Any], rules: Rules) -> Site:
    backend = spec.get("backend")
    if not isinstance(backend, str) or backend not in rules:
        raise SpecError(f"spec.backend must be one of {', '.join(rules)}, not "
                        f"{shown(backend)}.")
    jump = spec.get("jump") or []
    if not isinstance(jump, list) or len(jump) > MAX_JUMPS:
        raise SpecError(f"spec.jump must be a list of at most {MAX_JUMPS} jump hosts.")
    selector = spec.get("namespaceSelector")
    resources, options = _defaults(spec.get("defaults"), backend, rules)
    limits = read_limits(spec.get("limits"), backend, rules[backend].queue_limit)
    checked = parse_resources(resources, "spec.defaults.resources")
    within(limits, checked, options)
    free = free_form_beyond(limits, rules[backend].free_form_settings(
        rules[backend].parse_options(options, checked), ""))
    if free:
        raise SpecError(f"spec.defaults: {free}.")
    return Site(
        name=name,
        backend=backend,
        host=host_name(spec.get("host"), "spec.host"),
        port=port_number(spec.get("port", 22), "spec.port"),
        known_hosts=_known_hosts(spec.get("knownHosts")),
        jump=tuple(_hop(item, f"spec.jump[{i}]") for i, item in enumerate(jump)),
        work_dir=None if spec.get("workDir") is None else work_dir(spec["workDir"],
                                                                   "spec.workDir"),
        selector=None if selector is None else parse_selector(selector,
                                                              "spec.namespaceSelector"),
        default_resources=resources,
        default_options=options,
        limits=limits,
        endpoints=_endpoints(spec.get("storage")),
        containers=parse_containers(spec.get("containers")),
    )


def _endpoints(raw: object) -> tuple[Endpoint, ...]:
    """``spec.storage.allowedEndpoints``: each an endpoint as a BatchJob would write it."""
    storage = mapping(raw or {}, "spec.storage")
    for key in storage:
        if key != "allowedEndpoints":
            raise SpecError(f"spec.storage has {shown(key)}; it may set allowedEndpoints.")
    listed = storage.get("allowedEndpoints") or []
    if not isinstance(listed, list) or len(listed) > MAX_ENDPOINTS:
        raise SpecError(f"spec.storage.allowedEndpoints must be a list of at most "
                        f"{MAX_ENDPOINTS} endpoints.")
    return parse_list(listed, "spec.storage.allowedEndpoints")


def _hop(raw: object, where: str) -> SiteHop:
    hop = mapping(raw, where)
    ref = hop.get("secretRef")
    secret_name = None
    if ref is not None:
        secret_name = mapping(ref, f"{where}.secretRef").get("name")
        if not isinstance(secret_name, str) or not DNS_SUBDOMAIN.fullmatch(secret_name):
            raise SpecError(f"{where}.secretRef.name must name a Secret.")
    return SiteHop(host_name(hop.get("host"), f"{where}.host"),
                   port_number(hop.get("port", 22), f"{where}.port"), secret_name)


def _known_hosts(value: object) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_KNOWN_HOSTS:
        raise SpecError("spec.knownHosts must list the host keys of the login node and of "
                        f"every jump host (ssh-keyscan -p PORT HOST), in at most "
                        f"{MAX_KNOWN_HOSTS} characters.")
    try:
        check_known_hosts(value, "spec.knownHosts")
    except SecretError as err:
        raise SpecError(str(err)) from err
    return value


def _defaults(raw: object, backend: str, rules: Rules) -> tuple[dict[str, Any], dict[str, Any]]:
    """``spec.defaults``: the resources and the backend's block, each checked as a BatchJob's
    are (a BatchJob may still override any field of them)."""
    defaults = mapping(raw or {}, "spec.defaults")
    for key in defaults:
        if key not in ("resources", backend):
            raise SpecError(f"spec.defaults has {shown(key)}; it may set resources and "
                            f"{backend} (the BatchCluster's backend).")
    resources = dict(mapping(defaults.get("resources") or {}, "spec.defaults.resources"))
    options = dict(mapping(defaults.get(backend) or {}, f"spec.defaults.{backend}"))
    checked = parse_resources(resources, "spec.defaults.resources")
    try:
        rules[backend].parse_options(options, checked)
    except SpecError as err:
        raise SpecError(f"spec.defaults.{backend}: {err}") from err
    return resources, options


