"""Why an idle HTCondor job waits, and what an ended one used. Pure: no I/O.

An idle job that the negotiator passed over (``LastRejMatchReason``) and never matched
(``NumJobMatches`` 0) is ``Unschedulable`` when no machine of the pool could ever run it:
HTCondor's own matchmaking analysis (``condor_q -better-analyze``) judges the job's whole
``Requirements`` against every machine with all of its resources free (a partitionable slot's
whole CPUs, memory, disk and GPUs, not what its dynamic slots leave now), so a job idle behind
others is ordinary queueing; the message names the clauses no machine meets. A rejection that
names a concurrency or submitter limit is ``LimitReached``.

The analysis is read from its text, as HTCondor 23 and later print it::

    The Requirements expression for job 68.000 is
    ...
    Job 68.000 defines the following attributes:

        RequestCpus = 64
    ...
    The Requirements expression for job 68.000 reduces to these conditions:
    ...
    [0]           0  Memory > 100000000
    [9]           1  TARGET.FileSystemDomain == MY.FileSystemDomain
    ...
    068.000:  Run analysis summary ignoring user priority.  Of 1 machines,
          1 are rejected by your job's requirements

(HTCondor 24 and later: ``Of 1 slots on 1 machines,`` and ``1 slots are rejected``). A job
whose summary is missing or unclear is not judged.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hooks.core.values.phases import TaskUsage
from hooks.core.values.reasons import Reason


@dataclass(frozen=True, slots=True)
class Requests:
    cpus: int | None = None
    memory_mib: int | None = None


@dataclass(frozen=True, slots=True)
class Unmet:
    """Requirements of a job that no machine of the pool meets, even with all of its resources
    free."""

    clauses: tuple[str, ...] = ()
    """The clauses no machine meets; none when each is met by some machine, but never all of
    them by one."""
    values: tuple[str, ...] = ()
    """The job's own attributes those clauses refer to, as ``RequestCpus = 64``."""


LIMITS = ("concurrency limit", "submitter limit", "MaxJobsRunning", "user limit")
"""Words of a negotiator's rejection that name a limit which lifts when other jobs end."""
CLAUSE_LIMIT = 200
"""The longest clause or value a message quotes, in characters."""
_JOB = re.compile(r"^The Requirements expression for job (\d+)\.(\d+) is$", re.M)
_DEFINES = re.compile(r"^Job \d+\.\d+ defines the following attributes:\n\n((?:[ \t]+\S.*\n)*)",
                      re.M)
_ATTRIBUTE = re.compile(r"^\s+(\w+) = (.*?)\s*$")
_CONDITION = re.compile(r"^\[\d+\]\s+(\d+)\s+(\S.*?)\s*$", re.M)
_SUMMARY = re.compile(r"\bOf (\d+) (?:slots on \d+ )?machines,\s+(\d+) (?:slots )?are rejected "
                      r"by your job's requirements")


def analysis(text: str) -> dict[str, Unmet]:
    """The jobs of ``condor_q -better-analyze`` output (by ``<cluster>.<proc>``) whose
    Requirements no machine of the analysed ones meets; a job some machine meets, or whose
    analysis is unclear, is left out."""
    found: dict[str, Unmet] = {}
    parts = _JOB.split(text)
    for cluster, proc, block in zip(parts[1::3], parts[2::3], parts[3::3], strict=True):
        summary = _SUMMARY.search(block)
        if summary is None or not 0 < int(summary.group(1)) == int(summary.group(2)):
            continue
        clauses = tuple(_clip(clause) for matched, clause in _CONDITION.findall(block)
                        if int(matched) == 0)
        found[f"{int(cluster)}.{int(proc)}"] = Unmet(clauses, _values(block, clauses))
    return found


def _values(block: str, clauses: tuple[str, ...]) -> tuple[str, ...]:
    """The job's attributes (``Job N defines the following attributes``) named in ``clauses``,
    the machine's (``TARGET.Name``) aside."""
    defines = _DEFINES.search(block)
    if defines is None:
        return ()
    values = []
    for line in defines.group(1).splitlines():
        attribute = _ATTRIBUTE.match(line)
        if attribute is None:
            continue
        name, value = attribute.groups()
        named = re.compile(rf"(?<![\w.])(?:MY\.)?{re.escape(name)}\b", re.I)
        if any(named.search(clause) for clause in clauses):
            values.append(_clip(f"{name} = {value}"))
    return tuple(values)


def _clip(text: str) -> str:
    return text if len(text) <= CLAUSE_LIMIT else text[:CLAUSE_LIMIT - 3] + "..."


def describe(rejected: str, unmet: Unmet | None) -> tuple[Reason, str]:
    """The typed reason and message of an idle job the negotiator last rejected for
    ``rejected`` (empty: never considered yet), with the requirements no machine meets.

    >>> import textwrap
    >>> reason, message = describe("no match found", Unmet(("TARGET.Cpus >= RequestCpus",),
    ...                                                     ("RequestCpus = 64",)))
    >>> print(reason, textwrap.fill(message, 90), sep="\\n")
    Unschedulable
    HTCondor will not start it as submitted: no machine of the pool meets its requirement
    TARGET.Cpus >= RequestCpus (RequestCpus = 64), even with all of its resources free; change
    what it asks for (spec.resources, spec.htcondor.submitOptions) (no match found)
    """
    if unmet is not None:
        if unmet.clauses:
            which = "requirement" if len(unmet.clauses) == 1 else "requirements"
            what = f"its {which} {' and '.join(unmet.clauses)}"
        else:
            what = "all of its requirements together"
        if unmet.values:
            what += f" ({', '.join(unmet.values)})"
        return Reason.UNSCHEDULABLE, (
            f"HTCondor will not start it as submitted: no machine of the pool meets {what}, "
            "even with all of its resources free; change what it asks for "
            f"(spec.resources, spec.htcondor.submitOptions) ({rejected or 'no match found'})")
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
    return Requests(_count(ad.get("RequestCpus")), _count(ad.get("RequestMemory")))


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
