"""A BatchCluster's limits (``spec.limits``): what they bound, read and checked, and the first
limit a BatchJob's resources, queue or the scheduler's free-form options exceed. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from hooks.core.values import units
from hooks.core.values.fields import SpecError, line, mapping, whole_number
from hooks.core.values.job import Resources
from hooks.core.values.sdk import QueueLimit
from hooks.core.values.text import shown

MAX_QUEUES = 64
RESOURCE_LIMITS = {"timeLimit": "maxTimeLimit", "cpus": "maxCpus", "memory": "maxMemory",
                   "gpus": "maxGpus", "nodes": "maxNodes"}
"""The limit that covers each field of ``spec.resources`` in ``hooks.core.values.sdk.LIMITED``;
the queue's is the scheduler's (``SchedulerRules.queue_limit``)."""
UNBOUNDED = ("timeLimit", "memory")
"""Fields whose scheduler default no limit bounds: a BatchJob under such a limit sets them (or
its BatchCluster's defaults do)."""


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


def read_limits(raw: object, backend: str, queue: QueueLimit | None) -> Limits:
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


def within(limits: Limits, resources: Resources, options: Mapping[str, Any]) -> None:
    """Refuse defaults beyond the limits (without a default queue a BatchJob may still name
    one)."""
    named = limits.queue is not None and limits.queue.option in options
    checked = limits if named else replace(limits, queues=None)
    found = beyond(checked, resources, options, complete=False)
    if found:
        raise SpecError(f"spec.defaults: {found.replace('spec.', 'the default ', 1)}.")
