"""What an ended attempt used (``status.usage``): its tasks' accounting summed up, and the
stored form read back. Pure: no I/O.

Usage is read once, when the hooks see the attempt end, and then carried from the previous
status: it renders the same, byte for byte, from what it was read back from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hooks.core.values.fields import INT64
from hooks.core.values.phases import TaskUsage

MAX_NODES = 16
"""Nodes listed at most (sorted): an array's tasks may have run on hundreds."""
MAX_NODE_NAME = 253


@dataclass(frozen=True, slots=True)
class Usage:
    queue_seconds: int | None = None
    """Submit to start, the longest of the tasks."""
    elapsed_seconds: int | None = None
    """Start to end, the longest of the tasks."""
    cpu_seconds: float | None = None
    """User and system CPU time of all tasks."""
    max_rss_bytes: int | None = None
    """The largest resident set of the tasks; None when the scheduler recorded none."""
    nodes: tuple[str, ...] = ()
    cpu_efficiency: float | None = None
    """``cpu_seconds`` / (elapsed * allocated CPUs) over the tasks, 0..1."""
    memory_efficiency: float | None = None
    """``max_rss_bytes`` / the requested memory, 0..1, when both are known."""


def summed(tasks: Sequence[TaskUsage]) -> Usage | None:
    """The usage of an attempt whose tasks used ``tasks``; None when none was recorded.

    >>> summed([TaskUsage(2, 40, 38.5, 200 << 20, ("n1",), 1, 1 << 30),
    ...         TaskUsage(5, 10, 1.5, None, ("n2",), 1, 1 << 30)])
    ... # doctest: +NORMALIZE_WHITESPACE
    Usage(queue_seconds=5, elapsed_seconds=40, cpu_seconds=40.0, max_rss_bytes=209715200,
          nodes=('n1', 'n2'), cpu_efficiency=0.8, memory_efficiency=0.2)
    """
    if not tasks:
        return None
    rss = [t.max_rss_bytes for t in tasks if t.max_rss_bytes is not None]
    cpu = [t.cpu_seconds for t in tasks if t.cpu_seconds is not None]
    cpu_seconds = round(sum(cpu), 1) if cpu else None
    allocated = [t.elapsed_seconds * t.cpus for t in tasks
                 if t.elapsed_seconds is not None and t.cpus]
    requested = [t.memory_bytes for t in tasks if t.memory_bytes]
    return Usage(
        queue_seconds=max((t.queue_seconds for t in tasks if t.queue_seconds is not None),
                          default=None),
        elapsed_seconds=max((t.elapsed_seconds for t in tasks
                             if t.elapsed_seconds is not None), default=None),
        cpu_seconds=cpu_seconds,
        max_rss_bytes=max(rss) if rss else None,
        nodes=tuple(sorted({n for t in tasks for n in t.nodes}))[:MAX_NODES],
        cpu_efficiency=_ratio(cpu_seconds, sum(allocated)) if len(allocated) == len(tasks)
        else None,
        memory_efficiency=_ratio(max(rss), max(requested)) if rss and requested else None,
    )


def _ratio(used: float | None, available: float) -> float | None:
    if used is None or available <= 0:
        return None
    return round(min(max(used / available, 0.0), 1.0), 2)


def to_raw(usage: Usage | None) -> dict[str, Any] | None:
    """``status.usage``: the fields that are known."""
    if usage is None:
        return None
    fields: dict[str, Any] = {
        "queueSeconds": usage.queue_seconds,
        "elapsedSeconds": usage.elapsed_seconds,
        "cpuSeconds": _number_raw(usage.cpu_seconds),
        "maxRSSBytes": usage.max_rss_bytes,
        "nodes": list(usage.nodes) or None,
        "cpuEfficiency": _number_raw(usage.cpu_efficiency),
        "memoryEfficiency": _number_raw(usage.memory_efficiency),
    }
    return {key: value for key, value in fields.items() if value is not None}


def _number_raw(value: float | None) -> float | int | None:
    """A whole number as an integer: the API server reads ``40.0`` back as ``40``."""
    return int(value) if value is not None and value.is_integer() else value


def from_raw(raw: object) -> Usage | None:
    """The stored ``status.usage``; a field in any other form than the hooks write is left
    out (it is anyone's to edit)."""
    if not isinstance(raw, Mapping):
        return None
    nodes = raw.get("nodes")
    return Usage(
        queue_seconds=_seconds(raw.get("queueSeconds")),
        elapsed_seconds=_seconds(raw.get("elapsedSeconds")),
        cpu_seconds=_number(raw.get("cpuSeconds"), INT64),
        max_rss_bytes=_seconds(raw.get("maxRSSBytes")),
        nodes=tuple(n for n in nodes if isinstance(n, str) and 0 < len(n) <= MAX_NODE_NAME)
        [:MAX_NODES] if isinstance(nodes, list) else (),
        cpu_efficiency=_number(raw.get("cpuEfficiency"), 1),
        memory_efficiency=_number(raw.get("memoryEfficiency"), 1),
    )


def _seconds(value: object) -> int | None:
    """A stored count: a non-negative integer within int64."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= INT64:
        return value
    return None


def _number(value: object, top: float) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if 0 <= value <= top else None
