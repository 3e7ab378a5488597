"""HTCondor JobStatus values mapped as the BatchJob API says, on ads recorded from real pools
(tests/unit/fixtures/htcondor, HTCondor 23.9.6 and 25.14.1)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hooks.core.status import aggregate
from hooks.core.values.phases import Outcome, Phase, TaskState
from hooks.core.values.reasons import Reason
from hooks.schedulers.htcondor.states import STATES, TIME_LIMIT_MARKER, CondorRecord, to_task
from tests.unit.conftest import FIXTURES, recorded

VERSIONS = ("23.9.6", "25.14.1")


def _value(text: str) -> Any:
    if text == "undefined":
        return None
    if text in ("true", "false"):
        return text == "true"
    return int(text)


def from_af(name: str) -> dict[str, TaskState]:
    """``-af ClusterId ProcId JobStatus ExitCode ExitBySignal ExitSignal [rest]`` lines; the
    rest is HoldReasonCode HoldReasonSubCode, or a RemoveReason with spaces."""
    tasks = {}
    for line in recorded("htcondor", name).splitlines():
        cluster, proc, status, code, by_signal, signal, *rest = line.split(" ")
        remove = " ".join(rest) if rest and not rest[0].isdigit() and rest[0] != "undefined" \
            else ""
        task = to_task(CondorRecord(int(cluster), int(proc), int(status), _value(code),
                                    bool(_value(by_signal)), _value(signal),
                                    remove_reason=remove))
        tasks[task.task_id] = task
    return tasks


def from_json(name: str) -> dict[str, TaskState]:
    tasks = {}
    for ad in json.loads(recorded("htcondor", name)):
        task = to_task(CondorRecord(
            ad["ClusterId"], ad["ProcId"], ad["JobStatus"], ad.get("ExitCode"),
            ad.get("ExitBySignal", False), ad.get("ExitSignal"), ad.get("HoldReason", ""),
            ad.get("RemoveReason", ""), None, ad.get("JobCurrentStartDate"),
            ad.get("CompletionDate"),
        ))
        tasks[task.task_id] = task
    return tasks


# condor_q of the recorded states run: job -> (outcome, reason), per version's cluster ids.
QUEUE = {
    "23.9.6": {"10.0": "idle", "11.0": "run", "12.0": "rmslow", "14.0": "kept",
               "17.0": "hold", "18.0": "badin"},
    "25.14.1": {"2.0": "idle", "3.0": "run", "4.0": "rmslow", "6.0": "kept",
                "9.0": "hold", "10.0": "badin"},
}
HISTORY = {
    "23.9.6": {"13.0": "done", "15.0": "fail", "16.0": "sig"},
    "25.14.1": {"5.0": "done", "7.0": "fail", "8.0": "sig"},
}
EXPECTED = {
    "idle": (Outcome.PENDING, Reason.NONE, None),
    "run": (Outcome.RUNNING, Reason.NONE, None),
    "rmslow": (Outcome.CANCELLED, Reason.CANCELLED_ON_CLUSTER, None),
    "kept": (Outcome.SUCCEEDED, Reason.NONE, 0),
    "hold": (Outcome.PENDING, Reason.HELD, None),
    "badin": (Outcome.PENDING, Reason.HELD, None),
    "done": (Outcome.SUCCEEDED, Reason.NONE, 0),
    "fail": (Outcome.FAILED, Reason.NON_ZERO_EXIT_CODE, 3),
    "sig": (Outcome.FAILED, Reason.NON_ZERO_EXIT_CODE, None),
}


@pytest.mark.parametrize(
    ("name", "jobs"),
    [
        pytest.param(f"condor_q-af-{v}.txt", QUEUE[v], id=f"condor_q-af-{v}") for v in VERSIONS
    ] + [
        pytest.param(f"condor_q-{v}.json", QUEUE[v], id=f"condor_q-json-{v}") for v in VERSIONS
    ] + [
        pytest.param(f"condor_history-af-{v}.txt", HISTORY[v], id=f"history-af-{v}")
        for v in VERSIONS
    ] + [
        pytest.param(f"condor_history-{v}.json", HISTORY[v], id=f"history-json-{v}")
        for v in VERSIONS
    ],
)
def test_recorded_ads(name: str, jobs: dict[str, str]) -> None:
    reader = from_json if name.endswith(".json") else from_af
    tasks = reader(name)
    assert set(tasks) == set(jobs)
    for task_id, kind in jobs.items():
        task = tasks[task_id]
        assert (task.outcome, task.reason, task.exit_code) == EXPECTED[kind], (task_id, kind)
        assert task.message or task.outcome in (Outcome.PENDING, Outcome.RUNNING,
                                                Outcome.SUCCEEDED)


@pytest.mark.parametrize("version", VERSIONS)
def test_held_message_is_the_hold_reason(version: str) -> None:
    tasks = from_json(f"condor_q-{version}.json")
    held = [t for t in tasks.values() if t.reason is Reason.HELD]
    assert sorted(t.message for t in held)[0].startswith("Transfer input files failure")
    assert "via condor_hold (by user submitter)" in {t.message for t in held}


@pytest.mark.parametrize("version", VERSIONS)
def test_signal_kill_message(version: str) -> None:
    sig, = (t for t in from_json(f"condor_history-{version}.json").values()
            if t.exit_code is None)
    assert sig.message == "The job was killed by signal 9"


@pytest.mark.parametrize("version", VERSIONS)
def test_history_times_are_rfc3339(version: str) -> None:
    for task in from_json(f"condor_history-{version}.json").values():
        assert task.start_time and task.start_time.endswith("Z")
        assert task.end_time and task.end_time >= task.start_time


@pytest.mark.parametrize("version", VERSIONS)
def test_removed_jobs_after_condor_rm(version: str) -> None:
    tasks = from_af(f"condor_history-after-rm-{version}.txt")
    removed = [t for t in tasks.values() if t.outcome is Outcome.CANCELLED]
    # JobStatus is authoritative: a removed job carrying ExitCode 0 is still cancelled.
    assert len(removed) == 6
    assert all(t.reason is Reason.CANCELLED_ON_CLUSTER and "condor_rm" in t.message
               for t in removed)


def test_queue_4_with_one_proc_removed() -> None:
    procs = []
    for line in recorded("htcondor", "condor_history-queue4-23.9.6.txt").splitlines():
        job_id, status, code, *remove = line.split(" ")
        cluster, proc = job_id.split(".")
        procs.append(to_task(CondorRecord(int(cluster), int(proc), int(status), _value(code),
                                          remove_reason=" ".join(remove))))
    summary = aggregate.summarize(procs, expected=(), single=False, seconds_since_submit=99)
    assert summary.task_ids == ("19.0", "19.1", "19.2", "19.3")
    assert (summary.phase, summary.reason) == (Phase.FAILED, Reason.NON_ZERO_EXIT_CODE)
    assert (summary.succeeded, summary.failed, summary.cancelled) == (1, 2, 1)
    assert summary.message == "Task 19.1: The job exited with code 1."


def test_documented_fixture_is_labelled() -> None:
    first = (FIXTURES / "htcondor" / "documented.txt").read_text().splitlines()[0]
    assert first == "# written from HTCondor's documentation, not recorded"


@pytest.mark.parametrize(
    ("task_id", "outcome", "reason"),
    [
        pytest.param("301.0", Outcome.RUNNING, Reason.NONE, id="6-transferring-output"),
        pytest.param("302.0", Outcome.RUNNING, Reason.SUSPENDED, id="7-suspended"),
    ],
)
def test_documented_states(task_id: str, outcome: Outcome, reason: Reason) -> None:
    task = from_af("documented.txt")[task_id]
    assert (task.outcome, task.reason) == (outcome, reason)


# API doc: 1 Idle, 5 Held -> Pending; 2, 6, 7 -> Running; 4 -> by exit; 3 -> cancelled.
@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        pytest.param(1, Outcome.PENDING, id="1-idle"),
        pytest.param(2, Outcome.RUNNING, id="2-running"),
        pytest.param(3, Outcome.CANCELLED, id="3-removed"),
        pytest.param(4, Outcome.SUCCEEDED, id="4-completed"),
        pytest.param(5, Outcome.PENDING, id="5-held"),
        pytest.param(6, Outcome.RUNNING, id="6-transferring"),
        pytest.param(7, Outcome.RUNNING, id="7-suspended"),
    ],
)
def test_every_api_job_status_has_a_table_entry(status: int, outcome: Outcome) -> None:
    assert STATES[status][0] is outcome


@pytest.mark.parametrize(
    ("record", "outcome", "reason", "exit_code"),
    [
        pytest.param(CondorRecord(1, 0, 4, exit_code=0), Outcome.SUCCEEDED, Reason.NONE, 0,
                     id="exit-0"),
        pytest.param(CondorRecord(1, 0, 4, exit_code=3), Outcome.FAILED,
                     Reason.NON_ZERO_EXIT_CODE, 3, id="exit-3"),
        pytest.param(CondorRecord(1, 0, 4, exit_by_signal=True, exit_signal=9), Outcome.FAILED,
                     Reason.NON_ZERO_EXIT_CODE, None, id="signal"),
        pytest.param(CondorRecord(1, 0, 3, exit_code=0,
                                  remove_reason=f"PeriodicRemove '{TIME_LIMIT_MARKER}' TRUE"),
                     Outcome.FAILED, Reason.TIMEOUT, None, id="our-time-limit"),
        pytest.param(CondorRecord(1, 0, 3, exit_code=0, remove_reason="via condor_rm"),
                     Outcome.CANCELLED, Reason.CANCELLED_ON_CLUSTER, None,
                     id="removed-with-exit-0"),
        pytest.param(CondorRecord(1, 0, 5, exit_by_signal=True, exit_signal=15),
                     Outcome.PENDING, Reason.HELD, None, id="held-keeps-sigterm"),
    ],
)
def test_job_status_and_exit(
    record: CondorRecord, outcome: Outcome, reason: Reason, exit_code: int | None
) -> None:
    task = to_task(record)
    assert (task.outcome, task.reason, task.exit_code) == (outcome, reason, exit_code)


@pytest.mark.parametrize("status", [0, 8, 99, -1])
def test_unknown_job_status_is_reported_not_guessed(status: int) -> None:
    task = to_task(CondorRecord(15, 0, status))
    assert (task.outcome, task.reason) == (Outcome.UNKNOWN, Reason.UNKNOWN_STATE)
    assert str(status) in task.message
