"""SLURM over SSH: ``sbatch`` in the guarded submission, ``squeue`` then ``sacct``, ``scancel``.

squeue is the source of truth while a job is in it; sacct answers for jobs that have left it
(after MinJobAge) and gives exit codes. Output is parsed from ``-o``/``--parsable2`` text, not
``--json`` (SLURM 22.05's JSON ignores squeue filters and reports wrong exit codes in sacct).
Times are printed in UTC by running the clients with ``TZ=UTC``.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from hooks.backends import guard
from hooks.backends.base import Deadline, SchedulerError, SubmitOutcome, Submitted, chunks
from hooks.core import slurm_states, units
from hooks.core.model import JobRef, JobRequest, Spec, TaskState
from hooks.core.slurm_states import SlurmRecord
from hooks.ssh.client import Completed, Remote

NAME_PREFIX = "hpcb-"
SQUEUE_FORMAT = "%i|%j|%T|%r|%V|%S|%e|%F"
SACCT_FIELDS = "JobID,JobName,State,ExitCode,Submit,Start,End,Reason"
TRANSIENT_ERRORS = (
    "Unable to contact slurm controller|Socket timed out|Zero Bytes were transmitted|"
    "Transport endpoint|temporarily unavailable|Slurm backup controller in standby"
)
SACCT_CHUNK = 500


class SlurmBackend:
    name = "slurm"

    def job_name(self, key: str) -> str:
        return NAME_PREFIX + key

    def job_id(self, task_id: str) -> str:
        return task_id.split("_", 1)[0]

    def expected_tasks(self, spec: Spec, job_id: str) -> tuple[str, ...]:
        if spec.slurm.array_tasks:
            return tuple(f"{job_id}_{i}" for i in spec.slurm.array_tasks)
        return (job_id,)

    def submit(self, conn: Remote, job: JobRequest, *, timeout: float) -> SubmitOutcome:
        name = self.job_name(job.key)
        quoted = shlex.quote(name)
        lookup = (
            f"found=$(squeue -h -t all --name={quoted} -o %F) || exit 1; "
            'if [ -z "$found" ]; then '
            f"found=$(sacct -n -X -P -S now-60days --name={quoted} -o JobID) || exit 1; fi; "
            'printf "%s\n" "$found" | head -n 1 | cut -d _ -f 1'
        )
        argv, stdin = guard.command(
            remote_dir=job.remote_dir,
            files=[("script", job.spec.script.encode())],
            submit=sbatch_argv(job, name),
            lookup=lookup,
            transient=TRANSIENT_ERRORS,
            stale_seconds=guard.STALE_SECONDS,
        )
        result = conn.run(argv, stdin=stdin, timeout=timeout)
        return submit_outcome(result)

    def query(
        self, conn: Remote, refs: Sequence[JobRef], *, timeout: float, whole_queue: bool = True
    ) -> Mapping[str, Sequence[TaskState]]:
        left = Deadline(timeout)
        asked = {self.job_name(ref.key) for ref in refs}
        queued = _squeue(conn, left(), (lambda name: name.startswith(NAME_PREFIX))
                         if whole_queue else asked.__contains__)
        by_key: dict[str, dict[str, SlurmRecord]] = {ref.key: {} for ref in refs}
        for job_name, records in queued.items():
            by_key[job_name.removeprefix(NAME_PREFIX)] = {r.task_id: r for r in records}
        settled = [
            ref for ref in refs
            if ref.job_id and not any(_active(r) for r in by_key[ref.key].values())
        ]
        accounted: dict[str, list[SlurmRecord]] = {}
        for chunk in chunks([ref.job_id for ref in settled if ref.job_id], SACCT_CHUNK):
            result = conn.run(["env", "TZ=UTC", "sacct", "-n", "-X", "-P", "-j", ",".join(chunk),
                               "-o", SACCT_FIELDS], timeout=left())
            accounted.update(parse_sacct(_checked(result, "sacct")))
        for ref in settled:
            records = accounted.get(self.job_name(ref.key), [])
            by_key[ref.key] = merge(by_key[ref.key], {r.task_id: r for r in records})
        return {
            key: [slurm_states.to_task(r) for r in records.values()]
            for key, records in by_key.items()
        }

    def active_jobs(self, conn: Remote, uid: str, *, timeout: float) -> Sequence[str]:
        prefix = f"{NAME_PREFIX}{uid}-"
        queued = _squeue(conn, timeout, lambda name: name.startswith(prefix))
        # One id per job: scancel of an array's id cancels all its tasks, however many.
        return sorted({self.job_id(r.task_id)
                       for records in queued.values() for r in records if _active(r)})

    def cancel(self, conn: Remote, job_ids: Sequence[str], *, timeout: float) -> None:
        if job_ids:
            _checked(conn.run(["scancel", *job_ids], timeout=timeout), "scancel")


def sbatch_argv(job: JobRequest, name: str) -> list[str]:
    """The sbatch command of one attempt, run in its directory. Pure."""
    spec, res, opts = job.spec, job.spec.resources, job.spec.slurm
    pattern = "%A_%a" if opts.array else "%j"
    argv = [
        "sbatch", "--parsable", f"--job-name={name}", f"--comment={job.namespace}/{job.name}",
        f"--output={pattern}.out", f"--error={pattern}.err",
    ]
    named = {
        "--array": opts.array,
        "--partition": opts.partition,
        "--account": opts.account,
        "--qos": opts.qos,
        "--cpus-per-task": res.cpus,
        "--mem": f"{res.memory_mib}M" if res.memory_mib else None,
        "--gpus": res.gpus,
        "--time": units.slurm_time(res.time_limit_seconds) if res.time_limit_seconds else None,
        "--nodes": res.nodes,
    }
    argv += [f"{flag}={value}" for flag, value in named.items() if value is not None]
    return [*argv, *spec.slurm.extra_args, "script"]


def submit_outcome(result: Completed) -> SubmitOutcome:
    verb, rest = guard.parse(result.out)
    kinds = {k.value: k for k in Submitted}
    if result.exit_status == 0 and verb in kinds:
        if verb in ("submitted", "existing") and not rest.isdigit():
            return SubmitOutcome(Submitted.REFUSED, message=f"sbatch printed {rest!r}")
        return SubmitOutcome(kinds[verb], job_id=rest if verb in ("submitted", "existing")
                             else "", message=rest)
    detail = (result.err or result.out).strip().splitlines()
    raise SchedulerError(detail[-1] if detail else f"submission exited {result.exit_status}")


def parse_squeue(
    text: str, wanted: Callable[[str], bool] = lambda name: True
) -> dict[str, list[SlurmRecord]]:
    """squeue ``-o SQUEUE_FORMAT`` lines of the wanted job names, grouped by name. Pure."""
    found: dict[str, list[SlurmRecord]] = {}
    for line in text.splitlines():
        fields = line.strip().split("|")
        if len(fields) < 8 or not wanted(fields[1]):
            continue
        task_id, name, state, reason, submit, start, end, _ = fields[:8]
        found.setdefault(name, []).append(
            SlurmRecord(task_id, state, reason, "", submit, start, end)
        )
    return found


def parse_sacct(text: str) -> dict[str, list[SlurmRecord]]:
    """sacct ``--parsable2 -o SACCT_FIELDS`` lines grouped by job name, with compressed
    records of never-started array tasks (``7_[0,2-3]``) expanded. Pure."""
    found: dict[str, list[SlurmRecord]] = {}
    for line in text.splitlines():
        fields = line.strip().split("|")
        if len(fields) < 8:
            continue
        job_id, name, state, exit_code, submit, start, end, reason = fields[:8]
        for task_id in _expand(job_id):
            found.setdefault(name, []).append(
                SlurmRecord(task_id, state, reason, exit_code, submit, start, end)
            )
    return found


def _expand(job_id: str) -> list[str]:
    base, sep, tasks = job_id.partition("_[")
    if not sep:
        return [job_id]
    try:
        return [f"{base}_{i}" for i in units.parse_array(tasks.rstrip("]"))]
    except ValueError:
        return [job_id]


def merge(
    queued: Mapping[str, SlurmRecord], accounted: Mapping[str, SlurmRecord]
) -> dict[str, SlurmRecord]:
    """One record per task: squeue while the task is active there, else sacct's final record.

    A task that squeue already shows finished but sacct does not yet (accounting lags by a
    fraction of a second) counts as still completing, except COMPLETED, which means exit 0.
    """
    merged = {task: r for task, r in accounted.items() if task not in queued or not _active(r)}
    for task, record in queued.items():
        if _active(record) or task not in merged:
            if not _active(record) and record.state.startswith("COMPLETED"):
                record = replace(record, exit_code="0:0")
            elif not _active(record):
                record = replace(record, state="COMPLETING")
            merged[task] = record
    return merged


def _active(record: SlurmRecord) -> bool:
    return slurm_states.outcome(record.state).active


def _squeue(
    conn: Remote, timeout: float, wanted: Callable[[str], bool]
) -> dict[str, list[SlurmRecord]]:
    """The login user's wanted jobs in squeue, finished ones inside MinJobAge included."""
    result = conn.run(
        ["env", "TZ=UTC", "sh", "-c", 'exec squeue -a -h -r -t all -u "$(id -un)" -o "$1"',
         "squeue", SQUEUE_FORMAT],
        timeout=timeout,
    )
    return parse_squeue(_checked(result, "squeue"), wanted)


def _checked(result: Completed, what: str) -> str:
    if result.exit_status != 0:
        lines = result.err.strip().splitlines()
        raise SchedulerError(f"{what} failed: {lines[-1] if lines else result.exit_status}")
    return result.out


