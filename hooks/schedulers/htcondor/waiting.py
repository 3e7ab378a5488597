"""Why an idle HTCondor job waits, and what an ended one used. Pure: no I/O.

An idle job that the negotiator passed over (``LastRejMatchReason``) and never matched
(``NumJobMatches`` 0) is ``Unschedulable`` when no slot of the pool could ever run it: its
requests (CPUs, memory, GPUs) are judged against what each slot has in total (a partitionable
slot's whole CPUs, memory and GPUs), not what is free now, so a job idle behind others is
ordinary queueing. A rejection that names a concurrency or submitter limit is
``LimitReached``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hooks.core.values.phases import TaskUsage
from hooks.core.values.reasons import Reason


@dataclass(frozen=True, slots=True)
class Slot:
    """What one slot of the pool has in total: CPUs, memory (MiB) and GPUs."""

    cpus: int
    memory_mib: int
    gpus: int


@dataclass(frozen=True, slots=True)
class Requests:
    cpus: int | None = None
    memory_mib: int | None = None
    gpus: int | None = None


LIMITS = ("concurrency limit", "submitter limit", "MaxJobsRunning", "user limit")
"""Words of a negotiator's rejection that name a limit which lifts when other jobs end."""


def slot(ad: Mapping[str, Any]) -> Slot | None:
    """A slot from its machine ad (``condor_status -json``); dynamic slots are part of their
    partitionable slot's totals, and skipped."""
    if ad.get("SlotType") == "Dynamic":
        return None
    total = {name: ad.get(f"TotalSlot{name}", ad.get(name)) for name in ("Cpus", "Memory", "GPUs")}
    cpus, memory, gpus = (_count(total[name]) for name in ("Cpus", "Memory", "GPUs"))
    if cpus is None or memory is None:
        return None
    return Slot(cpus, memory, gpus or 0)


def fits(requests: Requests, slots: Sequence[Slot]) -> bool:
    """Whether some slot has, in total, all the job asks for."""
    return any(
        (requests.cpus or 0) <= s.cpus and (requests.memory_mib or 0) <= s.memory_mib
        and (requests.gpus or 0) <= s.gpus
        for s in slots
    )


def describe(rejected: str, fits_pool: bool | None, requests: Requests) -> tuple[Reason, str]:
    """The typed reason and message of an idle job the negotiator last rejected for
    ``rejected`` (empty: never considered yet)."""
    if fits_pool is False:
        asked = ", ".join(f"{value} {unit}" for value, unit in (
            (requests.cpus, "CPUs"), (requests.memory_mib, "MiB of memory"),
            (requests.gpus, "GPUs")) if value)
        return Reason.UNSCHEDULABLE, (
            f"HTCondor will not start it as submitted: no machine of the pool has {asked} "
            f"in total; ask for less (spec.resources) ({rejected or 'no match found'})")
    if rejected and any(word.lower() in rejected.lower() for word in LIMITS):
        return Reason.LIMIT_REACHED, (
            "HTCondor holds it back until other jobs end: a limit on running jobs is reached "
            f"({rejected})")
    if rejected:
        return Reason.NONE, f"HTCondor queues it until a machine that matches is free ({rejected})"
    return Reason.NONE, "The job is idle in the queue"


def usage(ad: Mapping[str, Any], requests: Requests) -> TaskUsage:
    """What an ended proc used: ``RemoteWallClockTime``, ``RemoteUserCpu`` + ``RemoteSysCpu``,
    ``ResidentSetSize`` (KiB), ``LastRemoteHost`` (``slot1_1@node``)."""
    submitted, started = _count(ad.get("QDate")), _count(ad.get("JobCurrentStartDate"))
    user, system = _number(ad.get("RemoteUserCpu")), _number(ad.get("RemoteSysCpu"))
    wall = _number(ad.get("RemoteWallClockTime"))
    rss = _count(ad.get("ResidentSetSize"))
    host = ad.get("LastRemoteHost") or ad.get("RemoteHost")
    node = host.rpartition("@")[2] if isinstance(host, str) else ""
    return TaskUsage(
        queue_seconds=max(started - submitted, 0) if submitted and started else None,
        elapsed_seconds=int(wall) if wall is not None else None,
        cpu_seconds=round(user + system, 1) if user is not None and system is not None
        else None,
        max_rss_bytes=rss * 1024 if rss else None,
        nodes=(node,) if node and len(node) <= 253 else (),
        cpus=_count(ad.get("CpusProvisioned")) or requests.cpus,
        memory_bytes=requests.memory_mib << 20 if requests.memory_mib else None,
    )


def requests(ad: Mapping[str, Any]) -> Requests:
    """The job's requests, where they are numbers (an expression is left unknown)."""
    return Requests(_count(ad.get("RequestCpus")), _count(ad.get("RequestMemory")),
                    _count(ad.get("RequestGPUs")))


def _count(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        return None
    return float(value)
