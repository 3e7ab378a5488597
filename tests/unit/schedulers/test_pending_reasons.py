"""Why a pending job waits: SLURM's reasons and HTCondor's idle jobs mapped to typed reasons,
schedulerReason and the Scheduled condition, on recorded output."""

from __future__ import annotations

import json

import pytest

from hooks.core.status import aggregate
from hooks.core.status.record import Status, conditions, from_raw, to_raw
from hooks.core.values.phases import Outcome, Phase, TaskState
from hooks.core.values.reasons import Reason
from hooks.schedulers.htcondor.parse import parse_ads
from hooks.schedulers.htcondor.states import to_task as condor_task
from hooks.schedulers.slurm import reasons
from hooks.schedulers.slurm.parse import parse_squeue
from hooks.schedulers.slurm.states import SlurmRecord, to_task
from tests.unit.conftest import recorded

NOW = "2026-11-27T00:15:00Z"


def pending(reason: str, partition: str = "debug") -> TaskState:
    return to_task(SlurmRecord("7", "PENDING", reason, "", "2026-11-27T00:14:20", "N/A", "N/A",
                               partition))


def test_recorded_squeue_reasons() -> None:
    found = parse_squeue(recorded("slurm", "squeue-reasons.txt"))
    tasks = {name: to_task(records[0]) for name, records in found.items()}
    assert {name: (t.reason, t.scheduler_reason) for name, t in tasks.items()} == {
        "rsn-begin": (Reason.WAITING_FOR_START_TIME, "BeginTime"),
        "rsn-dep": (Reason.WAITING_FOR_DEPENDENCY, "Dependency"),
        "rsn-held": (Reason.HELD, "JobHeldUser"),
        "rsn-arr": (Reason.NONE, ""),
    }
    assert tasks["rsn-dep"].message == (
        "SLURM starts it once the jobs it depends on have ended as it asks (Dependency)")


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("Priority", Reason.NONE),
        ("Resources", Reason.NONE),
        ("Dependency", Reason.WAITING_FOR_DEPENDENCY),
        ("BeginTime", Reason.WAITING_FOR_START_TIME),
        ("QOSMaxJobsPerUserLimit", Reason.LIMIT_REACHED),
        ("AssocGrpCpuLimit", Reason.LIMIT_REACHED),
        ("AssocMaxJobsLimit", Reason.LIMIT_REACHED),
        ("QOSGrpNodeLimit", Reason.LIMIT_REACHED),
        ("MaxSubmitJobsPerAccount", Reason.LIMIT_REACHED),
        ("PartitionTimeLimit", Reason.UNSCHEDULABLE),
        ("PartitionNodeLimit", Reason.UNSCHEDULABLE),
        ("PartitionDown", Reason.UNSCHEDULABLE),
        ("PartitionInactive", Reason.UNSCHEDULABLE),
        ("PartitionConfig", Reason.UNSCHEDULABLE),
        ("ReqNodeNotAvail, UnavailableNodes:node3", Reason.UNSCHEDULABLE),
        ("BadConstraints", Reason.UNSCHEDULABLE),
        ("DependencyNeverSatisfied", Reason.UNSCHEDULABLE),
        ("InvalidAccount", Reason.UNSCHEDULABLE),
        ("InvalidQOS", Reason.UNSCHEDULABLE),
        ("AssocMaxWallDurationPerJobLimit", Reason.UNSCHEDULABLE),
        ("QOSMaxCpuPerJobLimit", Reason.UNSCHEDULABLE),
        ("SomethingNew", Reason.NONE),
        ("None", Reason.NONE),
    ],
)
def test_slurm_reason_table(raw: str, reason: Reason) -> None:
    task = pending(raw)
    assert task.outcome is Outcome.PENDING
    assert task.reason is reason
    word = reasons.word(raw)
    assert task.scheduler_reason == word
    assert task.message.endswith(f"({word})") if word else task.message == "The job is queued"


def test_the_message_names_the_partition_and_what_to_change() -> None:
    assert pending("PartitionTimeLimit", "short").message == (
        "SLURM will not start it as submitted: its time limit is longer than partition short "
        "allows; ask for less (spec.resources.timeLimit) or another partition "
        "(spec.slurm.partition) (PartitionTimeLimit)")
    assert "spec.slurm.qos" in pending("QOSMaxJobsPerUserLimit").message


def test_an_unknown_reason_is_shown_raw_and_never_a_failure() -> None:
    task = pending("WaitingOnTheMoon")
    assert (task.outcome, task.reason, task.message) == (
        Outcome.PENDING, Reason.NONE, "The job is queued (WaitingOnTheMoon)")


