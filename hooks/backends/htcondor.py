"""HTCondor over SSH: ``condor_submit`` in the guarded submission, ``condor_q`` then
``condor_history``, ``condor_rm``.

An attempt is found by its job attribute ``HpcbridgeKey = "<uid>-<attempt>"``, never by cluster
id alone, so a cluster whose id never reached the status is still found. ``condor_q`` is the
truth while a proc is in the queue; a completed proc leaves it at once (unless
``leave_in_queue``, which is reserved) and only ``condor_history`` knows how it ended, so each
query is one ``condor_q`` for all attempts, then one ``condor_history`` for the attempts with
procs not active in the queue, stopped by ``-limit`` once it has found them. Output is parsed
from ``-json`` (reasons contain spaces, so ``-af`` columns are ambiguous); ``condor_q -json``
prints nothing at all when nothing matches, ``condor_history -json`` prints ``[ ]``.

JobStatus is authoritative, ExitCode is not (``hooks.core.htcondor_states``). A proc in neither
the queue nor the history while its siblings are visible is still settling (the schedd writes
the history as the proc leaves the queue) and is reported pending, not lost.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from hooks.backends import guard
from hooks.backends.base import Deadline, SchedulerError, SubmitOutcome, Submitted, chunks
from hooks.core import htcondor_states
from hooks.core.htcondor_states import CondorRecord
from hooks.core.htcondor_submit import KEY_ATTRIBUTE, classad_string, submit_description
from hooks.core.model import JobRef, JobRequest, Outcome, Spec, TaskState
from hooks.ssh.client import Completed, Remote

ATTRIBUTES = (
    "ClusterId", "ProcId", "JobStatus", "ExitCode", "ExitBySignal", "ExitSignal", "HoldReason",
    "RemoveReason", "QDate", "JobCurrentStartDate", "CompletionDate", "EnteredCurrentStatus",
    KEY_ATTRIBUTE,
)
SUBMIT_PROGRAM = r"""
chmod 700 script || exit
condor_submit -terse < submit.sub 2> condor_submit.err
rc=$?
msg=$(tr -s '\n\t ' '   ' < condor_submit.err)
msg=${msg# }; msg=${msg% }
[ -z "$msg" ] || printf '%s\n' "$msg" >&2
exit "$rc"
"""
"""Run by the guard in the attempt directory: make the script executable (the guard writes
files without the exec bit, and a shared filesystem runs it in place), submit with the
description on stdin (``condor_submit -`` would dump the job ad instead), and join condor_submit's
multi-line errors (``ERROR: Parse error in expression:`` / the expression / a blank line) into
one line, because the guard reports the last line of stderr."""
SUBMIT = ("sh", "-c", SUBMIT_PROGRAM, "hpcbridge-condor-submit")
TRANSIENT_ERRORS = (
    "Failed to connect to local queue manager|Can't find address of local schedd|"
    "Failed to commit job submission|CEDAR:600[0-9]|SECMAN:20[0-9][0-9]|"
    "Connection refused|timed out|temporarily unavailable"
)
"""condor_submit's errors when the schedd cannot be asked (real 23.9.6 messages: schedd gone
from its address ``Failed to connect to local queue manager`` + ``CEDAR:6001:Failed to connect
to <...>`` or ``SECMAN:2011:...``; no address and no collector ``Can't find address of local
schedd``), as opposed to a refused description (``ERROR: on Line 3 of submit file: ...``)."""
KEY_CHUNK = 400
"""Keys per condor_q/condor_history constraint: about 16 KB of command line at most."""
HISTORY_LIMIT_UNKNOWN = 10000
"""History ads to look for when an attempt's proc count is unknown (``queue`` is at most this)."""
_SUBMITTED_ID = re.compile(r"^(\d+)(?:\.\d+)?$")
_RM_OK = re.compile(
    r"^(Couldn't find/remove all jobs (in cluster|matching)|All jobs in cluster \d+ have been "
    r"marked for removal|Job \d+\.\d+ (already )?marked for removal|"
    r"condor_rm:0:There are no jobs in the queue)"
)
"""condor_rm lines that mean "removed, being removed, or gone already" (23.9.6 wording)."""


