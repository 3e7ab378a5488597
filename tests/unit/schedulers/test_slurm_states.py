"""SLURM job states, hold reasons and exit codes mapped as the BatchJob API says, and the
squeue/sacct parsers run on recorded output (tests/unit/fixtures/slurm)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hooks.core.status import aggregate
from hooks.core.values.phases import Outcome, Phase
from hooks.core.values.reasons import Reason
from hooks.schedulers.slurm.commands import SACCT_FIELDS, SQUEUE_FORMAT
from hooks.schedulers.slurm.parse import parse_sacct, parse_squeue
from hooks.schedulers.slurm.states import SlurmRecord, to_task
from tests.unit.conftest import FIXTURES, recorded

REPO = Path(__file__).resolve().parents[3]
API_DOC = REPO / "docs" / "batchjob-api.md"

# The SLURM states the API doc (batchjob-api.md, "SLURM states map" and the reasons table) names,
# with the outcome and reason each maps to. Where the doc fixes no reason, a state carries none,
# except REQUEUE_HOLD, held like a pending job with a hold reason.
API_STATES: dict[str, tuple[Outcome, Reason]] = {
    "PENDING": (Outcome.PENDING, Reason.NONE),
    "CONFIGURING": (Outcome.PENDING, Reason.NONE),
    "REQUEUED": (Outcome.PENDING, Reason.NONE),
    "RESIZING": (Outcome.PENDING, Reason.NONE),
    "REQUEUE_HOLD": (Outcome.PENDING, Reason.HELD),
    "REQUEUE_FED": (Outcome.PENDING, Reason.NONE),
    "RUNNING": (Outcome.RUNNING, Reason.NONE),
    "COMPLETING": (Outcome.RUNNING, Reason.NONE),
    "SIGNALING": (Outcome.RUNNING, Reason.NONE),
    "STAGE_OUT": (Outcome.RUNNING, Reason.NONE),
    "SUSPENDED": (Outcome.RUNNING, Reason.SUSPENDED),
    "STOPPED": (Outcome.RUNNING, Reason.NONE),
    "COMPLETED": (Outcome.SUCCEEDED, Reason.NONE),
    "FAILED": (Outcome.FAILED, Reason.NON_ZERO_EXIT_CODE),
    "TIMEOUT": (Outcome.FAILED, Reason.TIMEOUT),
    "DEADLINE": (Outcome.FAILED, Reason.TIMEOUT),
    "OUT_OF_MEMORY": (Outcome.FAILED, Reason.OUT_OF_MEMORY),
    "NODE_FAIL": (Outcome.FAILED, Reason.NODE_FAIL),
    "BOOT_FAIL": (Outcome.FAILED, Reason.BOOT_FAIL),
    "PREEMPTED": (Outcome.FAILED, Reason.PREEMPTED),
    "CANCELLED": (Outcome.CANCELLED, Reason.CANCELLED_ON_CLUSTER),
}

# States beyond the doc's list that hold a job until someone acts: Held, like REQUEUE_HOLD.
HELD_BEYOND_THE_DOC = {
    "RESV_DEL_HOLD": (Outcome.PENDING, Reason.HELD),
    "SPECIAL_EXIT": (Outcome.PENDING, Reason.HELD),
}

# The phase a single job in each state shows (API doc: phases and the reasons table).
API_PHASES = {
    Outcome.PENDING: Phase.PENDING,
    Outcome.RUNNING: Phase.RUNNING,
    Outcome.SUCCEEDED: Phase.SUCCEEDED,
    Outcome.FAILED: Phase.FAILED,
    Outcome.CANCELLED: Phase.CANCELLED,
}


def record(state: str, reason: str = "None", exit_code: str = "") -> SlurmRecord:
    return SlurmRecord("42", state, reason, exit_code, "2026-11-22T05:26:50",
                       "2026-11-22T05:26:51", "2026-11-22T05:26:53")


def api_doc_states() -> set[str]:
    text = API_DOC.read_text()
    paragraph = text[text.index("SLURM states map"):]
    paragraph = paragraph[: paragraph.index("HTCondor JobStatus")]
    table = [line for line in text.splitlines() if line.startswith("|") and "SLURM" in line]
    tokens = re.findall(r"\b[A-Z][A-Z_]{3,}\b", paragraph + "\n".join(table))
    return set(tokens) - {"SLURM"}


def test_the_embedded_list_is_the_api_docs_list() -> None:
    assert api_doc_states() == set(API_STATES)


@pytest.mark.parametrize(
    ("state", "outcome", "reason"),
    [pytest.param(state, *mapped, id=state)
     for state, mapped in {**API_STATES, **HELD_BEYOND_THE_DOC}.items()],
)
def test_state_maps_as_the_api_doc_says(state: str, outcome: Outcome, reason: Reason) -> None:
    task = to_task(record(state))
    assert (task.outcome, task.reason) == (outcome, reason)


@pytest.mark.parametrize(
    ("state", "outcome"),
    [pytest.param(state, mapped[0], id=state) for state, mapped in API_STATES.items()],
)
def test_single_job_phase(state: str, outcome: Outcome) -> None:
    summary = aggregate.summarize(
        [to_task(record(state, exit_code="0:0"))], expected=("42",), single=True,
        seconds_since_submit=5,
    )
    assert summary.phase is API_PHASES[outcome]


@pytest.mark.parametrize(
    ("state", "reason", "expected"),
    [
        pytest.param("PENDING", "JobHeldUser", Reason.HELD, id="held-by-user"),
        pytest.param("PENDING", "JobHeldAdmin", Reason.HELD, id="held-by-admin"),
        pytest.param("PENDING", "Priority", Reason.NONE, id="priority-is-not-held"),
        pytest.param("PENDING", "Resources", Reason.NONE, id="resources-is-not-held"),
        pytest.param("PENDING", "None", Reason.NONE, id="no-reason"),
        pytest.param("RUNNING", "JobHeldUser", Reason.NONE, id="running-is-never-held"),
        pytest.param("CONFIGURING", "JobHeldAdmin", Reason.HELD, id="any-pending-state"),
    ],
)
def test_hold_reasons(state: str, reason: str, expected: Reason) -> None:
    task = to_task(record(state, reason))
    assert task.reason is expected
    if expected is Reason.HELD:
        assert reason in task.message


def test_held_job_is_a_pending_phase_with_reason_held() -> None:
    summary = aggregate.summarize([to_task(record("PENDING", "JobHeldUser"))],
                                  expected=("42",), single=True, seconds_since_submit=5)
    assert (summary.phase, summary.reason) == (Phase.PENDING, Reason.HELD)


@pytest.mark.parametrize(
    ("state", "message"),
    [
        pytest.param("CANCELLED by 1001", "The job was cancelled on the cluster (by 1001)",
                     id="by-uid"),
        pytest.param("CANCELLED", "The job was cancelled on the cluster", id="plain"),
    ],
)
def test_cancelled(state: str, message: str) -> None:
    task = to_task(record(state, exit_code="0:0"))
    assert (task.outcome, task.reason, task.message) == (
        Outcome.CANCELLED, Reason.CANCELLED_ON_CLUSTER, message
    )


@pytest.mark.parametrize(
    ("state", "exit_code", "code", "message"),
    [
        pytest.param("FAILED", "3:0", 3, "The job exited with code 3", id="exit-3"),
        pytest.param("FAILED", "7:0", 7, "The job exited with code 7", id="exit-7"),
        pytest.param("FAILED", "0:9", None, "The job failed with exit status 0:9 (code:signal)",
                     id="signal-9"),
        pytest.param("FAILED", "0:53", None,
                     "The job failed with exit status 0:53 (code:signal)", id="output-dir-missing"),
        pytest.param("COMPLETED", "0:0", 0, "", id="success"),
        pytest.param("FAILED", "", None, "The job failed", id="no-exit-code"),
        pytest.param("FAILED", "x:y", None, "The job failed", id="garbage"),
        pytest.param("RUNNING", "0:0", None, "", id="not-while-active"),
    ],
)
def test_exit_codes(state: str, exit_code: str, code: int | None, message: str) -> None:
    task = to_task(record(state, exit_code=exit_code))
    assert task.exit_code == code
    assert task.message == message


@pytest.mark.parametrize(
    "state",
    [
        pytest.param("REVOKED", id="revoked"),
        pytest.param("SOME_FUTURE_STATE", id="future"),
        pytest.param("", id="empty"),
        pytest.param("running", id="lowercase"),
    ],
)
def test_unknown_state_is_reported_not_guessed(state: str) -> None:
    task = to_task(record(state))
    assert task.outcome is Outcome.UNKNOWN
    assert task.reason is Reason.UNKNOWN_STATE
    assert repr(state) in task.message
    summary = aggregate.summarize([task], expected=("42",), single=True, seconds_since_submit=5)
    assert summary.phase is Phase.UNKNOWN
    assert repr(state) in summary.message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("2026-11-22T05:26:51", "2026-11-22T05:26:51Z", id="iso"),
        pytest.param("N/A", None, id="n-a"),
        pytest.param("NONE", None, id="none-upper"),
        pytest.param("None", None, id="none"),
        pytest.param("Unknown", None, id="unknown"),
        pytest.param("", None, id="empty"),
    ],
)
def test_times(text: str, expected: str | None) -> None:
    task = to_task(SlurmRecord("1", "COMPLETED", "", "0:0", text, text, text))
    assert (task.submit_time, task.start_time, task.end_time) == (expected,) * 3


def test_active_job_has_no_end_time() -> None:
    task = to_task(SlurmRecord("1", "RUNNING", "", "", "", "2026-11-22T05:26:51",
                               "2026-11-22T06:26:51"))
    assert task.end_time is None


def test_pending_job_has_no_start_time() -> None:
    queued = parse_squeue(recorded("slurm", "squeue-documented.txt"))["doc-planned"]
    assert to_task(queued[0]).start_time is None


def test_formats_have_their_fields() -> None:
    assert len(SQUEUE_FORMAT.split("|")) == 9
    assert len(SACCT_FIELDS.split(",")) == 14


def test_parse_squeue_recorded() -> None:
    found = parse_squeue(recorded("slurm", "squeue.txt"))
    assert sorted(found) == [
        "jsonfail", "parr", "probe1795325210-array", "probe1795325210-held",
        "probe1795325210-ok",
    ]
    tasks = {name: [to_task(r) for r in records] for name, records in found.items()}
    held, = tasks["probe1795325210-held"]
    assert (held.task_id, held.outcome, held.reason) == ("8", Outcome.PENDING, Reason.HELD)
    assert held.start_time is None
    ok, = tasks["probe1795325210-ok"]
    assert (ok.outcome, ok.start_time, ok.end_time) == (
        Outcome.RUNNING, "2026-11-22T05:26:51Z", None
    )
    array_task, = tasks["probe1795325210-array"]
    assert (array_task.task_id, array_task.outcome) == ("7_0", Outcome.RUNNING)
    failed, = tasks["jsonfail"]
    assert (failed.outcome, failed.reason, failed.end_time) == (
        Outcome.FAILED, Reason.NON_ZERO_EXIT_CODE, "2026-11-22T05:26:20Z"
    )
    assert [t.task_id for t in tasks["parr"]] == ["2_0", "2_1", "2_2", "2_3"]
    assert {(t.outcome, t.reason) for t in tasks["parr"]} == {(Outcome.PENDING, Reason.HELD)}


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("# a comment line\n", id="comment"),
        pytest.param("slurm_load_jobs error: Invalid job id specified\n", id="error-line"),
        pytest.param("4|x|RUNNING|None\n", id="too-few-fields"),
    ],
)
def test_parse_squeue_skips_lines_that_are_not_records(text: str) -> None:
    assert parse_squeue(text) == {}


def test_parse_squeue_strips_padding() -> None:
    found = parse_squeue("  4|n|RUNNING|None||N/A|NONE|4   \r\n")
    assert [r.task_id for r in found["n"]] == ["4"]


def test_parse_sacct_recorded() -> None:
    found = parse_sacct(recorded("slurm", "sacct.txt"))
    tasks = {t.task_id: t for records in found.values() for t in map(to_task, records)}
    assert (tasks["4"].outcome, tasks["4"].exit_code) == (Outcome.SUCCEEDED, 0)
    assert (tasks["5"].outcome, tasks["5"].reason, tasks["5"].exit_code) == (
        Outcome.FAILED, Reason.NON_ZERO_EXIT_CODE, 3
    )
    assert tasks["5"].submit_time == "2026-11-22T05:26:50Z"
    assert (tasks["6"].outcome, tasks["6"].reason) == (
        Outcome.CANCELLED, Reason.CANCELLED_ON_CLUSTER
    )
    assert "by 1001" in tasks["6"].message
    assert (tasks["8"].outcome, tasks["8"].start_time, tasks["8"].end_time) == (
        Outcome.CANCELLED, None, "2026-11-22T05:28:48Z"
    )
    assert (tasks["9"].outcome, tasks["9"].reason) == (Outcome.FAILED, Reason.TIMEOUT)
    assert (tasks["7_0"].outcome, tasks["7_2"].outcome, tasks["7_2"].exit_code) == (
        Outcome.SUCCEEDED, Outcome.FAILED, 7
    )


def test_parse_sacct_expands_compressed_array_records() -> None:
    parr = parse_sacct(recorded("slurm", "sacct.txt"))["parr"]
    assert [r.task_id for r in parr] == ["2_0", "2_2", "2_3"]
    assert {to_task(r).outcome for r in parr} == {Outcome.CANCELLED}


@pytest.mark.parametrize(
    ("job_id", "expected"),
    [
        pytest.param("2_[0,2-3]", ["2_0", "2_2", "2_3"], id="list-and-range"),
        pytest.param("7_[5-7%2]", ["7_5", "7_6", "7_7"], id="throttled"),
        pytest.param("7_[0-6:3]", ["7_0", "7_3", "7_6"], id="stepped"),
        pytest.param("7_4", ["7_4"], id="one-task"),
        pytest.param("7", ["7"], id="plain-job"),
        pytest.param("7_[x]", ["7_[x]"], id="unparsable-kept-whole"),
    ],
)
def test_parse_sacct_task_ids(job_id: str, expected: list[str]) -> None:
    found = parse_sacct(f"{job_id}|n|PENDING|0:0||None|Unknown|None\n")
    assert [r.task_id for r in found["n"]] == expected


def test_array_on_recorded_sacct_aggregates_to_the_first_failed_task() -> None:
    found = parse_sacct(recorded("slurm", "sacct.txt"))
    array = [to_task(r) for r in found["probe1795325210-array"]]
    summary = aggregate.summarize(array, expected=(), single=False, seconds_since_submit=99)
    assert (summary.phase, summary.reason, summary.succeeded, summary.failed) == (
        Phase.FAILED, Reason.NON_ZERO_EXIT_CODE, 1, 1
    )
    assert summary.message == "Task 7_2: The job exited with code 7."
    assert summary.exit_code is None


def test_documented_fixture_is_labelled() -> None:
    for name in ("documented.txt", "squeue-documented.txt"):
        first = (FIXTURES / "slurm" / name).read_text().splitlines()[0]
        assert first == "# written from SLURM's documentation, not recorded"


@pytest.mark.parametrize(
    ("task_id", "outcome", "reason"),
    [
        pytest.param("101", Outcome.FAILED, Reason.OUT_OF_MEMORY, id="OUT_OF_MEMORY"),
        pytest.param("102", Outcome.FAILED, Reason.NODE_FAIL, id="NODE_FAIL"),
        pytest.param("103", Outcome.FAILED, Reason.BOOT_FAIL, id="BOOT_FAIL"),
        pytest.param("104", Outcome.FAILED, Reason.PREEMPTED, id="PREEMPTED"),
        pytest.param("105", Outcome.FAILED, Reason.TIMEOUT, id="DEADLINE"),
        pytest.param("106", Outcome.RUNNING, Reason.SUSPENDED, id="SUSPENDED"),
    ],
)
def test_documented_states(task_id: str, outcome: Outcome, reason: Reason) -> None:
    found = parse_sacct(recorded("slurm", "documented.txt"))
    task, = (to_task(r) for records in found.values() for r in records if r.task_id == task_id)
    assert (task.outcome, task.reason) == (outcome, reason)
    assert task.message


def test_documented_squeue_states() -> None:
    found = parse_squeue(recorded("slurm", "squeue-documented.txt"))
    suspended, = map(to_task, found["doc-suspended"])
    assert (suspended.outcome, suspended.reason, suspended.end_time) == (
        Outcome.RUNNING, Reason.SUSPENDED, None
    )
    requeue_hold, = map(to_task, found["doc-requeue-hold"])
    assert (requeue_hold.outcome, requeue_hold.reason) == (Outcome.PENDING, Reason.HELD)