def summary_of(*tasks: TaskState, single: bool = True) -> aggregate.Summary:
    return aggregate.summarize(tasks, expected=[t.task_id for t in tasks], single=single,
                               seconds_since_submit=5)


def test_an_array_waits_for_its_first_pending_task() -> None:
    first = pending("Dependency")
    second = TaskState("7_1", Outcome.PENDING, message="x", scheduler_reason="Priority")
    summary = summary_of(first, second, single=False)
    assert (summary.phase, summary.reason, summary.scheduler_reason) == (
        Phase.PENDING, Reason.WAITING_FOR_DEPENDENCY, "Dependency")


def test_a_running_attempt_carries_no_scheduler_reason() -> None:
    running = TaskState("7_0", Outcome.RUNNING, start_time=NOW)
    assert summary_of(running, pending("Priority"), single=False).scheduler_reason == ""


def scheduled(status: Status) -> dict[str, str]:
    found, = (c for c in conditions(status) if c["type"] == "Scheduled")
    return found


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        pytest.param(Status(), ("False", "NotSubmitted"), id="new"),
        pytest.param(Status(job_ids=("7",)), ("False", "Queued"), id="queued"),
        pytest.param(Status(job_ids=("7",), reason=Reason.UNSCHEDULABLE, message="m"),
                     ("False", "Unschedulable"), id="unschedulable"),
        pytest.param(Status(job_ids=("7",), reason=Reason.HELD), ("False", "Held"), id="held"),
        pytest.param(Status(phase=Phase.RUNNING, job_ids=("7",), start_time=NOW),
                     ("True", "Scheduled"), id="running"),
        pytest.param(Status(phase=Phase.SUCCEEDED, job_ids=("7",), start_time=NOW),
                     ("True", "Scheduled"), id="ended"),
        pytest.param(Status(phase=Phase.CANCELLED, job_ids=("7",)), ("False", "Cancelled"),
                     id="cancelled-before-start"),
    ],
)
def test_scheduled_condition(status: Status, expected: tuple[str, str]) -> None:
    found = scheduled(status)
    assert (found["status"], found["reason"]) == expected


def test_scheduled_false_carries_the_message() -> None:
    status = Status(job_ids=("7",), reason=Reason.LIMIT_REACHED, message="QOS limit.")
    assert scheduled(status)["message"] == "QOS limit."


def test_scheduler_reason_round_trips_and_hostile_ones_are_dropped() -> None:
    status = Status(job_ids=("7",), scheduler_reason="PartitionTimeLimit")
    raw = to_raw(status, previous=None, now=NOW)
    assert raw["schedulerReason"] == "PartitionTimeLimit"
    assert from_raw(raw, {}).scheduler_reason == "PartitionTimeLimit"
    assert "schedulerReason" not in to_raw(Status(), previous=None, now=NOW)
    for hostile in ("\x1b[2J", "x" * 300, 17, ["a"]):
        assert from_raw({"schedulerReason": hostile}, {}).scheduler_reason == ""
    escaped = to_raw(Status(scheduler_reason="a\x1bb"), previous=None, now=NOW)
    assert escaped["schedulerReason"] == "a\\x1bb"


CONDOR = "condor_q-analysis-23.9.6.txt"
JOBS = {
    # QUEUE_PROGRAM's output recorded on each version, and the cluster ids its jobs got there.
    "condor_q-analysis-23.9.6.txt": {"blocker": 99, "behind": 100, "memory": 101, "cpus": 102,
                                     "arm": 103},
    "condor_q-analysis-25.14.1.txt": {"blocker": 2, "behind": 3, "memory": 4, "cpus": 5,
                                      "arm": 6},
}
VERSIONS = pytest.mark.parametrize("recording", list(JOBS))


def condor_tasks(text: str) -> dict[str, TaskState]:
    return {t.task_id: t for t in (condor_task(r) for _, r in parse_ads(text))}


def recorded_jobs(recording: str) -> dict[str, TaskState]:
    """The tasks of a recording, by job (``memory.1`` is proc 1 of the job ``memory``)."""
    tasks = condor_tasks(recorded("htcondor", recording))
    return {f"{job}.{proc}" if proc else job: tasks[f"{cluster}.{proc}"]
            for job, cluster in JOBS[recording].items() for proc in (0, 1)
            if f"{cluster}.{proc}" in tasks}


