"""The HTCondor scheduler package and its submit description, on real recorded HTCondor output.

Fixtures ``backend-ref-*`` are copied from the reference captures (23.9.6 trixie and 25.14.1
sid); ``backend-live-*`` were recorded over SSH on the project's 23.9.6 test pool with the
scheduler package's own attribute list. The shell parts (the lookup, the submit program) run
here against stand-in ``condor_*`` commands, so their exit-status logic is tested, not just
their text.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from hooks.core.status import aggregate
from hooks.core.values.fields import SpecError
from hooks.core.values.job import JobRef, JobRequest, SubmitAnswer
from hooks.core.values.phases import Outcome, TaskState
from hooks.core.values.reasons import Reason
from hooks.core.values.sdk import SchedulerError
from hooks.schedulers import guard
from hooks.schedulers.htcondor.commands import (
    QUEUE_PROGRAM,
    SUBMIT,
    SUBMIT_PROGRAM,
    TRANSIENT_ERRORS,
    key_constraint,
    lookup,
    queue,
)
from hooks.schedulers.htcondor.description import (
    classad_string,
    submit_description,
    submit_string,
)
from hooks.schedulers.htcondor.parse import ATTRIBUTES, parse_ads
from hooks.schedulers.htcondor.remote import rm_gone_only, submit_outcome
from hooks.schedulers.htcondor.rules import RESERVED_KEYS, HTCondorRules
from hooks.schedulers.htcondor.scheduler import SCHEDULER
from hooks.schedulers.htcondor.states import TIME_LIMIT_MARKER, to_task
from hooks.schedulers.registry import REGISTRY
from tests.unit.conftest import (
    FIXTURES,
    UID,
    FakeConnection,
    completed,
    deadline,
    raw_spec,
    recorded,
    spec_of,
    stand_ins,
)
from tests.unit.conftest import job as build_job

LIVE_KEYS = {
    "exit0": "d427dfc8-3675-498e-95b4-f53e7bf47e87-1",
    "exit3": "f120f1ae-327e-41bf-8863-089905a7a99c-1",
    "signal9": "744579c1-9d4e-4d0c-98cf-7ff8944c15d4-1",
    "held": "210099e8-b341-4e71-bbf8-e26a9add154f-1",
    "timelimit": "0e5a48d5-73e5-42a9-987f-46a5d51d1f24-1",
    "queue4": "4e232d00-5691-41c3-93c1-097beb6a5ba5-1",
}


def fixture(name: str) -> str:
    """A recorded HTCondor output file (it has no ``#`` comment lines)."""
    return recorded("htcondor", name)


def messages(name: str) -> str:
    """A recorded messages file, read raw: its ``### command`` / rc / stdout / stderr lines are
    the data that ``sections`` splits, which ``recorded`` would drop as comments."""
    return (FIXTURES / "htcondor" / name).read_text()


def request(**changes: Any) -> JobRequest:
    """Attempt 2 of research/hello on HTCondor."""
    return build_job("htcondor", 2, **changes)


def by_task(tasks: Sequence[TaskState]) -> dict[str, TaskState]:
    return {task.task_id: task for task in tasks}


def sections(name: str) -> dict[str, list[tuple[int, str, str]]]:
    """The ``### command`` / rc / stdout / stderr sections of a recorded messages file."""
    found: dict[str, list[tuple[int, str, str]]] = {}
    parts = re.split(r"^### (?=\S+ )", messages(name), flags=re.M)[1:]
    for part in parts:
        command, rest = part.split("\n", 1)
        rc = re.search(r"### rc=(\d+)", rest)
        assert rc is not None
        out = rest.split("### stdout:\n", 1)[1].split("### stderr:\n", 1)
        found.setdefault(command.strip(), []).append((int(rc.group(1)), out[0], out[1]))
    return found


# --- parsing recorded job ads ------------------------------------------------------------------


@pytest.mark.parametrize("version", ["23.9.6", "25.14.1"])
def test_reference_queue_states(version: str) -> None:
    ads = parse_ads(fixture(f"backend-ref-condor_q-states-{version}.json"))
    tasks = [to_task(record) for _, record in ads]
    outcomes = [(t.outcome, t.reason) for t in tasks]
    assert outcomes == [
        (Outcome.PENDING, Reason.NONE),  # idle
        (Outcome.RUNNING, Reason.NONE),  # running
        (Outcome.CANCELLED, Reason.CANCELLED_ON_CLUSTER),  # removed, lingering
        (Outcome.SUCCEEDED, Reason.NONE),  # completed, left in queue
        (Outcome.PENDING, Reason.HELD),  # condor_hold
        (Outcome.PENDING, Reason.HELD),  # input transfer failure
    ]
    assert tasks[4].message == "via condor_hold (by user submitter)"
    assert tasks[5].message.startswith("Transfer input files failure at access point vm")
    assert "via condor_rm (by user submitter)" in tasks[2].message
    assert all(key == "" for key, _ in ads)  # the reference jobs carry no HpcbridgeKey


@pytest.mark.parametrize("version", ["23.9.6", "25.14.1"])
def test_reference_history_exit_codes_and_signals(version: str) -> None:
    tasks = {
        t.exit_code if not t.message.startswith("The job was killed") else "sig": t
        for t in (to_task(r) for _, r in parse_ads(
            fixture(f"backend-ref-condor_history-states-{version}.json")))
    }
    assert tasks[0].outcome is Outcome.SUCCEEDED
    assert (tasks[3].outcome, tasks[3].reason) == (Outcome.FAILED, Reason.NON_ZERO_EXIT_CODE)
    assert tasks[3].end_time is not None and tasks[3].start_time is not None
    signalled = tasks["sig"]
    assert (signalled.outcome, signalled.reason) == (Outcome.FAILED, Reason.NON_ZERO_EXIT_CODE)
    assert signalled.message == "The job was killed by signal 9"
    assert signalled.exit_code is None


def test_live_ads_map_to_states() -> None:
    def one(name: str) -> TaskState:
        [(key, record)] = parse_ads(fixture(f"backend-live-{name}.json"))
        assert key.endswith("-1")
        return to_task(record)

    assert (one("exit0-history").outcome, one("exit0-history").exit_code) == (
        Outcome.SUCCEEDED, 0)
    failed = one("exit3-history")
    assert (failed.outcome, failed.reason, failed.exit_code) == (
        Outcome.FAILED, Reason.NON_ZERO_EXIT_CODE, 3)
    assert one("signal9-history").message == "The job was killed by signal 9"
    held = one("held-queue-held")
    assert (held.outcome, held.reason, held.message) == (
        Outcome.PENDING, Reason.HELD, "via condor_hold (by user submitter)")
    # released and run again: ExitSignal 15 of the hold stays on the ad, ExitBySignal decides
    assert one("released-history").outcome is Outcome.SUCCEEDED
    timeout = one("timelimit-history")
    assert (timeout.outcome, timeout.reason) == (Outcome.FAILED, Reason.TIMEOUT)
    # a removed job has no CompletionDate: its end is when it entered the Removed state
    assert timeout.end_time == "2026-11-22T06:44:40Z"


@pytest.mark.parametrize(("name", "outcome", "reason", "message"), [
    # Recorded on the 23.9.6 pool: a user's periodic_remove of "run longer than 2 s", alone and
    # beside a time limit of 600 s, and the time limit of 15 s beside a user's periodic_remove.
    # RemoveReason quotes the whole expression: beside a time limit, the user's own removal
    # carried the time limit's marker and read as Timeout.
    ("own-periodic-remove-history", Outcome.CANCELLED, Reason.CANCELLED_ON_CLUSTER,
     "The job was removed on the pool by its own periodic_remove (spec.htcondor.submitOptions)"),
    ("own-periodic-remove-beside-time-limit-history", Outcome.CANCELLED,
     Reason.CANCELLED_ON_CLUSTER,
     "The job was removed on the pool by its own periodic_remove (spec.htcondor.submitOptions)"),
    ("time-limit-beside-own-periodic-remove-history", Outcome.FAILED, Reason.TIMEOUT,
     "The job ran past its time limit"),
    ("timelimit-history", Outcome.FAILED, Reason.TIMEOUT, "The job ran past its time limit"),
])
def test_a_removal_by_periodic_remove_is_told_apart_from_the_time_limit(
    name: str, outcome: Outcome, reason: Reason, message: str
) -> None:
    [(_, record)] = parse_ads(fixture(f"backend-live-{name}.json"))
    task = to_task(record)
    assert (task.outcome, task.reason, task.message) == (outcome, reason, message)


def test_the_time_limit_removal_reason_carries_the_marker() -> None:
    [(_, record)] = parse_ads(fixture("backend-live-timelimit-history.json"))
    assert TIME_LIMIT_MARKER in record.remove_reason
    assert record.remove_reason.startswith("The job attribute PeriodicRemove expression")


@pytest.mark.parametrize("text", ["", "\n", "[\n]\n"])
def test_no_match_prints_nothing_or_an_empty_list(text: str) -> None:
    assert parse_ads(text) == []


@pytest.mark.parametrize("text", ["[\n{\n", "{}", "-- Failed to fetch ads"])
def test_garbled_json_is_a_scheduler_error(text: str) -> None:
    with pytest.raises(SchedulerError):
        parse_ads(text)


def test_ads_without_ids_or_status_are_skipped() -> None:
    text = json.dumps([{"ClusterId": 1, "ProcId": 0}, {"ClusterId": 1, "JobStatus": 2},
                       {"ClusterId": 1, "ProcId": 0, "JobStatus": 2, "ExitCode": True}])
    [(_, record)] = parse_ads(text)
    assert record.exit_code is None


# --- query: one condor_q, then one condor_history ---------------------------------------------


def queue4_ref(job_id: str | None = "16") -> JobRef:
    key = LIVE_KEYS["queue4"]
    return JobRef(key, job_id, tuple(f"16.{p}" for p in range(4)) if job_id else ())


def test_query_queue4_with_one_proc_removed_while_idle() -> None:
    """condor_rm 16.2 right after submission: 16.2 leaves the queue at once, the rest run."""
    conn = FakeConnection({
        "condor_q": [completed(fixture("backend-live-queue4-rm-one-queue-after-rm.json"))],
        "condor_history": [completed(json.dumps([
            ad for ad in json.loads(fixture("backend-live-queue4-rm-one-history.json"))
            if ad["JobStatus"] == 3]))],
    })
    ref = queue4_ref()
    tasks = by_task(SCHEDULER.query(conn, [ref], deadline=deadline(5))[ref.key])
    assert conn.programs() == ["condor_q", "condor_history"]
    history_argv = conn.calls[1][0]
    assert history_argv[history_argv.index("-limit") + 1] == "1"
    assert {t: s.outcome for t, s in tasks.items()} == {
        "16.0": Outcome.PENDING, "16.1": Outcome.PENDING, "16.2": Outcome.CANCELLED,
        "16.3": Outcome.PENDING,
    }


def test_query_queue4_done_counts() -> None:
    conn = FakeConnection({
        "condor_history": [completed(fixture("backend-live-queue4-rm-one-history.json"))],
    })
    ref = queue4_ref()
    tasks = SCHEDULER.query(conn, [ref], deadline=deadline(5))[ref.key]
    summary = aggregate.summarize(tasks, expected=ref.expected_tasks, single=False,
                                  seconds_since_submit=30)
    assert (summary.succeeded, summary.cancelled, summary.failed, summary.active) == (3, 1, 0, 0)
    assert summary.phase.value == "Cancelled"
    assert summary.reason is Reason.CANCELLED_ON_CLUSTER
    assert summary.task_ids == ("16.0", "16.1", "16.2", "16.3")
    assert summary.exit_code is None
    history_argv = conn.calls[1][0]
    assert history_argv[history_argv.index("-limit") + 1] == "4"


def test_history_is_skipped_while_every_proc_is_active() -> None:
    queued = json.loads(fixture("backend-live-queue4-rm-one-queue-after-rm.json"))
    queued.append(dict(queued[0], ProcId=2, JobStatus=2))
    conn = FakeConnection({"condor_q": [completed(json.dumps(queued))]})
    ref = queue4_ref()
    tasks = SCHEDULER.query(conn, [ref], deadline=deadline(5))[ref.key]
    assert conn.programs() == ["condor_q"]
    assert len(tasks) == 4 and all(t.outcome.is_active for t in tasks)


def test_one_condor_q_and_one_condor_history_for_many_attempts() -> None:
    refs = [JobRef(key, "1", ()) for key in LIVE_KEYS.values()]
    conn = FakeConnection({})
    result = SCHEDULER.query(conn, refs, deadline=deadline(5))
    assert conn.programs() == ["condor_q", "condor_history"]
    assert set(result) == set(LIVE_KEYS.values())
    (queue, attributes), (history, _) = (listing(argv) for argv, _ in conn.calls)
    assert queue == "HpcbridgeKey isnt undefined"  # every job of ours, however many
    assert attributes == ",".join(ATTRIBUTES)
    assert all(key in history for key in LIVE_KEYS.values())
    history_argv = conn.calls[1][0]
    assert history_argv[history_argv.index("-attributes") + 1] == ",".join(ATTRIBUTES)
    assert "-json" in history_argv


def listing(argv: Sequence[str]) -> tuple[str, str]:
    """The constraint and the attributes of a condor_q (``QUEUE_PROGRAM``) or condor_history."""
    if argv[0] == "sh":
        assert list(argv[:4]) == ["sh", "-c", QUEUE_PROGRAM, "condor_q"]
        return argv[4], argv[5]
    return argv[argv.index("-constraint") + 1], argv[argv.index("-attributes") + 1]


def test_nothing_visible_yet_is_an_empty_answer() -> None:
    ref = JobRef(LIVE_KEYS["exit0"], "15", ("15.0",))
    assert SCHEDULER.query(FakeConnection({}), [ref], deadline=deadline(5)) == {ref.key: []}


def test_history_replaces_a_lingering_removed_proc_but_not_an_active_one() -> None:
    key = LIVE_KEYS["exit0"]
    queued = [{"ClusterId": 15, "ProcId": 0, "JobStatus": 3, "HpcbridgeKey": key,
               "RemoveReason": "via condor_rm (by user submitter)"},
              {"ClusterId": 15, "ProcId": 1, "JobStatus": 2, "HpcbridgeKey": key}]
    history = [{"ClusterId": 15, "ProcId": 0, "JobStatus": 3, "HpcbridgeKey": key,
                "RemoveReason": "via condor_rm (by user submitter)", "EnteredCurrentStatus": 5},
               {"ClusterId": 15, "ProcId": 1, "JobStatus": 4, "ExitCode": 0, "HpcbridgeKey": key}]
    conn = FakeConnection({"condor_q": [completed(json.dumps(queued))],
                           "condor_history": [completed(json.dumps(history))]})
    ref = JobRef(key, "15", ("15.0", "15.1"))
    tasks = by_task(SCHEDULER.query(conn, [ref], deadline=deadline(5))[key])
    assert tasks["15.0"].end_time == "1970-01-01T00:00:05Z"  # the history ad
    assert tasks["15.1"].outcome is Outcome.RUNNING  # the queue wins while active


def test_a_proc_in_neither_while_its_siblings_are_seen_is_settling() -> None:
    conn = FakeConnection({"condor_history": [completed(json.dumps(
        json.loads(fixture("backend-live-queue4-rm-one-history.json"))[:3]))]})
    ref = queue4_ref()
    tasks = by_task(SCHEDULER.query(conn, [ref], deadline=deadline(5))[ref.key])
    assert tasks["16.2"].outcome is Outcome.PENDING
    assert "neither" in tasks["16.2"].message


def test_ads_of_another_cluster_with_the_same_key_are_ignored() -> None:
    ads = json.loads(fixture("backend-live-exit3-history.json"))
    conn = FakeConnection({"condor_history": [completed(json.dumps(ads))]})
    ref = JobRef(LIVE_KEYS["exit3"], "99", ("99.0",))
    assert SCHEDULER.query(conn, [ref], deadline=deadline(5))[ref.key] == []


def test_a_failing_condor_q_is_a_scheduler_error() -> None:
    [(rc, out, err)] = sections("backend-live-messages-23.9.6.txt")["condor_q -json"]
    conn = FakeConnection({"condor_q": [completed(out, err, rc)]})
    with pytest.raises(SchedulerError, match="CEDAR:6001"):
        SCHEDULER.query(conn, [queue4_ref()], deadline=deadline(5))


def test_one_condor_q_for_any_number_of_attempts_and_history_keys_chunked() -> None:
    refs = [JobRef(f"{i:08d}-0000-0000-0000-000000000000-1", str(i + 1), (f"{i + 1}.0",))
            for i in range(1000)]
    conn = FakeConnection({})
    SCHEDULER.query(conn, refs, deadline=deadline(5))
    assert conn.programs() == ["condor_q"] + ["condor_history"] * 3
    assert max(len(" ".join(argv)) for argv, _ in conn.calls) < 20_000


def test_asked_alone_an_attempt_gets_a_condor_q_of_its_key_only() -> None:
    asked, other = LIVE_KEYS["exit0"], LIVE_KEYS["held"]
    ads = [{"ClusterId": 15, "ProcId": 0, "JobStatus": 2, "HpcbridgeKey": asked},
           {"ClusterId": 16, "ProcId": 0, "JobStatus": 1, "HpcbridgeKey": other}]
    conn = FakeConnection({"condor_q": [completed(json.dumps(ads))]})
    result = SCHEDULER.query(conn, [JobRef(asked, "15", ("15.0",))], deadline=deadline(5),
                             whole_queue=False)
    assert listing(conn.calls[0][0])[0] == key_constraint([asked])
    assert set(result) == {asked}


def test_the_queue_listing_also_answers_attempts_not_asked_about() -> None:
    asked, other = LIVE_KEYS["exit0"], LIVE_KEYS["held"]
    ads = [{"ClusterId": 15, "ProcId": 0, "JobStatus": 2, "HpcbridgeKey": asked},
           {"ClusterId": 16, "ProcId": 0, "JobStatus": 1, "HpcbridgeKey": other}]
    conn = FakeConnection({"condor_q": [completed(json.dumps(ads))]})
    result = SCHEDULER.query(conn, [JobRef(asked, "15", ("15.0",))], deadline=deadline(5))
    assert conn.programs() == ["condor_q"]
    assert [(t.task_id, t.outcome) for t in result[asked]] == [("15.0", Outcome.RUNNING)]
    assert [(t.task_id, t.outcome) for t in result[other]] == [("16.0", Outcome.PENDING)]


def test_key_constraint_shape() -> None:
    assert key_constraint(["a-1", "b-2"]) == (
        'HpcbridgeKey isnt undefined && stringListMember(HpcbridgeKey, "a-1,b-2", ",")'
    )


# --- active jobs and cancel --------------------------------------------------------------------


def test_active_jobs_are_the_active_clusters_of_the_uid() -> None:
    uid = LIVE_KEYS["held"].rsplit("-", 1)[0]
    held = json.loads(fixture("backend-live-held-queue-held.json"))
    ads = [*held, dict(held[0], ClusterId=9, JobStatus=2), dict(held[0], ClusterId=9, ProcId=1),
           dict(held[0], ClusterId=30, JobStatus=3)]
    conn = FakeConnection({"condor_q": [completed(json.dumps(ads))]})
    assert SCHEDULER.active_jobs(conn, uid, deadline=deadline(5)) == ["9", "17"]
    argv = conn.calls[0][0]
    assert argv[argv.index("-constraint") + 1] == (
        f'substr(HpcbridgeKey, 0, {len(uid) + 1}) == "{uid}-"'
    )


def test_cancel_runs_condor_rm_once() -> None:
    removal = "All jobs in cluster 9 have been marked for removal\n"
    conn = FakeConnection({"condor_rm": [completed(removal)]})
    SCHEDULER.cancel(conn, ["9", "17"], deadline=deadline(5))
    assert conn.calls[0][0] == ["condor_rm", "9", "17"]
    SCHEDULER.cancel(conn, [], deadline=deadline(5))
    assert len(conn.calls) == 1


def test_cancel_of_jobs_already_gone_succeeds() -> None:
    messages = sections("backend-live-messages-23.9.6.txt")
    for command in ("condor_rm 99999", "condor_rm 14.0"):
        [(rc, out, err)] = messages[command]
        conn = FakeConnection({"condor_rm": [completed(out, err, rc)]})
        SCHEDULER.cancel(conn, ["99999"], deadline=deadline(5))
    gone = completed(err="\nCouldn't find/remove all jobs in cluster 99999\n", status=1)
    assert rm_gone_only(gone)


def test_cancel_fails_when_the_schedd_cannot_be_asked_or_refuses() -> None:
    unreachable = sections("backend-live-messages-23.9.6.txt")["condor_rm 8"]
    denied = sections("backend-live-messages-23.9.6.txt")["condor_rm 7"]
    assert len(unreachable) == 3
    for rc, out, err in [*unreachable, *denied]:
        conn = FakeConnection({"condor_rm": [completed(out, err, rc)]})
        with pytest.raises(SchedulerError):
            SCHEDULER.cancel(conn, ["8"], deadline=deadline(5))


# --- ids ---------------------------------------------------------------------------------------


def test_ids_and_expected_procs() -> None:
    assert SCHEDULER.job_id("15.3") == "15"
    assert SCHEDULER.job_id("15") == "15"
    spec = spec_of(raw_spec("htcondor", htcondor={"queue": 3}))
    assert SCHEDULER.expected_tasks(spec.options, "15") == ("15.0", "15.1", "15.2")
    assert SCHEDULER.expected_tasks(spec_of(raw_spec("htcondor")).options, "7") == ("7.0",)
    assert REGISTRY["htcondor"] is SCHEDULER
    assert isinstance(REGISTRY["htcondor"], HTCondorRules)
    assert REGISTRY["htcondor"].name == "htcondor"


# --- submission --------------------------------------------------------------------------------


@pytest.mark.parametrize(("line", "answer", "job_id"), [
    ("submitted 23.0\n", SubmitAnswer.SUBMITTED, "23"),
    ("existing 23.0\n", SubmitAnswer.EXISTING, "23"),
    ("existing 23\n", SubmitAnswer.EXISTING, "23"),  # recorded by the lookup
    ("inflight\n", SubmitAnswer.IN_FLIGHT, ""),
    ("transient ERROR: Can't find address of local schedd\n", SubmitAnswer.TRANSIENT, ""),
    ("refused ERROR: Parse error in expression: Requirements = ((()\n", SubmitAnswer.REFUSED, ""),
    ("submitted -\n", SubmitAnswer.REFUSED, ""),
])
def test_submit_outcome(line: str, answer: SubmitAnswer, job_id: str) -> None:
    outcome = submit_outcome(completed(line))
    assert (outcome.answer, outcome.job_id) == (answer, job_id)


def test_a_broken_guard_run_is_a_scheduler_error() -> None:
    with pytest.raises(SchedulerError, match="no space"):
        submit_outcome(completed(err="sh: no space left on device\n", status=1))


def test_submit_is_one_guarded_command_with_script_and_description_on_stdin() -> None:
    job = request(htcondor={"queue": 2})
    conn = FakeConnection({"hpcbridge-submit": [completed("submitted 41.0\n")]})
    outcome = SCHEDULER.submit(conn, job, deadline=deadline(10))
    assert (outcome.answer, outcome.job_id) == (SubmitAnswer.SUBMITTED, "41")
    [(argv, stdin)] = conn.calls
    description = submit_description(job).encode()
    script = job.spec.script.encode()
    assert stdin == script + description
    assert argv[:3] == ["sh", "-c", guard.PROGRAM]
    assert argv[4] == job.remote_dir
    assert argv[9:13] == ["script", str(len(script)), "submit.sub", str(len(description))]
    assert argv[13:] == list(SUBMIT)
    assert job.spec.script not in " ".join(argv)


def _lookup(tmp_path: Path, **programs: str) -> subprocess.CompletedProcess[str]:
    env = stand_ins(tmp_path, home=tmp_path, **programs)
    return subprocess.run(["sh", "-c", lookup("k-1")], env=env, capture_output=True,
                          text=True, check=False)


def test_lookup_prefers_the_queue(tmp_path: Path) -> None:
    found = _lookup(tmp_path, condor_q='printf "23\\n23\\n"', condor_history="exit 9")
    assert (found.returncode, found.stdout) == (0, "23\n")


def test_lookup_falls_back_to_the_history(tmp_path: Path) -> None:
    found = _lookup(tmp_path, condor_q="exit 0", condor_history='echo "$@"')
    assert found.returncode == 0
    assert found.stdout == '-constraint HpcbridgeKey == "k-1" -limit 1 -af ClusterId\n'


def test_lookup_finds_nothing(tmp_path: Path) -> None:
    assert _lookup(tmp_path, condor_q="exit 0", condor_history="exit 0").stdout == "\n"


@pytest.mark.parametrize("failing", ["condor_q", "condor_history"])
def test_lookup_fails_when_the_pool_cannot_be_asked(tmp_path: Path, failing: str) -> None:
    """The guard must not take a stale guard over (and submit again) on a failed lookup."""
    programs = {"condor_q": "exit 0", "condor_history": "exit 0", failing: "exit 1"}
    assert _lookup(tmp_path, **programs).returncode != 0


QUEUED = recorded("htcondor", "condor_q-analysis-23.9.6.txt").partition(
    "hpcbridge: analysis\n")[0]
"""condor_q -json of jobs the negotiator passed over (recorded)."""
SLOTS_LONG = recorded("htcondor", "condor_status-long-busy-23.9.6.txt")


def _queue(tmp_path: Path, jobs: str = QUEUED, **programs: str) -> tuple[
        subprocess.CompletedProcess[str], Path]:
    """QUEUE_PROGRAM against stand-ins: condor_q prints ``jobs`` for -json, autoclusters for
    -af, and for -better-analyze its arguments and the slot ads it read; condor_status prints
    the recorded busy slot. Each records its arguments in ``calls``."""
    calls, shown = tmp_path / "calls", tmp_path / "jobs.json"
    shown.write_text(jobs)
    (tmp_path / "slots").write_text(SLOTS_LONG)
    stands = {
        "condor_q": f'''echo "condor_q $*" >> {calls}
case " $* " in
*" -json "*) cat {shown} ;;
*" -af "*) printf '64 101 0\\n65 100 0\\n64 101 1\\nundefined 7 0\\n66 1;x 0\\n' ;;
*" -better-analyze "*) echo "analysed $*"; cat "$3" > {tmp_path / "read"} ;;
esac''',
        "condor_status": f'echo "condor_status $*" >> {calls}; cat {tmp_path / "slots"}',
        **programs,
    }
    env = stand_ins(tmp_path, home=tmp_path, **stands)
    result = subprocess.run(queue("Owner == \"me\""), env=env, capture_output=True, text=True,
                            check=False)
    return result, calls


def test_the_queue_program_analyses_one_job_of_each_autocluster_passed_over(
    tmp_path: Path
) -> None:
    result, calls = _queue(tmp_path)
    assert result.returncode == 0, result.stderr
    jobs, marker, analysis = result.stdout.partition("\nhpcbridge: analysis\n")
    assert (jobs, marker) == (QUEUED.rstrip("\n"), "\nhpcbridge: analysis\n")
    assert analysis == "analysed -better-analyze -slotads /dev/stdin 101.0 100.0 7.0\n"
    ran = calls.read_text().splitlines()
    assert ran[:2] == [
        f'condor_q -constraint Owner == "me" -json -attributes {",".join(ATTRIBUTES)}',
        'condor_q -constraint (Owner == "me") && JobStatus == 1 && (NumJobMatches =?= undefined '
        "|| NumJobMatches == 0) && LastRejMatchReason isnt undefined -af AutoClusterId "
        "ClusterId ProcId",
    ]
    assert sorted(ran[2:]) == [  # one pipeline
        "condor_q -better-analyze -slotads /dev/stdin 101.0 100.0 7.0",
        'condor_status -long -constraint SlotType =!= "Dynamic"',
    ]


def test_the_queue_program_offers_each_slot_with_its_totals(tmp_path: Path) -> None:
    """A partitionable slot with 3 of its 4 CPUs free is analysed with all 4 (and all of its
    memory, disk and GPUs); every other attribute is kept."""
    _queue(tmp_path)
    offered = (tmp_path / "read").read_text().splitlines()
    assert len(offered) == len(SLOTS_LONG.splitlines())
    changed = set(offered) - set(SLOTS_LONG.splitlines())
    assert changed == {"Cpus = TotalSlotCpus", "Memory = TotalSlotMemory",
                       "Disk = TotalSlotDisk", "GPUs = TotalSlotGPUs"}
    assert "Cpus = 3" in SLOTS_LONG.splitlines() and "TotalSlotCpus = 4" in offered


def test_the_queue_program_analyses_nothing_when_no_job_was_passed_over(
    tmp_path: Path
) -> None:
    running = json.dumps([{"ClusterId": 99, "ProcId": 0, "JobStatus": 2}])
    result, calls = _queue(tmp_path, running)
    assert (result.returncode, result.stdout) == (0, running + "\n")
    assert len(calls.read_text().splitlines()) == 1


@pytest.mark.parametrize(
    "failing",
    [
        pytest.param({"condor_status": "echo 'Failed to connect to collector' >&2; exit 1"},
                     id="condor_status"),
        pytest.param({"awk": "exit 2"}, id="awk"),
    ],
)
def test_an_analysis_that_fails_leaves_the_queue_listing(
    tmp_path: Path, failing: dict[str, str]
) -> None:
    result, _ = _queue(tmp_path, **failing)
    assert result.returncode == 0
    assert result.stdout.startswith(QUEUED.rstrip("\n"))
    assert {to_task(r).reason for _, r in parse_ads(result.stdout)} <= {Reason.NONE}


def test_a_failing_condor_q_fails_the_queue_program(tmp_path: Path) -> None:
    result, calls = _queue(tmp_path, condor_q=f'echo "condor_q $*" >> {tmp_path / "calls"}; '
                                             "echo 'CEDAR:6001' >&2; exit 1")
    assert result.returncode == 1 and result.stdout == ""
    assert len(calls.read_text().splitlines()) == 1


def test_the_queue_program_is_plain_sh() -> None:
    assert subprocess.run(["sh", "-n", "-c", QUEUE_PROGRAM], check=False).returncode == 0


def _guarded_submit(tmp_path: Path, condor_submit: str) -> tuple[str, Path]:
    job = request()
    argv, stdin = guard.command(
        remote_dir=job.remote_dir,
        files=[("script", job.spec.script.encode()),
               ("submit.sub", submit_description(job).encode())],
        submit=SUBMIT, lookup=lookup(job.key), transient=TRANSIENT_ERRORS,
        stale_seconds=job.guard_stale,
    )
    env = stand_ins(tmp_path, home=tmp_path, condor_submit=condor_submit)
    result = subprocess.run(argv, input=stdin, env=env, capture_output=True, check=False)
    return result.stdout.decode(), tmp_path / job.remote_dir


def test_guarded_submit_records_the_first_job_id(tmp_path: Path) -> None:
    out, attempt = _guarded_submit(
        tmp_path, 'cat > seen.sub; [ -x script ] || exit 7; echo "23.0 - 23.3"')
    assert out == "submitted 23.0\n"
    assert submit_outcome(completed(out)).job_id == "23"
    assert (attempt / "jobid").read_text() == "23.0\n"
    assert (attempt / "seen.sub").read_text() == (attempt / "submit.sub").read_text()
    assert os.stat(attempt / "script").st_mode & 0o777 == 0o700


@pytest.mark.parametrize(("command", "index", "answer"), [
    ("condor_submit -terse", 0, SubmitAnswer.TRANSIENT),  # dead port
    ("condor_submit -terse", 1, SubmitAnswer.TRANSIENT),  # dead shared-port socket
    ("condor_submit -terse", 2, SubmitAnswer.TRANSIENT),  # no address, no collector
    ("condor_submit -terse", 3, SubmitAnswer.REFUSED),  # parse error
])
def test_guarded_submit_classifies_real_errors(
    tmp_path: Path, command: str, index: int, answer: SubmitAnswer
) -> None:
    rc, _, err = sections("backend-live-messages-23.9.6.txt")[command][index]
    (tmp_path / "err.txt").write_text(err)
    out_text, attempt = _guarded_submit(
        tmp_path, f"cat >/dev/null; cat {tmp_path}/err.txt >&2; exit {rc}")
    outcome = submit_outcome(completed(out_text))
    assert outcome.answer is answer
    assert "\n" not in outcome.message and outcome.message.startswith("ERROR: ")
    if answer is SubmitAnswer.REFUSED:
        assert outcome.message.startswith("ERROR: Parse error in expression: Requirements = ((()")
        assert (attempt / "refused").exists()
    else:
        assert not (attempt / "refused").exists() and not (attempt / "jobid").exists()


def test_submit_program_is_plain_sh() -> None:
    assert subprocess.run(["sh", "-n", "-c", SUBMIT_PROGRAM], check=False).returncode == 0


# --- the submit description --------------------------------------------------------------------


def description_lines(job: JobRequest) -> list[str]:
    return [line for line in submit_description(job).splitlines() if not line.startswith("#")]


def test_minimal_description() -> None:
    assert description_lines(request()) == [
        "universe = vanilla",
        "executable = script",
        "transfer_executable = true",
        "output = $(Cluster).$(Process).out",
        "error = $(Cluster).$(Process).err",
        "log = job.log",
        f'+HpcbridgeKey = "{UID}-2"',
        'batch_name = "research/hello"',
        "queue 1",
    ]


SIF = "/scratch/images/u/apptainer/sha256-" + "ab" * 32 + ".sif"
PULLED = "docker://registry.example.org/lab/sim@sha256:" + "ab" * 32


@pytest.mark.parametrize("image", [SIF, PULLED, PULLED.replace("registry.example.org",
                                                                  "[2001:db8::1]:5000")])
def test_an_image_the_pool_runs_itself_is_a_container_universe_job_with_file_transfer(
        image: str) -> None:
    lines = description_lines(replace(request(), pool_image=image))
    assert lines[:7] == [
        "universe = container",
        f"container_image = {image}",
        "transfer_container = false",
        "should_transfer_files = YES",
        "when_to_transfer_output = ON_EXIT",
        "executable = script",
        "transfer_executable = true",
    ]


@pytest.mark.parametrize("image", ["/scratch/a b.sif", "/scratch/$(Owner).sif", "/s/#.sif",
                                   '/s/"x".sif', "/s/x.sif\nqueue 9"])
def test_an_image_the_description_would_read_as_more_is_never_written(image: str) -> None:
    with pytest.raises(ValueError, match="container_image"):
        submit_description(replace(request(), pool_image=image))


@pytest.mark.parametrize("key", ["container_image", "Docker_Image", "transfer_container",
                                 "+ContainerImage", "MY.DockerImage"])
def test_the_image_is_the_sites_to_choose_not_a_submit_option(key: str) -> None:
    with pytest.raises(SpecError, match="hpcbridge manages"):
        request(htcondor={"submitOptions": {key: "docker://evil.example.org/x"}})


def test_resources_time_limit_queue_and_options() -> None:
    job = request(
        resources={"cpus": 2, "memory": "4Gi", "gpus": 1, "timeLimit": "1h30m"},
        htcondor={"queue": 4, "submitOptions": {"+ProjectName": '"cms"', "request_disk": "1G"}},
        logs={"follow": True},
    )
    lines = description_lines(job)
    assert lines[8:] == [
        "request_cpus = 2",
        "request_memory = 4096",
        "request_gpus = 1",
        "stream_output = true",
        "stream_error = true",
        'periodic_remove = JobStatus == 2 && time() - JobCurrentStartDate > 5400 && '
        f'"{TIME_LIMIT_MARKER}" != ""',
        '+ProjectName = "cms"',
        "request_disk = 1G",
        "queue 4",
    ]


def test_a_users_periodic_remove_is_kept_next_to_the_time_limit_by_reference() -> None:
    job = request(resources={"timeLimit": "20s"},
                  htcondor={"submitOptions": {"Periodic_Remove": "NumJobStarts > 3"}})
    removes = [line for line in description_lines(job) if "periodicremove" in
               line.lower().replace("_", "")]
    assert removes == [
        "+HpcbridgePeriodicRemove = NumJobStarts > 3",
        f'periodic_remove = (JobStatus == 2 && time() - JobCurrentStartDate > 20 && '
        f'"{TIME_LIMIT_MARKER}" != "") || MY.HpcbridgePeriodicRemove',
    ]
    alone = request(htcondor={"submitOptions": {"periodic_remove": "NumJobStarts > 3"}})
    assert "periodic_remove = NumJobStarts > 3" in description_lines(alone)
    assert not any("Hpcbridge" in line and "Key" not in line
                   for line in description_lines(alone))


@pytest.mark.parametrize("key", [*sorted(RESERVED_KEYS), "Executable", "+HPCBRIDGEKEY",
                                 "MY.HpcbridgeKey", "Queue"])
def test_reserved_keys_never_reach_the_description(key: str) -> None:
    with pytest.raises(SpecError, match="hpcbridge manages"):
        request(htcondor={"submitOptions": {key: "x"}})


@pytest.mark.parametrize("value", ["1\nqueue 100", "x\r\nexecutable = /bin/evil"])
def test_newlines_in_options_never_reach_the_description(value: str) -> None:
    with pytest.raises(SpecError, match="newline"):
        request(htcondor={"submitOptions": {"+Note": value}})


def test_every_managed_command_appears_once_and_queue_last() -> None:
    job = request(resources={"timeLimit": "1m"}, htcondor={"queue": 3, "submitOptions": {
        "+Note": '"$(Cluster) is fine"', "requirements": 'OpSys == "LINUX"'}})
    lines = description_lines(job)
    keys = [line.split("=", 1)[0].strip().lower() for line in lines[:-1]]
    for managed in ("universe", "executable", "output", "error", "log", "+hpcbridgekey",
                    "batch_name", "periodic_remove"):
        assert keys.count(managed) == 1
    assert lines[-1] == "queue 3"
    assert not any(line.lower().startswith("queue") for line in lines[:-1])


def test_classad_string_quoting() -> None:
    assert classad_string("ns/name") == '"ns/name"'
    assert classad_string('say "hi"') == '"say \\"hi\\""'
    assert submit_string("cost $5") == '"cost $(DOLLAR)5"'
    assert submit_string('a"$(b)') == '"a\\"$(DOLLAR)(b)"'
    for bad in ("back\\slash", "line\nbreak", "cr\r", "nul\0"):
        with pytest.raises(ValueError):
            classad_string(bad)


def test_description_is_deterministic_and_only_the_attempt_changes_it() -> None:
    job = request(resources={"timeLimit": "2h"}, htcondor={"queue": 2})
    assert submit_description(job) == submit_description(job)
    again = replace(job, attempt=3)
    changed = [
        (a, b) for a, b in zip(submit_description(job).splitlines(),
                               submit_description(again).splitlines(), strict=True) if a != b
    ]
    assert changed == [
        ("# hpcbridge: research/hello attempt 2", "# hpcbridge: research/hello attempt 3"),
        (f'+HpcbridgeKey = "{UID}-2"', f'+HpcbridgeKey = "{UID}-3"'),
    ]


def test_a_stopped_pool_reads_as_such() -> None:
    """Recorded with the pool's condor_master really stopped."""
    stopped = sections("backend-live-messages-schedd-stopped-23.9.6.txt")
    [(rc, out, err)] = stopped['condor_q -constraint HpcbridgeKey == "nope" -json']
    conn = FakeConnection({"condor_q": [completed(out, err, rc)]})
    with pytest.raises(SchedulerError) as raised:
        SCHEDULER.query(conn, [queue4_ref()], deadline=deadline(5))
    assert str(raised.value) == ("condor_q failed: Error: (null) (the condor_schedd is not "
                                 "running or cannot be found)")
    [(rc, out, err)] = stopped["condor_rm 8"]
    with pytest.raises(SchedulerError, match=r"condor_rm: \(null\)"):
        SCHEDULER.cancel(FakeConnection({"condor_rm": [completed(out, err, rc)]}), ["8"],
                         deadline=deadline(5))
    [(rc, out, err)] = stopped["condor_submit -terse"]
    assert rc == 1 and re.search(TRANSIENT_ERRORS, err)
    [(rc, out, _)] = stopped['condor_history -constraint HpcbridgeKey == "nope" -limit 1 -json']
    assert rc == 0 and parse_ads(out) == []  # reads the history file without the schedd
