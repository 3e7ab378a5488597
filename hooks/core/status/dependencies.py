"""``spec.dependsOn``: whether the BatchJobs an attempt waits for have reached their conditions,
and ``status.dependencies``, what was seen of them. Pure: no I/O.

Metacontroller hands over the BatchJobs named (related objects of the BatchJob's namespace) and
syncs the dependent again whenever one of them changes, so the gate reads their stored status
as it is now: a phase, an attempt, a uid. Everything in them is anyone's to edit, and is read
like a request. A dependency whose new spec its own sync has not seen yet
(``observedGeneration`` behind ``generation``) is not settled: its phase may be an earlier
spec's.

A dependency can no longer be met when it ended the other way (``Succeeded`` asked and it
ended ``Failed`` or ``Cancelled``, or ``Failed`` asked and it succeeded), when it is deleted,
or when it does not exist once ``dependencyGracePeriodSeconds`` have passed since the
dependent was created. A cycle — a BatchJob that depends on itself, or on one that waits,
directly or through others, for it — is found as far as the related objects show: each
waiting BatchJob's ``status.dependencies`` lists, as ``upstream``, what its dependencies still
wait for.
"""

from __future__ import annotations

import datetime
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hooks.core.status import stored
from hooks.core.values.job import Condition, Dependency
from hooks.core.values.phases import Phase

MAX_UPSTREAM = 64
"""Names kept in one entry's ``upstream``: enough to close a cycle of any pipeline's length."""
MET_BY = {
    Condition.SUCCEEDED: frozenset({Phase.SUCCEEDED}),
    Condition.FAILED: frozenset({Phase.FAILED, Phase.CANCELLED}),
    Condition.FINISHED: frozenset({Phase.SUCCEEDED, Phase.FAILED, Phase.CANCELLED}),
}
"""The phases in which a dependency meets each condition."""
NEVER_BY = {
    Condition.SUCCEEDED: frozenset({Phase.FAILED, Phase.CANCELLED}),
    Condition.FAILED: frozenset({Phase.SUCCEEDED}),
    Condition.FINISHED: frozenset[Phase](),
}
"""The phases in which a dependency has ended the other way."""


class Verdict(enum.Enum):
    MET = "met"
    WAIT = "wait"
    FAILED = "failed"
    CYCLE = "cycle"


@dataclass(frozen=True, slots=True)
class Seen:
    """One dependency as the dependent saw it: its uid, phase and attempt (empty and 0 while
    it does not exist), whether its condition was met, and what it still waits for."""

    name: str
    condition: Condition = Condition.SUCCEEDED
    uid: str = ""
    phase: str = ""
    attempt: int = 0
    met: bool = False
    upstream: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Gate:
    """What the dependencies say: met (submit), wait, failed or a cycle, and why."""

    verdict: Verdict
    seen: tuple[Seen, ...]
    message: str = ""


@dataclass(frozen=True, slots=True)
class Waiting:
    """Who waits: the dependent's name, when it was created, the time of the call and how long
    a dependency may be missing."""

    name: str
    created: datetime.datetime | None
    now: datetime.datetime
    grace_seconds: int


def gate(dependencies: Sequence[Dependency], who: Waiting,
         related: Mapping[str, Mapping[str, Any]], previous: Sequence[Seen]) -> Gate:
    """Evaluate every dependency, in order; the first that fails or closes a cycle decides,
    else the first still unmet is the one the message names."""
    before = {item.name: item for item in previous}
    judged = [_judge(dep, who, related.get(dep.name), before.get(dep.name))
              for dep in dependencies]
    seen = tuple(item for item, _, _ in judged)
    for verdict in (Verdict.CYCLE, Verdict.FAILED, Verdict.WAIT):
        for _, found, message in judged:
            if found is verdict:
                return Gate(verdict, seen, message)
    names = ", ".join(item.name for item in seen)
    return Gate(Verdict.MET, seen, f"Its dependencies {names} reached their conditions.")


def _judge(dep: Dependency, who: Waiting, raw: Mapping[str, Any] | None,
           before: Seen | None) -> tuple[Seen, Verdict, str]:
    name = dep.name
    if dep.name == who.name:
        return Seen(dep.name, dep.condition), Verdict.CYCLE, (
            f"spec.dependsOn names the BatchJob itself ({name}): a cycle.")
    found = _found(dep.name, raw)
    if found is None:
        return _missing(dep, who, before)
    if before is not None and before.uid and found.uid != before.uid:
        return Seen(dep.name, dep.condition), Verdict.FAILED, (
            f"Dependency {name} was deleted (a new BatchJob of that name is another one).")
    if found.deleting:
        return Seen(dep.name, dep.condition, found.uid), Verdict.FAILED, (
            f"Dependency {name} is being deleted.")
    return _by_phase(dep, who, found)


