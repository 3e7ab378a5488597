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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from hooks.core.sites.secret import SecretError, check_known_hosts
from hooks.core.sites.selector import Selector, parse_selector
from hooks.core.spec.batchjob import parse_resources
from hooks.core.spec.endpoints import Endpoint, parse_list
from hooks.core.spec.layout import DNS_SUBDOMAIN, MAX_JUMPS, host_name, port_number, work_dir
from hooks.core.values import units
from hooks.core.values.fields import SpecError, line, mapping, whole_number
from hooks.core.values.job import Resources
from hooks.core.values.sdk import QueueLimit, Rules
from hooks.core.values.text import shown

API_VERSION = "hpcbridge.io/v1alpha1"
KIND = "BatchCluster"
MAX_KNOWN_HOSTS = 64 * 1024
"""Characters of ``spec.knownHosts``: every attempt keeps them in its status."""
MAX_QUEUES = 64
MAX_ENDPOINTS = 32
RESOURCE_LIMITS = {"timeLimit": "maxTimeLimit", "cpus": "maxCpus", "memory": "maxMemory",
                   "gpus": "maxGpus", "nodes": "maxNodes"}
"""The limit that covers each field of ``spec.resources`` in ``hooks.core.values.sdk.LIMITED``;
the queue's is the scheduler's (``SchedulerRules.queue_limit``)."""
UNBOUNDED = ("timeLimit", "memory")
"""Fields whose scheduler default no limit bounds: a BatchJob under such a limit sets them (or
its BatchCluster's defaults do)."""


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
class Limits:
    time_limit_seconds: int | None = None
    cpus: int | None = None
    memory_mib: int | None = None
    gpus: int | None = None
    nodes: int | None = None
    queues: tuple[str, ...] | None = None
    """The queues allowed (SLURM's partitions); None: any."""
    queue: QueueLimit | None = None
    """The scheduler's queue field and the limit that lists its queues."""
    queue_field: str = ""
    """The BatchJob's field that names a queue, ``spec.<backend>.<option>``."""
    written: Mapping[str, object] = field(default_factory=dict, compare=False)
    """The limits as the BatchCluster writes them, for messages."""


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
    limits = _limits(spec.get("limits"), backend, rules[backend].queue_limit)
    checked = parse_resources(resources, "spec.defaults.resources")
    _within(limits, checked, options)
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


def _limits(raw: object, backend: str, queue: QueueLimit | None) -> Limits:
    limits = mapping(raw or {}, "spec.limits")
    known = [*RESOURCE_LIMITS.values(), *([queue.limit] if queue else [])]
    unknown = sorted(set(limits) - set(known))
    if unknown:
        raise SpecError(f"spec.limits has {shown(unknown[0])}; the backend's limits are "
                        f"{', '.join(known)}.")
    return Limits(
        time_limit_seconds=_quantity(limits.get("maxTimeLimit"), "spec.limits.maxTimeLimit",
                                     units.parse_time_limit),
        cpus=_count(limits.get("maxCpus"), "spec.limits.maxCpus", 1),
        memory_mib=_quantity(limits.get("maxMemory"), "spec.limits.maxMemory",
                             units.parse_memory_mib),
        gpus=_count(limits.get("maxGpus"), "spec.limits.maxGpus", 0),
        nodes=_count(limits.get("maxNodes"), "spec.limits.maxNodes", 1),
        queues=None if queue is None else _queues(limits.get(queue.limit), queue),
        queue=queue,
        queue_field=f"spec.{backend}.{queue.option}" if queue else "",
        written=dict(limits),
    )


def _queues(value: object, queue: QueueLimit) -> tuple[str, ...] | None:
    where = f"spec.limits.{queue.limit}"
    if value is None:
        return None
    if not isinstance(value, list) or not value or len(value) > MAX_QUEUES:
        raise SpecError(f"{where} must be a non-empty list of at most {MAX_QUEUES} "
                        f"{queue.option} names.")
    return tuple(line(item, f"{where}[{i}]") or "" for i, item in enumerate(value))


def _quantity(value: object, where: str, read: Any) -> int | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > 32:
        raise SpecError(f"{where} must be written as text, like 48h or 1Ti, not "
                        f"{shown(value)}.")
    try:
        result: int = read(value)
    except ValueError as err:
        raise SpecError(f"{where}: {err}.") from err
    return result


def _count(value: object, where: str, minimum: int) -> int | None:
    return None if value is None else whole_number(value, where, minimum=minimum)


def beyond(limits: Limits, resources: Resources, options: Mapping[str, Any], *,
           complete: bool = True) -> str | None:
    """The first limit ``resources`` (and the queue ``options`` name) exceed, as ``field value is
    beyond the limit``; None when all are within. With ``complete``, a time limit or memory
    left out under a limit of it is beyond it too: the scheduler's default (a partition's
    DefaultTime, a node's whole memory, no time limit at all) is not bounded by it."""
    checks = (("timeLimit", resources.time_limit_seconds, limits.time_limit_seconds,
               "maxTimeLimit"),
              ("cpus", resources.cpus, limits.cpus, "maxCpus"),
              ("memory", resources.memory_mib, limits.memory_mib, "maxMemory"),
              ("gpus", resources.gpus, limits.gpus, "maxGpus"),
              ("nodes", resources.nodes, limits.nodes, "maxNodes"))
    for name, value, limit, key in checks:
        if complete and value is None and limit is not None and name in UNBOUNDED:
            return (f"spec.resources.{name} is left out, so the scheduler's default applies, "
                    f"which the BatchCluster's limits.{key} ({shown(limits.written.get(key))}) "
                    "does not bound; set one")
        if value is not None and limit is not None and value > limit:
            return (f"spec.resources.{name} is beyond the BatchCluster's limits.{key} "
                    f"({shown(limits.written.get(key))})")
    queue = limits.queue
    if queue is None or limits.queues is None:
        return None
    named = options.get(queue.option)
    if named in limits.queues:
        return None
    which = (f"no {queue.option} is named ({limits.queue_field})" if named is None
             else f"{limits.queue_field} {shown(named)} is not allowed")
    return f"{which}, and the BatchCluster's limits.{queue.limit} are {', '.join(limits.queues)}"


def free_form_beyond(limits: Limits, settings: Iterable[tuple[str, str]]) -> str | None:
    """The first of a scheduler's free-form ``settings`` ((where, quantity), as
    ``SchedulerRules.free_form_settings`` gives them) that sets a quantity ``limits`` cover,
    as a sentence's start naming both; None when none does. Whatever its value: the limits are
    checked on the fields that set a quantity alone."""
    for where, quantity in settings:
        if quantity == "queue":
            if limits.queue is None:
                continue
            key, field_name = limits.queue.limit, limits.queue_field
        else:
            key, field_name = RESOURCE_LIMITS[quantity], f"spec.resources.{quantity}"
        if limits.written.get(key) is not None:
            what = limits.queue.option if quantity == "queue" and limits.queue else quantity
            return (f"{where} sets the {what}, which the BatchCluster's limits.{key} "
                    f"({shown(limits.written[key])}) covers: set it in {field_name}, where "
                    "the limit is checked")
    return None


def _within(limits: Limits, resources: Resources, options: Mapping[str, Any]) -> None:
    """Refuse defaults beyond the limits (without a default queue a BatchJob may still name
    one)."""
    named = limits.queue is not None and limits.queue.option in options
    checked = limits if named else replace(limits, queues=None)
    found = beyond(checked, resources, options, complete=False)
    if found:
        raise SpecError(f"spec.defaults: {found.replace('spec.', 'the default ', 1)}.")