class HTCondorBackend:
    name = "htcondor"

    def job_name(self, key: str) -> str:
        """The attempt's identity on the pool: the value of its ``HpcbridgeKey`` attribute."""
        return key

    def job_id(self, task_id: str) -> str:
        return task_id.split(".", 1)[0]

    def expected_tasks(self, spec: Spec, job_id: str) -> tuple[str, ...]:
        return tuple(f"{job_id}.{proc}" for proc in range(spec.htcondor.queue))

    def submit(self, conn: Remote, job: JobRequest, *, timeout: float) -> SubmitOutcome:
        argv, stdin = guard.command(
            remote_dir=job.remote_dir,
            files=[("script", job.spec.script.encode()),
                   ("submit.sub", submit_description(job).encode())],
            submit=SUBMIT,
            lookup=lookup_command(job.key),
            transient=TRANSIENT_ERRORS,
            stale_seconds=guard.STALE_SECONDS,
        )
        return submit_outcome(conn.run(argv, stdin=stdin, timeout=timeout))

    def query(
        self, conn: Remote, refs: Sequence[JobRef], *, timeout: float, whole_queue: bool = True
    ) -> Mapping[str, Sequence[TaskState]]:
        by_key: dict[str, dict[str, CondorRecord]] = {ref.key: {} for ref in refs}
        left = Deadline(timeout)
        if whole_queue:
            queue = _ads(conn, "condor_q", f"{KEY_ATTRIBUTE} isnt undefined", (), left())
            _collect(by_key, refs, queue, adopt=True)
        else:
            for chunk in chunks([ref.key for ref in refs], KEY_CHUNK):
                _collect(by_key, refs, _ads(conn, "condor_q", key_constraint(chunk), (), left()))
        wanted = {ref.key: _missing(ref, by_key[ref.key]) for ref in refs if ref.job_id}
        wanted = {key: count for key, count in wanted.items() if count}
        for chunk in chunks(sorted(wanted), KEY_CHUNK):
            limit = str(sum(wanted[key] for key in chunk))
            ads = _ads(conn, "condor_history", key_constraint(chunk), ("-limit", limit), left())
            _collect(by_key, refs, ads, history=True)
        expected = {ref.key: ref.expected_tasks for ref in refs}
        return {key: _tasks(expected.get(key, ()), records) for key, records in by_key.items()}

    def active_jobs(self, conn: Remote, uid: str, *, timeout: float) -> Sequence[str]:
        prefix = f"{uid}-"
        constraint = (f"substr({KEY_ATTRIBUTE}, 0, {len(prefix)}) == "
                      f"{classad_string(prefix)}")
        records = parse_ads(_ads(conn, "condor_q", constraint, (), timeout))
        return sorted(
            {str(r.cluster) for _, r in records if htcondor_states.to_task(r).outcome.active},
            key=int,
        )

    def cancel(self, conn: Remote, job_ids: Sequence[str], *, timeout: float) -> None:
        if not job_ids:
            return
        result = conn.run(["condor_rm", *job_ids], timeout=timeout)
        if result.exit_status != 0 and not rm_gone_only(result):
            raise SchedulerError(f"condor_rm failed: {_last_line(result)}")


def lookup_command(key: str) -> str:
    """Shell: print the cluster id of the attempt ``key`` from the queue, else the history.

    Fails (non-zero) when condor_q or condor_history fails, so that the guard never takes a
    stale guard over, and submits again, because the schedd could not be asked."""
    constraint = shlex.quote(f"{KEY_ATTRIBUTE} == {classad_string(key)}")
    return (
        f"q=$(condor_q -constraint {constraint} -af ClusterId) || exit 1; "
        f'[ -n "$q" ] || q=$(condor_history -constraint {constraint} -limit 1 -af ClusterId) '
        '|| exit 1; printf "%s\\n" "$q" | head -n 1'
    )


