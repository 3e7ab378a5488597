"""What the system benchmark's watches saw, per BatchJob, and the pure rules that name each
write: the BatchJob's status writes, its metadata writes (finalizers, labels, annotations, the
deletion), its Pods' creates, updates and deletes, and the Events about it.

The API server stores no update that changes nothing, and such an update reaches no watch: the
writes counted here are the ones that changed an object. The final DELETED of a BatchJob that
had finalizers is the write that removed the last one, and counts as a metadata write."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

METADATA = ("finalizers", "labels", "annotations", "deletionTimestamp", "ownerReferences")
COLUMNS = ("status", "metadata", "other", "pod create", "pod update", "pod delete", "events")
"""The kinds of write reported per BatchJob, in the report's order."""


@dataclass(frozen=True)
class Write:
    t: float
    """Monotonic time the watch delivered it."""
    kind: str
    """BatchJob, Pod or Event."""
    what: str
    """create, status, metadata, other (BatchJob); create, update, delete (Pod, Event)."""
    name: str
    changes: tuple[str, ...] = ()

    @property
    def column(self) -> str:
        """The report column this write counts in ("" for the user's own create)."""
        if self.kind == "Pod":
            return f"pod {self.what}"
        if self.kind == "Event":
            return "events"
        return "" if self.what in ("create", "delete") else self.what


def short(value: Any) -> str:
    text = "-" if value is None else str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def classify(prev: dict[str, Any], new: dict[str, Any]) -> str:
    """Pure: the kind of write that turned BatchJob ``prev`` into ``new``."""
    if prev.get("status") != new.get("status"):
        return "status"
    old, now = prev["metadata"], new["metadata"]
    return "metadata" if any(old.get(k) != now.get(k) for k in METADATA) else "other"


