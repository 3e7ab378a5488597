"""HTCondor over SSH: ``condor_submit`` in the guarded submission, ``condor_q`` then
``condor_history``, ``condor_rm``.

An attempt is found by its job attribute ``HpcbridgeKey = "<uid>-<attempt>"``, never by cluster
id alone, so a cluster whose id never reached the status is still found. ``condor_q`` is the
truth while a proc is in the queue; a completed proc leaves it at once (unless
``leave_in_queue``, which is reserved) and only ``condor_history`` knows how it ended, so each
query is one ``condor_q`` for all attempts, then one ``condor_history`` for the attempts with
procs not active in the queue, stopped by ``-limit`` once it has found them. The query's
``condor_q`` is a remote program that also runs HTCondor's matchmaking analysis of the jobs the
negotiator passed over, in the same command (``commands.QUEUE_PROGRAM``); ``active_jobs``
needs no analysis and runs condor_q alone. JobStatus is authoritative, ExitCode is not
(``states``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from hooks.core.values.image import PoolContainers
from hooks.core.values.job import JobRef, JobRequest, SubmitOutcome
from hooks.core.values.phases import TaskState
from hooks.core.values.sdk import SchedulerError
from hooks.deadline import Deadline
from hooks.schedulers import guard
from hooks.schedulers.base import chunks
from hooks.schedulers.files import (
    ENV_FILE,
    WRAPPER,
    WRAPPER_PROGRAM,
    input_files,
    shell_environment,
)
from hooks.schedulers.htcondor import commands, parse, states
from hooks.schedulers.htcondor.description import USER_LOG, submit_description
from hooks.schedulers.htcondor.states import CondorRecord
from hooks.schedulers.shell import OverSSH
from hooks.ssh.client import Completed, Remote

DESCRIPTION = "submit.sub"
FILES = frozenset({DESCRIPTION, "condor_submit.err", USER_LOG})
"""HTCondor's own files at the top of an attempt directory: the submit description,
condor_submit's errors (``commands.SUBMIT``) and the job's user log."""
_SUBMITTED_ID = re.compile(r"^(\d+)(?:\.\d+)?$")
_RM_OK = re.compile(
    r"^(Couldn't find/remove all jobs (in cluster|matching)|All jobs in cluster \d+ have been "
    r"marked for removal|Job \d+\.\d+ (already )?marked for removal|"
    r"condor_rm:0:There are no jobs in the queue)"
)
"""condor_rm lines that mean "removed, being removed, or gone already" (23.9.6 wording)."""
_HOLD_OK = re.compile(
    r"^(All jobs matching constraint .* have been (held|released)|"
    r"Couldn't find/(hold|release) all jobs matching constraint .*)$"
)
"""condor_hold/condor_release lines that mean "done, or nothing to do": no proc matched the
constraint (held already, started meanwhile, gone), 23.9.6 wording."""
_HOLDABLE = {"condor_hold": 1, "condor_release": 5}
"""The JobStatus each tool acts on: idle procs are held (a proc that started since the query
is not evicted, which would lose its progress), held ones released."""


class HTCondorRemote(OverSSH):
    def writes_file(self, name: str) -> bool:
        return name in FILES or super().writes_file(name)

    def submit(self, conn: Remote, job: JobRequest, *, deadline: Deadline) -> SubmitOutcome:
        files = [("script", job.spec.script.encode()),
                 (DESCRIPTION, submit_description(job).encode())]
        if job.environment:
            files += [(ENV_FILE, shell_environment(job.environment)),
                      (WRAPPER, WRAPPER_PROGRAM.encode())]
        return submit_outcome(guard.submit(
            conn, job, files=[*files, *input_files(job)],
            submit=commands.SUBMIT, lookup=commands.lookup(job.key),
            transient=commands.TRANSIENT_ERRORS, deadline=deadline))

    def query(
        self, conn: Remote, refs: Sequence[JobRef], *, deadline: Deadline,
        whole_queue: bool = True,
    ) -> Mapping[str, Sequence[TaskState]]:
        by_key: dict[str, dict[str, CondorRecord]] = {ref.key: {} for ref in refs}
        if whole_queue:
            queue = _ads(conn, "condor_q", commands.queue(commands.OURS), deadline)
            parse.collect(by_key, refs, queue, adopt=True)
        else:
            for chunk in chunks([ref.key for ref in refs], commands.KEY_CHUNK):
                constraint = commands.key_constraint(chunk)
                ads = _ads(conn, "condor_q", commands.queue(constraint), deadline)
                parse.collect(by_key, refs, ads)
        wanted = {ref.key: parse.missing(ref, by_key[ref.key]) for ref in refs if ref.job_id}
        wanted = {key: count for key, count in wanted.items() if count}
        for chunk in chunks(sorted(wanted), commands.KEY_CHUNK):
            limit = str(sum(wanted[key] for key in chunk))
            argv = commands.ads("condor_history", commands.key_constraint(chunk), ("-limit", limit))
            ads = _ads(conn, "condor_history", argv, deadline)
            parse.collect(by_key, refs, ads, history=True)
        expected = {ref.key: ref.expected_tasks for ref in refs}
        return {key: parse.tasks(expected.get(key, ()), records)
                for key, records in by_key.items()}

    def active_jobs(self, conn: Remote, uid: str, *, deadline: Deadline) -> Sequence[str]:
        argv = commands.ads("condor_q", commands.batchjob_constraint(uid))
        records = parse.parse_ads(_ads(conn, "condor_q", argv, deadline))
        return sorted(
            {str(r.cluster) for _, r in records if states.to_task(r).outcome.is_active},
            key=int,
        )

    def cancel(self, conn: Remote, job_ids: Sequence[str], *, deadline: Deadline) -> None:
        if not job_ids:
            return
        result = conn.run(["condor_rm", *job_ids], deadline=deadline)
        if result.exit_status != 0 and not rm_gone_only(result):
            raise SchedulerError(f"condor_rm failed: {_last_line(result)}")

    def container_support(self, conn: Remote, *, deadline: Deadline) -> PoolContainers:
        return parse.container_support(
            _ads(conn, "condor_status", commands.CONTAINER_SUPPORT, deadline))

    def hold(self, conn: Remote, job_ids: Sequence[str], *, deadline: Deadline) -> None:
        _hold_or_release(conn, "condor_hold", job_ids, deadline)

    def release(self, conn: Remote, job_ids: Sequence[str], *, deadline: Deadline) -> None:
        _hold_or_release(conn, "condor_release", job_ids, deadline)


def _hold_or_release(
    conn: Remote, tool: str, job_ids: Sequence[str], deadline: Deadline
) -> None:
    if not job_ids:
        return
    clusters = " || ".join(f"ClusterId == {int(job)}" for job in job_ids)
    constraint = f"({clusters}) && JobStatus == {_HOLDABLE[tool]}"
    result = conn.run([tool, "-constraint", constraint], deadline=deadline)
    if result.exit_status != 0 and not _only(result, _HOLD_OK):
        raise SchedulerError(f"{tool} failed: {_last_line(result)}")


def submit_outcome(result: Completed) -> SubmitOutcome:
    """The guard's answer, with ``condor_submit -terse``'s ``23.0 - 23.3`` (or the lookup's
    ``23``) reduced to the cluster id ``23``."""
    return guard.outcome(result, job_id=_SUBMITTED_ID, program="condor_submit",
                         detail=_last_line)


def rm_gone_only(result: Completed) -> bool:
    """Whether a failed condor_rm only says some jobs were gone already (or are being removed)."""
    return _only(result, _RM_OK)


def _only(result: Completed, lines: re.Pattern[str]) -> bool:
    """Whether a tool printed something, and only ``lines`` (blank ones aside)."""
    printed = [line.strip() for line in (result.out + "\n" + result.err).splitlines()]
    return any(printed) and all(lines.match(line) for line in printed if line)


def _ads(conn: Remote, tool: str, argv: Sequence[str], deadline: Deadline) -> str:
    result = conn.run(argv, deadline=deadline)
    if result.exit_status != 0:
        raise SchedulerError(f"{tool} failed: {_last_line(result) or result.exit_status}")
    return result.out


def _last_line(result: Completed) -> str:
    """The telling line of a failed HTCondor tool: the last one, except that condor_q's
    ``Extra Info:`` paragraphs (printed when it cannot find the schedd) become one phrase."""
    text = result.err.strip() or result.out.strip()
    text, extra, _ = text.partition("Extra Info:")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    return f"{last} (the condor_schedd is not running or cannot be found)" if extra else last