@VERSIONS
def test_htcondor_requirements_no_machine_meets_are_unschedulable(recording: str) -> None:
    tasks = recorded_jobs(recording)
    memory = tasks["memory"]
    assert (memory.outcome, memory.reason, memory.scheduler_reason) == (
        Outcome.PENDING, Reason.UNSCHEDULABLE, "no match found")
    assert memory.message == (
        "HTCondor will not start it as submitted: no machine of the pool meets its requirement "
        "Memory > 100000000, even with all of its resources free; change what it asks for "
        "(spec.resources, spec.htcondor.submitOptions) (no match found)")
    # Its sibling of the same autocluster was not analysed, nor passed over itself.
    assert (tasks["memory.1"].reason, tasks["memory.1"].message) == (Reason.UNSCHEDULABLE,
                                                                     memory.message)
    assert tasks["cpus"].message.startswith(
        "HTCondor will not start it as submitted: no machine of the pool meets its requirement "
        "TARGET.Cpus >= RequestCpus (RequestCpus = 64), even")
    assert tasks["arm"].message.startswith(
        "HTCondor will not start it as submitted: no machine of the pool meets its requirements "
        'TARGET.Arch == "ARM" and TARGET.Memory >= RequestMemory '
        "(RequestMemory = 200000000 (mb)), even")


@VERSIONS
def test_htcondor_idle_behind_others_is_ordinary_queueing(recording: str) -> None:
    """4 CPUs asked of a partitionable slot with 3 free: its totals meet the Requirements."""
    tasks = recorded_jobs(recording)
    assert (tasks["behind"].reason, tasks["behind"].message) == (
        Reason.NONE, "HTCondor queues it until a machine that matches is free (no match found)")
    assert tasks["blocker"].outcome is Outcome.RUNNING


@VERSIONS
def test_htcondor_without_the_analysis_judges_nothing(recording: str) -> None:
    queue_only = recorded("htcondor", recording).partition("hpcbridge: analysis")[0]
    assert {t.reason for t in condor_tasks(queue_only).values()} == {Reason.NONE}


@pytest.mark.parametrize("cut", ["Of 1 machines,", "      1 are rejected by your job's"])
def test_htcondor_an_analysis_without_its_summary_judges_nothing(cut: str) -> None:
    text = recorded("htcondor", CONDOR)
    block = text.index("The Requirements expression for job 101.000 is")
    broken = text[:block] + text[block:].replace(cut, "", 1)
    assert condor_tasks(broken)["101.0"].reason is Reason.NONE
    assert condor_tasks(broken)["102.0"].reason is Reason.UNSCHEDULABLE


def test_htcondor_requirements_no_machine_meets_together() -> None:
    """Every clause is met by some machine, never all of them by one."""
    text = recorded("htcondor", CONDOR).replace(
        "[0]           0  Memory > 100000000", "[0]           1  Memory > 100000000")
    message = condor_tasks(text)["101.0"].message
    assert message.startswith(
        "HTCondor will not start it as submitted: no machine of the pool meets all of its "
        "requirements together, even with all of its resources free;"), message


def test_htcondor_a_long_clause_is_cut() -> None:
    clause = "Memory > 1" + "0" * 300
    text = recorded("htcondor", CONDOR).replace("Memory > 100000000", clause)
    message = condor_tasks(text)["101.0"].message
    assert f"its requirement {clause[:197]}..., even" in message


@pytest.mark.parametrize(
    ("rejected", "reason"),
    [
        ("concurrency limit LICENSE reached", Reason.LIMIT_REACHED),
        ("submitter limit exceeded", Reason.LIMIT_REACHED),
        ("insufficient priority", Reason.NONE),
        ("", Reason.NONE),
    ],
)
def test_htcondor_rejections(rejected: str, reason: Reason) -> None:
    ad = {"ClusterId": 5, "ProcId": 0, "JobStatus": 1, "LastRejMatchReason": rejected}
    [(_, record)] = parse_ads(json.dumps([ad]))
    task = condor_task(record)
    assert (task.reason, task.scheduler_reason) == (reason, rejected)


def test_htcondor_a_job_that_matched_before_is_not_judged() -> None:
    analysed = recorded("htcondor", CONDOR).partition("hpcbridge: analysis\n")[2]
    ad = {"ClusterId": 101, "ProcId": 0, "JobStatus": 1, "NumJobMatches": 2,
          "LastRejMatchReason": "no match found", "AutoClusterId": 64}
    [(_, record)] = parse_ads(f"{json.dumps([ad])}\nhpcbridge: analysis\n{analysed}")
    assert record.unmet is not None and condor_task(record).reason is Reason.NONE