def changed(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    """Pure: each key whose value differs, as ``key: old → new``; a status's conditions are
    compared condition by condition (by type)."""
    lines: list[str] = []
    for key in sorted(set(old) | set(new)):
        before, after = old.get(key), new.get(key)
        if before == after:
            continue
        if key == "conditions" and not prefix:
            lines += changed({c.get("type"): c for c in before or []},
                             {c.get("type"): c for c in after or []}, "conditions.")
        elif prefix and isinstance(before, dict) and isinstance(after, dict):
            lines += changed(before, after, f"{prefix}{key}.")
        else:
            lines.append(f"{prefix}{key}: {short(before)} → {short(after)}")
    return lines


def metadata_of(obj: dict[str, Any] | None) -> dict[str, Any]:
    meta = (obj or {}).get("metadata", {})
    return {k: meta[k] for k in METADATA if k in meta}


def tally(writes: Iterable[Write], since: float, until: float) -> Counter[str]:
    """Pure: writes between ``since`` and ``until``, by report column."""
    return Counter(w.column for w in writes if since <= w.t <= until and w.column)


def spread(per: dict[str, Counter[str]]) -> dict[str, dict[str, float]]:
    """Pure: each column's mean and max over the BatchJobs, and of their sum ("total")."""
    if not per:
        return {}
    rows = {column: [c[column] for c in per.values()] for column in COLUMNS}
    rows["total"] = [sum(c.values()) for c in per.values()]
    return {column: {"mean": sum(v) / len(v), "max": max(v)} for column, v in rows.items()}


class Recorder:
    """Every watch event of the bench namespace, kept per BatchJob, thread-safe."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.writes: dict[str, list[Write]] = {}
        """By BatchJob name; "" holds what belongs to none."""
        self.objects: dict[str, dict[str, Any]] = {}
        """Each BatchJob as last seen (kept after it is gone)."""
        self.added: dict[str, float] = {}
        self.gone: set[str] = set()
        self.owners: dict[str, str] = {}
        """Pod name → its BatchJob."""
        self.reached: dict[str, dict[str, float]] = {}
        """Per BatchJob, when it first had job ids ("ids") and first had each phase."""
        self.ids: dict[str, set[str]] = {}
        """Each BatchJob's job ids over every status it had."""
        self.gaps: list[str] = []

    def _add(self, owner: str, write: Write) -> None:
        self.writes.setdefault(owner, []).append(write)

    def lost(self, watch: str, obj: dict[str, Any]) -> bool:
        """Note a watch that lost events (an ERROR event); True if ``obj`` is one."""
        if obj.get("kind") != "Status":
            return False
        with self.lock:
            self.gaps.append(f"{watch}: {short(obj.get('message'))}")
        return True

    def batchjob(self, kind: str, obj: dict[str, Any], t: float) -> None:
        if self.lost("batchjobs", obj):
            return
        name = obj["metadata"]["name"]
        with self.lock:
            prev = self.objects.get(name)
            if kind == "ADDED" or prev is None:
                what, changes = "create", []
                self.added.setdefault(name, t)
            elif kind == "DELETED":
                what = "metadata" if prev["metadata"].get("finalizers") else "delete"
                changes = ["gone: the last finalizer removed"] if what == "metadata" else []
                self.gone.add(name)
            else:
                what = classify(prev, obj)
                changes = (changed(prev.get("status", {}), obj.get("status", {}))
                           if what == "status" else
                           changed(metadata_of(prev), metadata_of(obj)))
            self.objects[name] = obj
            status = obj.get("status") or {}
            self.ids.setdefault(name, set()).update(status.get("jobIDs") or [])
            marks = self.reached.setdefault(name, {})
            if status.get("jobIDs"):
                marks.setdefault("ids", t)
            if status.get("phase"):
                marks.setdefault(status["phase"], t)
            self._add(name, Write(t, "BatchJob", what, name, tuple(changes)))

    def pod(self, kind: str, obj: dict[str, Any], t: float) -> None:
        if self.lost("pods", obj):
            return
        meta = obj["metadata"]
        owner = next((ref["name"] for ref in meta.get("ownerReferences", [])
                      if ref.get("kind") == "BatchJob"), "")
        what = {"ADDED": "create", "MODIFIED": "update"}.get(kind, "delete")
        with self.lock:
            self.owners[meta["name"]] = owner
            self._add(owner, Write(t, "Pod", what, meta["name"]))

    def event(self, kind: str, obj: dict[str, Any], t: float) -> None:
        if self.lost("events", obj) or kind == "DELETED":
            return  # an Event's expiry is no one's write
        involved = obj.get("involvedObject", {})
        with self.lock:
            owner = (involved.get("name", "") if involved.get("kind") == "BatchJob" else
                     self.owners.get(involved.get("name", ""), ""))
            note = f"{obj.get('reason', '')}: {short(obj.get('message'))}"
            self._add(owner, Write(t, "Event", "create" if kind == "ADDED" else "update",
                                   obj["metadata"]["name"], (note,)))

    def counts(self) -> Counter[str]:
        """How many BatchJobs exist, have job ids, are Running, active, Succeeded, ended."""
        with self.lock:
            statuses = [o.get("status") or {} for n, o in self.objects.items()
                        if n not in self.gone]
        counts: Counter[str] = Counter(created=len(statuses))
        for status in statuses:
            phase, ids = status.get("phase"), bool(status.get("jobIDs"))
            counts["ids"] += ids
            counts["running"] += phase == "Running"
            counts["active"] += ids and phase in ("Pending", "Running")
            counts["succeeded"] += phase == "Succeeded"
            counts["ended"] += phase in ("Succeeded", "Failed", "Cancelled")
        return counts

    def last_reached(self, mark: str) -> float | None:
        """When the last BatchJob reached ``mark`` (None while one has not)."""
        with self.lock:
            times = [self.reached.get(name, {}).get(mark) for name in self.objects]
        return max(t for t in times if t) if times and all(times) else None

    def batchjob_writes(self) -> int:
        """All writes the BatchJobs' watch delivered so far, creates included."""
        with self.lock:
            return sum(1 for ws in self.writes.values() for w in ws if w.kind == "BatchJob")

    def per_batchjob(self, names: Iterable[str], since: float,
                     until: float) -> dict[str, Counter[str]]:
        with self.lock:
            return {n: tally(self.writes.get(n, []), since, until) for n in names}

    def uids(self) -> dict[str, str]:
        """Each BatchJob's uid → its name."""
        with self.lock:
            return {o["metadata"]["uid"]: name for name, o in self.objects.items()}

    def job_ids(self) -> dict[str, list[str]]:
        """Each BatchJob's distinct job ids over every status it had."""
        with self.lock:
            return {name: sorted(ids) for name, ids in self.ids.items()}