def key_constraint(keys: Sequence[str]) -> str:
    """A constraint matching the job ads of the attempts ``keys``."""
    listed = classad_string(",".join(keys))
    return f"{KEY_ATTRIBUTE} isnt undefined && stringListMember({KEY_ATTRIBUTE}, {listed}, \",\")"


def submit_outcome(result: Completed) -> SubmitOutcome:
    """The guard's answer, with ``condor_submit -terse``'s ``23.0 - 23.3`` (or the lookup's
    ``23``) reduced to the cluster id ``23``."""
    verb, rest = guard.parse(result.out)
    kinds = {k.value: k for k in Submitted}
    if result.exit_status == 0 and verb in kinds:
        if verb in ("submitted", "existing"):
            match = _SUBMITTED_ID.match(rest)
            if match is None:
                return SubmitOutcome(Submitted.REFUSED,
                                     message=f"condor_submit printed {rest!r}")
            return SubmitOutcome(kinds[verb], job_id=match.group(1), message=rest)
        return SubmitOutcome(kinds[verb], message=rest)
    raise SchedulerError(_last_line(result) or f"submission exited {result.exit_status}")


def parse_ads(text: str) -> list[tuple[str, CondorRecord]]:
    """``-json`` output of condor_q/condor_history as (HpcbridgeKey, record) pairs. Pure.

    Ads without ClusterId, ProcId or an integer JobStatus are skipped."""
    if not text.strip():
        return []
    try:
        ads = json.loads(text)
    except ValueError as err:
        raise SchedulerError(f"HTCondor printed JSON that does not parse: {err}") from err
    if not isinstance(ads, list):
        raise SchedulerError("HTCondor printed JSON that is not a list of job ads")
    found = []
    for ad in ads:
        record = _record(ad) if isinstance(ad, dict) else None
        if record is not None:
            found.append((_text(ad.get(KEY_ATTRIBUTE)), record))
    return found


def rm_gone_only(result: Completed) -> bool:
    """Whether a failed condor_rm only says some jobs were gone already (or are being removed)."""
    lines = [line.strip() for line in (result.out + "\n" + result.err).splitlines()]
    lines = [line for line in lines if line]
    return bool(lines) and all(_RM_OK.match(line) for line in lines)


def _record(ad: Mapping[str, Any]) -> CondorRecord | None:
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
    )


def _ads(
    conn: Remote, tool: str, constraint: str, extra: Sequence[str], timeout: float
) -> str:
    argv = [tool, "-constraint", constraint, *extra, "-json", "-attributes", ",".join(ATTRIBUTES)]
    result = conn.run(argv, timeout=timeout)
    if result.exit_status != 0:
        raise SchedulerError(f"{tool} failed: {_last_line(result) or result.exit_status}")
    return result.out


def _collect(
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
        if history and queued and htcondor_states.to_task(queued).outcome.active:
            continue
        by_key[key][task_id] = record


def _missing(ref: JobRef, records: Mapping[str, CondorRecord]) -> int:
    """How many of the attempt's procs the history may hold: those not active in the queue."""
    active = {t for t, r in records.items() if htcondor_states.to_task(r).outcome.active}
    if ref.expected_tasks:
        return len([t for t in ref.expected_tasks if t not in active])
    if records and len(active) == len(records):
        return 0
    return HISTORY_LIMIT_UNKNOWN


def _tasks(expected: Sequence[str], records: Mapping[str, CondorRecord]) -> list[TaskState]:
    tasks = [htcondor_states.to_task(record) for record in records.values()]
    if tasks:
        tasks += [
            TaskState(task_id, Outcome.PENDING,
                      message=f"Proc {task_id} is in neither condor_q nor condor_history yet")
            for task_id in expected if task_id not in records
        ]
    return tasks


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


def _last_line(result: Completed) -> str:
    """The telling line of a failed HTCondor tool: the last one, except that condor_q's
    ``Extra Info:`` paragraphs (printed when it cannot find the schedd) become one phrase."""
    text = result.err.strip() or result.out.strip()
    text, extra, _ = text.partition("Extra Info:")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    return f"{last} (the condor_schedd is not running or cannot be found)" if extra else last