def _missing(dep: Dependency, who: Waiting, before: Seen | None) -> tuple[Seen, Verdict, str]:
    name = dep.name
    if before is not None and before.uid:
        return Seen(dep.name, dep.condition), Verdict.FAILED, (
            f"Dependency {name} was deleted.")
    waited = (who.now - who.created).total_seconds() if who.created else 0.0
    if waited >= who.grace_seconds:
        return Seen(dep.name, dep.condition), Verdict.FAILED, (
            f"Dependency {name} does not exist ({who.grace_seconds} s after this BatchJob was "
            "created; spec.dependencyGracePeriodSeconds).")
    return Seen(dep.name, dep.condition), Verdict.WAIT, (
        f"Waiting for dependency {name}, which does not exist yet (for up to "
        f"{who.grace_seconds} s after this BatchJob was created).")


def _by_phase(dep: Dependency, who: Waiting, found: Found) -> tuple[Seen, Verdict, str]:
    name = dep.name
    upstream = found.upstream
    if who.name in upstream or who.name in found.depends_on:
        return (Seen(dep.name, dep.condition, found.uid, upstream=upstream), Verdict.CYCLE,
                f"spec.dependsOn makes a cycle: {who.name} depends on {dep.name}, which waits "
                f"(directly or through others) for {who.name}.")
    seen = Seen(dep.name, dep.condition, found.uid, found.phase or "", found.attempt,
                upstream=upstream)
    if not found.settled or found.phase is None:
        return seen, Verdict.WAIT, (
            f"Waiting for dependency {name}: its current spec has not been synced yet.")
    if found.phase in MET_BY[dep.condition]:
        return Seen(dep.name, dep.condition, found.uid, found.phase, found.attempt,
                    met=True), Verdict.MET, ""
    if found.phase in NEVER_BY[dep.condition]:
        return seen, Verdict.FAILED, (
            f"Dependency {name} ended {found.phase} (attempt {found.attempt}), so its "
            f"condition {dep.condition} can no longer be met.")
    return seen, Verdict.WAIT, (
        f"Waiting for dependency {name} to reach {dep.condition} (it is {found.phase}).")


@dataclass(frozen=True, slots=True)
class Found:
    """A related BatchJob, read defensively."""

    uid: str
    deleting: bool
    settled: bool
    phase: Phase | None
    attempt: int
    depends_on: frozenset[str]
    upstream: tuple[str, ...]


def _found(name: str, raw: Mapping[str, Any] | None) -> Found | None:
    """The BatchJob ``name`` as handed over, or None when it is not there (or is no BatchJob
    of that name)."""
    metadata = raw.get("metadata") if isinstance(raw, dict) else None
    if not isinstance(metadata, dict) or metadata.get("name") != name or not isinstance(
            raw, dict) or raw.get("kind") != "BatchJob":
        return None
    status = raw.get("status") if isinstance(raw.get("status"), dict) else {}
    spec = raw.get("spec") if isinstance(raw.get("spec"), dict) else {}
    assert isinstance(status, dict) and isinstance(spec, dict)
    generation = stored.count(metadata.get("generation"))
    observed = stored.count(status.get("observedGeneration"))
    return Found(
        uid=stored.text(metadata.get("uid"))[:64],
        deleting=metadata.get("deletionTimestamp") is not None,
        settled=observed == 0 or observed >= generation,
        phase=stored.enum(Phase, status.get("phase"), None),
        attempt=stored.count(status.get("attempt")),
        depends_on=frozenset(filter(None, (stored.name(item.get("name")) for item in
                                           stored.as_list(spec.get("dependsOn"))
                                           if isinstance(item, dict)))),
        upstream=_upstream(status.get("dependencies")),
    )


def _upstream(raw: object) -> tuple[str, ...]:
    """What a dependency still waits for: each dependency its status lists as not met, and
    what those wait for in turn."""
    names: set[str] = set()
    for item in stored.as_list(raw):
        if not isinstance(item, dict) or item.get("met") is True:
            continue
        for name in [item.get("name"), *stored.as_list(item.get("upstream"))]:
            if stored.name(name) is not None:
                names.add(name)
    return tuple(sorted(names)[:MAX_UPSTREAM])


def from_raw(raw: object) -> tuple[Seen, ...]:
    """``status.dependencies`` as stored, read back; anything else is nothing seen."""
    seen = []
    for item in stored.as_list(raw):
        name = stored.name(item.get("name")) if isinstance(item, dict) else None
        if name is None or not isinstance(item, dict):
            continue
        seen.append(Seen(
            name=name,
            condition=stored.enum(Condition, item.get("condition"), Condition.SUCCEEDED),
            uid=stored.text(item.get("uid"))[:64],
            phase=stored.enum(Phase, item.get("phase"), ""),
            attempt=stored.count(item.get("attempt")),
            met=item.get("met") is True,
            upstream=tuple(sorted({n for n in stored.as_list(item.get("upstream"))
                                   if stored.name(n) is not None})[:MAX_UPSTREAM]),
        ))
    return tuple(seen)


def to_raw(seen: Sequence[Seen]) -> list[dict[str, Any]]:
    """``status.dependencies``: each dependency in ``spec.dependsOn``'s order."""
    out = []
    for item in seen:
        entry: dict[str, Any] = {"name": item.name, "condition": str(item.condition),
                                 "met": item.met}
        if item.uid:
            entry["uid"] = item.uid
        if item.phase:
            entry.update(phase=str(item.phase), attempt=item.attempt)
        if item.upstream:
            entry["upstream"] = list(item.upstream)
        out.append(entry)
    return out
