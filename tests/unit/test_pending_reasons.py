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


CONDOR = "condor_q-idle-slots-23.9.6.txt"


def test_htcondor_idle_beyond_every_slot_is_unschedulable() -> None:
    tasks = {t.task_id: t for t in (condor_task(r) for _, r in parse_ads(recorded("htcondor",
                                                                                   CONDOR)))}
    beyond = tasks["121.0"]
    assert (beyond.outcome, beyond.reason, beyond.scheduler_reason) == (
        Outcome.PENDING, Reason.UNSCHEDULABLE, "no match found")
    assert beyond.message.startswith(
        "HTCondor will not start it as submitted: no machine of the pool has 64 CPUs in total")
    # Requirements beyond the requests are not judged: ordinary queueing, said in words.
    within = tasks["120.0"]
    assert (within.reason, within.message) == (
        Reason.NONE, "HTCondor queues it until a machine that matches is free (no match found)")


def test_htcondor_without_the_slots_judges_nothing() -> None:
    queue_only = recorded("htcondor", CONDOR).partition("hpcbridge: slots")[0]
    assert {condor_task(r).reason for _, r in parse_ads(queue_only)} == {Reason.NONE}


def test_htcondor_slots_that_do_not_parse_judge_nothing() -> None:
    broken = recorded("htcondor", CONDOR).partition("hpcbridge: slots")[0] + (
        "\nhpcbridge: slots\nError: no collector\n")
    assert {condor_task(r).reason for _, r in parse_ads(broken)} == {Reason.NONE}


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
    ad = ('[{"ClusterId": 5, "ProcId": 0, "JobStatus": 1, "NumJobMatches": 2, '
          '"LastRejMatchReason": "no match found", "RequestCpus": 64}]\n'
          'hpcbridge: slots\n[{"TotalSlotCpus": 4, "TotalSlotMemory": 100, "Cpus": 1}]\n')
    [(_, record)] = parse_ads(ad)
    assert condor_task(record).reason is Reason.NONE
