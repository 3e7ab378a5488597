"""Job ads from ``condor_q``/``condor_history -json``, filed by attempt. Pure: no I/O.

Output is parsed from ``-json`` (reasons contain spaces, so ``-af`` columns are ambiguous);
``condor_q -json`` prints nothing at all when nothing matches, ``condor_history -json``
prints ``[ ]``. A proc in neither the queue nor the history while its siblings are visible is
still settling (the schedd writes the history as the proc leaves the queue) and is reported
pending, not lost.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from hooks.core.values.image import PoolContainers
from hooks.core.values.job import JobRef
from hooks.core.values.phases import Outcome, TaskState
from hooks.core.values.sdk import SchedulerError
from hooks.schedulers.htcondor import states, waiting
from hooks.schedulers.htcondor.description import KEY_ATTRIBUTE
from hooks.schedulers.htcondor.states import CondorRecord

ATTRIBUTES = (
    "ClusterId", "ProcId", "JobStatus", "ExitCode", "ExitBySignal", "ExitSignal", "HoldReason",
    "RemoveReason", "QDate", "JobCurrentStartDate", "CompletionDate", "EnteredCurrentStatus",
    "NumJobMatches", "LastRejMatchReason", "AutoClusterId", "RequestCpus", "RequestMemory",
    "RemoteWallClockTime", "RemoteUserCpu", "RemoteSysCpu", "ResidentSetSize",
    "LastRemoteHost", "CpusProvisioned", KEY_ATTRIBUTE,
)
ANALYSIS = "hpcbridge: analysis"
"""The line between condor_q's job ads and HTCondor's analysis of the jobs passed over
(``commands.QUEUE_PROGRAM``)."""
HISTORY_LIMIT_UNKNOWN = 10000
"""History ads to look for when an attempt's proc count is unknown (``queue`` is at most this)."""


def parse_ads(text: str) -> list[tuple[str, CondorRecord]]:
    """``-json`` output as (HpcbridgeKey, record) pairs; ads without ClusterId, ProcId or an
    integer JobStatus are skipped. condor_q's output may end with HTCondor's analysis of one
    job of each autocluster the negotiator passed over, after a line ``ANALYSIS``: what it
    finds no machine meets holds for every job of that autocluster."""
    text, _, analysed = text.partition(f"\n{ANALYSIS}\n")
    unmet = waiting.analysis(analysed)
    ads = [ad for ad in _json_list(text, "job ads") if isinstance(ad, dict)]
    by_autocluster = {_int(ad.get("AutoClusterId")): unmet[_job(ad)]
                      for ad in ads if _job(ad) in unmet}
    by_autocluster.pop(None, None)
    found = []
    for ad in ads:
        record = _record(ad, unmet.get(_job(ad))
                         or by_autocluster.get(_int(ad.get("AutoClusterId"))))
        if record is not None:
            found.append((_text(ad.get(KEY_ATTRIBUTE)), record))
    return found


def _job(ad: Mapping[str, Any]) -> str:
    return f"{_int(ad.get('ClusterId'))}.{_int(ad.get('ProcId'))}"


def _json_list(text: str, what: str) -> list[Any]:
    if not text.strip():
        return []
    try:
        items = json.loads(text)
    except ValueError as err:
        raise SchedulerError(f"HTCondor printed JSON that does not parse: {err}") from err
    if not isinstance(items, list):
        raise SchedulerError(f"HTCondor printed JSON that is not a list of {what}")
    return items


def _record(ad: Mapping[str, Any], unmet: waiting.Unmet | None) -> CondorRecord | None:
    cluster, proc, status = _int(ad.get("ClusterId")), _int(ad.get("ProcId")), _int(
        ad.get("JobStatus"))
    if cluster is None or proc is None or status is None:
        return None
    end = _int(ad.get("CompletionDate")) or None
    if end is None and status in (3, 4):
        end = _int(ad.get("EnteredCurrentStatus"))
    return CondorRecord(
        cluster=cluster,
        proc=proc,
        job_status=status,
        exit_code=_int(ad.get("ExitCode")),
        exit_by_signal=ad.get("ExitBySignal") is True,
        exit_signal=_int(ad.get("ExitSignal")),
        hold_reason=_text(ad.get("HoldReason")),
        remove_reason=_text(ad.get("RemoveReason")),
        submit_time=_int(ad.get("QDate")),
        start_time=_int(ad.get("JobCurrentStartDate")),
        end_time=end,
        matches=_int(ad.get("NumJobMatches")) or 0,
        rejected=_text(ad.get("LastRejMatchReason")).strip(),
        unmet=unmet,
        usage=waiting.usage(ad, waiting.requests(ad)) if status in (3, 4) else None,
    )


def collect(
    by_key: dict[str, dict[str, CondorRecord]], refs: Sequence[JobRef], text: str,
    *, history: bool = False, adopt: bool = False,
) -> None:
    """File each ad under its attempt: only the attempt's recorded cluster, when it has one;
    a history ad replaces a queue ad of the same proc unless that one is still active. With
    ``adopt``, ads of attempts not in ``refs`` are filed too."""
    clusters = {ref.key: ref.job_id for ref in refs}
    for key, record in parse_ads(text):
        if adopt:
            by_key.setdefault(key, {})
        if key not in by_key or clusters.get(key) not in (None, str(record.cluster)):
            continue
        task_id = f"{record.cluster}.{record.proc}"
        queued = by_key[key].get(task_id)
        if history and queued and states.to_task(queued).outcome.is_active:
            continue
        by_key[key][task_id] = record


def missing(ref: JobRef, records: Mapping[str, CondorRecord]) -> int:
    """How many of the attempt's procs the history may hold: those not active in the queue."""
    active = {t for t, r in records.items() if states.to_task(r).outcome.is_active}
    if ref.expected_tasks:
        return len([t for t in ref.expected_tasks if t not in active])
    if records and len(active) == len(records):
        return 0
    return HISTORY_LIMIT_UNKNOWN


def tasks(expected: Sequence[str], records: Mapping[str, CondorRecord]) -> list[TaskState]:
    found = [states.to_task(record) for record in records.values()]
    if found:
        found += [
            TaskState(task_id, Outcome.PENDING,
                      message=f"Proc {task_id} is in neither condor_q nor condor_history yet")
            for task_id in expected if task_id not in records
        ]
    return found


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def container_support(text: str) -> PoolContainers:
    """``commands.CONTAINER_SUPPORT``'s lines (``HasSIF HasDockerURL`` per kind of slot) as
    what some execute node runs itself; ``undefined`` and ``false`` say no.

    >>> container_support("false true\\ntrue undefined\\n")
    PoolContainers(sif=True, docker=True)
    >>> container_support("")
    PoolContainers(sif=False, docker=False)
    """
    rows = [line.split() for line in text.splitlines()]
    return PoolContainers(sif=any(row[:1] == ["true"] for row in rows),
                          docker=any(row[1:2] == ["true"] for row in rows))
