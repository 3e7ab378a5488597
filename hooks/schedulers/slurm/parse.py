"""Parsers of squeue and sacct output, and the merge of the two into one record per task.
Pure: no I/O."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from hooks.schedulers.slurm import accounting, forms, states
from hooks.schedulers.slurm.states import SlurmRecord


def parse_squeue(
    text: str, wanted: Callable[[str], bool] = lambda name: True
) -> dict[str, list[SlurmRecord]]:
    """squeue ``-o SQUEUE_FORMAT`` lines of the wanted job names, grouped by name."""
    found: dict[str, list[SlurmRecord]] = {}
    for row in text.splitlines():
        fields = row.strip().split("|")
        if len(fields) < 8 or not wanted(fields[1]):
            continue
        task_id, name, state, reason, submit, start, end = fields[:7]
        partition = fields[8] if len(fields) > 8 else ""
        found.setdefault(name, []).append(
            SlurmRecord(task_id, state, reason, "", submit, start, end, partition)
        )
    return found


def parse_sacct(text: str) -> dict[str, list[SlurmRecord]]:
    """sacct ``--parsable2 -o SACCT_FIELDS`` lines grouped by job name, with compressed
    records of never-started array tasks (``7_[0,2-3]``) expanded, each task with its
    accounting: the allocation's line, and the largest ``MaxRSS`` of its steps."""
    rows = [row.strip().split("|") for row in text.splitlines()]
    rows = [fields + [""] * (14 - len(fields)) for fields in rows if len(fields) >= 8]
    step_rss: dict[str, list[int]] = {}
    for fields in rows:
        task_id, dot, _ = fields[0].partition(".")
        sample = accounting.size(fields[10])
        if dot and sample is not None:
            step_rss.setdefault(task_id, []).append(sample)
    found: dict[str, list[SlurmRecord]] = {}
    for fields in rows:
        job_id, name, state, exit_code, submit, start, end, reason = fields[:8]
        if "." in job_id:
            continue
        elapsed, total_cpu, _, nodes, cpus, memory = fields[8:14]
        for task_id in _expand(job_id):
            rss = step_rss.get(task_id)
            used = None if not elapsed else accounting.usage(
                submit=submit, start=start, elapsed=elapsed, total_cpu=total_cpu,
                max_rss=f"{max(rss)}" if rss else "", nodes=nodes, cpus=cpus,
                requested_memory=memory)
            found.setdefault(name, []).append(SlurmRecord(
                task_id, state, reason, exit_code, submit, start, end, usage=used))
    return found


def _expand(job_id: str) -> list[str]:
    base, sep, tasks = job_id.partition("_[")
    if not sep:
        return [job_id]
    try:
        return [f"{base}_{i}" for i in forms.parse_array(tasks.rstrip("]"))]
    except ValueError:
        return [job_id]


def merge(
    queued: Mapping[str, SlurmRecord], accounted: Mapping[str, SlurmRecord]
) -> dict[str, SlurmRecord]:
    """One record per task: squeue while the task is active there, else sacct's final record.

    A task that squeue already shows finished but sacct does not yet (accounting lags by a
    fraction of a second) counts as still completing, except COMPLETED, which means exit 0 —
    unless sacct knows the job already (it does from a fraction of a second after the
    submission): the task's final record, with its usage, is then a round away. Without any
    record in sacct (a cluster without accounting), squeue's COMPLETED is final.
    """
    merged = {task: r for task, r in accounted.items() if task not in queued or not active(r)}
    for task, record in queued.items():
        if active(record) or task not in merged:
            if not active(record) and record.state.startswith("COMPLETED") and not accounted:
                record = replace(record, exit_code="0:0")
            elif not active(record):
                record = replace(record, state="COMPLETING")
            merged[task] = record
    return merged


def active(record: SlurmRecord) -> bool:
    return states.outcome(record.state).is_active
