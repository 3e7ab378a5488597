"""SLURM over SSH: ``sbatch`` in the guarded submission, ``squeue`` then ``sacct``, ``scancel``.

squeue is the source of truth while a job is in it; sacct answers for jobs that have left it
(after MinJobAge) and gives exit codes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from hooks.core.values.job import JobRef, JobRequest, SubmitOutcome
from hooks.core.values.phases import TaskState
from hooks.core.values.sdk import SchedulerError
from hooks.deadline import Deadline
from hooks.schedulers import guard
from hooks.schedulers.base import chunks
from hooks.schedulers.files import ENV_FILE, environment_file, input_files
from hooks.schedulers.shell import OverSSH
from hooks.schedulers.slurm import commands, states
from hooks.schedulers.slurm.commands import NAME_PREFIX, job_name
from hooks.schedulers.slurm.parse import active, merge, parse_sacct, parse_squeue
from hooks.schedulers.slurm.rules import job_id
from hooks.schedulers.slurm.states import SlurmRecord
from hooks.ssh.client import Completed, Remote

_JOB_ID = re.compile(r"^(\d+)$")


class SlurmRemote(OverSSH):
    def submit(self, conn: Remote, job: JobRequest, *, deadline: Deadline) -> SubmitOutcome:
        files = [("script", job.spec.script.encode())]
        if job.environment:
            files.append((ENV_FILE, environment_file(job.environment)))
        return submit_outcome(guard.submit(
            conn, job, files=[*files, *input_files(job)],
            submit=commands.submit_argv(job), lookup=commands.lookup(job.key),
            transient=commands.TRANSIENT_ERRORS, deadline=deadline))

    def query(
        self, conn: Remote, refs: Sequence[JobRef], *, deadline: Deadline,
        whole_queue: bool = True,
    ) -> Mapping[str, Sequence[TaskState]]:
        asked = {job_name(ref.key) for ref in refs}
        queued = _squeue(conn, deadline, (lambda name: name.startswith(NAME_PREFIX))
                         if whole_queue else asked.__contains__)
        by_key: dict[str, dict[str, SlurmRecord]] = {ref.key: {} for ref in refs}
        for name, records in queued.items():
            by_key[name.removeprefix(NAME_PREFIX)] = {r.task_id: r for r in records}
        settled = [
            ref for ref in refs
            if ref.job_id and not any(active(r) for r in by_key[ref.key].values())
        ]
        accounted: dict[str, list[SlurmRecord]] = {}
        for chunk in chunks([ref.job_id for ref in settled if ref.job_id], commands.SACCT_CHUNK):
            result = conn.run(commands.sacct(chunk), deadline=deadline)
            accounted.update(parse_sacct(_checked(result, "sacct")))
        for ref in settled:
            records = accounted.get(job_name(ref.key), [])
            by_key[ref.key] = merge(by_key[ref.key], {r.task_id: r for r in records})
        return {
            key: [states.to_task(r) for r in records.values()]
            for key, records in by_key.items()
        }

    def active_jobs(self, conn: Remote, uid: str, *, deadline: Deadline) -> Sequence[str]:
        prefix = f"{NAME_PREFIX}{uid}-"
        queued = _squeue(conn, deadline, lambda name: name.startswith(prefix))
        # One id per job: scancel of an array's id cancels all its tasks, however many.
        return sorted({job_id(r.task_id)
                       for records in queued.values() for r in records if active(r)})

    def cancel(self, conn: Remote, job_ids: Sequence[str], *, deadline: Deadline) -> None:
        if job_ids:
            _checked(conn.run(["scancel", *job_ids], deadline=deadline), "scancel")

    def hold(self, conn: Remote, job_ids: Sequence[str], *, deadline: Deadline) -> None:
        # scontrol answers 0 for a job held already, or running (which a hold does not stop).
        if job_ids:
            _checked(conn.run(["scontrol", "hold", *job_ids], deadline=deadline),
                     "scontrol hold")

    def release(self, conn: Remote, job_ids: Sequence[str], *, deadline: Deadline) -> None:
        if job_ids:
            _checked(conn.run(["scontrol", "release", *job_ids], deadline=deadline),
                     "scontrol release")


def submit_outcome(result: Completed) -> SubmitOutcome:
    """The guard's answer; sbatch --parsable printed the job id."""
    return guard.outcome(result, job_id=_JOB_ID, program="sbatch", detail=_last_line)


def _last_line(result: Completed) -> str:
    lines = (result.err or result.out).strip().splitlines()
    return lines[-1] if lines else ""


def _squeue(
    conn: Remote, deadline: Deadline, wanted: Callable[[str], bool]
) -> dict[str, list[SlurmRecord]]:
    return parse_squeue(_checked(conn.run(commands.SQUEUE, deadline=deadline), "squeue"), wanted)


def _checked(result: Completed, what: str) -> str:
    if result.exit_status != 0:
        lines = result.err.strip().splitlines()
        raise SchedulerError(f"{what} failed: {lines[-1] if lines else result.exit_status}")
    return result.out
