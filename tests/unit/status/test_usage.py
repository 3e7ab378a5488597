"""What an ended attempt used: sacct's and condor_history's accounting on recorded output,
summed over an array's tasks, and carried in status byte for byte."""

from __future__ import annotations

import json

import pytest

from hooks.core.status import aggregate
from hooks.core.status.record import Status, from_raw, to_raw
from hooks.core.status.usage import MAX_NODES, Usage, summed
from hooks.core.values.phases import Outcome, Phase, TaskState, TaskUsage
from hooks.schedulers.htcondor.parse import parse_ads
from hooks.schedulers.htcondor.states import to_task as condor_task
from hooks.schedulers.registry import REGISTRY
from hooks.schedulers.slurm.parse import merge, parse_sacct
from hooks.schedulers.slurm.states import SlurmRecord, to_task
from tests.unit.conftest import recorded

MIB = 1 << 20


def slurm_tasks() -> dict[str, list[TaskState]]:
    found = parse_sacct(recorded("slurm", "sacct-usage.txt"))
    return {name: [to_task(r) for r in records] for name, records in found.items()}


def test_sacct_usage_of_a_job_that_held_200_mib_for_40_s() -> None:
    [task] = slurm_tasks()["rsn-mem"]
    assert task.usage == TaskUsage(queue_seconds=2, elapsed_seconds=40, cpu_seconds=0.096,
                                   max_rss_bytes=214708 * 1024, nodes=("vm",), cpus=1,
                                   memory_bytes=512 * MIB)
    assert abs(task.usage.max_rss_bytes - 200 * MIB) < 0.2 * 200 * MIB


def test_a_job_shorter_than_one_sample_has_no_max_rss() -> None:
    [task] = slurm_tasks()["hpcb-short"]
    assert task.usage is not None and task.usage.max_rss_bytes is None


def test_the_steps_are_no_tasks_of_their_own() -> None:
    assert "batch" not in slurm_tasks()
    assert [t.task_id for t in slurm_tasks()["rsn-arr"]] == ["280_0", "280_1"]


def test_an_array_usage_is_summed_over_its_tasks() -> None:
    tasks = slurm_tasks()["rsn-arr"]
    summary = aggregate.summarize(tasks, expected=["280_0", "280_1"], single=False,
                                  seconds_since_submit=60)
    assert summary.phase is Phase.SUCCEEDED
    assert summary.usage == Usage(queue_seconds=0, elapsed_seconds=35, cpu_seconds=0.1,
                                  max_rss_bytes=61016 * 1024, nodes=("vm",),
                                  cpu_efficiency=0.0, memory_efficiency=0.01)


def test_squeue_records_carry_no_usage_and_active_tasks_none() -> None:
    running = TaskState("7", Outcome.RUNNING, start_time="2026-11-27T00:00:00Z")
    summary = aggregate.summarize([running], expected=["7"], single=True,
                                  seconds_since_submit=60)
    assert summary.usage is None


def test_usage_waits_for_every_task_that_ran() -> None:
    ended = TaskState("7_0", Outcome.SUCCEEDED, start_time="2026-11-27T00:00:00Z",
                      usage=TaskUsage(elapsed_seconds=3))
    unread = TaskState("7_1", Outcome.SUCCEEDED, start_time="2026-11-27T00:00:00Z")
    never = TaskState("7_2", Outcome.CANCELLED)
    summary = aggregate.summarize([ended, never], expected=["7_0", "7_2"], single=False,
                                  seconds_since_submit=60)
    assert summary.usage == Usage(elapsed_seconds=3)
    assert aggregate.summarize([ended, unread], expected=["7_0", "7_1"], single=False,
                               seconds_since_submit=60).usage is None


def test_a_signal_ended_job_says_which() -> None:
    text = ("9|hpcb-x|FAILED|0:9|2026-11-27T00:07:14|2026-11-27T00:07:15|"
            "2026-11-27T00:08:33|None|00:01:18|00:00.001||vm|1|4G\n")
    [task] = [to_task(r) for r in parse_sacct(text)["hpcb-x"]]
    summary = aggregate.summarize([task], expected=["9"], single=True, seconds_since_submit=90)
    assert (summary.phase, summary.exit_code, summary.signal) == (Phase.FAILED, None, 9)


def test_condor_history_usage_of_a_job_that_held_200_mib_for_40_s() -> None:
    [(_, record)] = parse_ads(recorded("htcondor", "condor_history-usage-23.9.6.json"))
    task = condor_task(record)
    assert task.outcome is Outcome.SUCCEEDED
    assert task.usage == TaskUsage(queue_seconds=1, elapsed_seconds=40, cpu_seconds=0.0,
                                   max_rss_bytes=225000 * 1024, nodes=("vm",), cpus=1,
                                   memory_bytes=1024 * MIB)
    assert summed([task.usage]) == Usage(1, 40, 0.0, 225000 * 1024, ("vm",), 0.0, 0.21)


def test_a_signal_ended_proc_says_which() -> None:
    [(_, record)] = parse_ads(json.dumps([{"ClusterId": 3, "ProcId": 0, "JobStatus": 4,
                                           "ExitBySignal": True, "ExitSignal": 9}]))
    assert condor_task(record).signal == 9


def test_nodes_are_sorted_and_capped() -> None:
    tasks = [TaskUsage(nodes=(f"n{i:03}",)) for i in range(40, 0, -1)]
    found = summed(tasks)
    assert found is not None and found.nodes == tuple(f"n{i:03}" for i in range(1, 17))
    assert len(found.nodes) == MAX_NODES


ENDED = Status(phase=Phase.SUCCEEDED, job_ids=("224",), attempt=1, backend="slurm",
               start_time="2026-11-27T00:08:43Z",
               usage=Usage(2, 40, 40.0, 214708 * 1024, ("vm",), 1.0, 0.41))


def test_usage_is_rendered_with_the_documented_names() -> None:
    raw = to_raw(ENDED, previous=None, now="2026-11-27T00:10:00Z")
    assert raw["usage"] == {"queueSeconds": 2, "elapsedSeconds": 40, "cpuSeconds": 40,
                            "maxRSSBytes": 214708 * 1024, "nodes": ["vm"],
                            "cpuEfficiency": 1, "memoryEfficiency": 0.41}


def test_usage_is_carried_byte_for_byte() -> None:
    raw = to_raw(ENDED, previous=None, now="2026-11-27T00:10:00Z")
    stored = json.loads(json.dumps(raw))
    again = to_raw(from_raw(stored, REGISTRY), previous=stored, now="2026-11-27T01:00:00Z")
    assert json.dumps(again, sort_keys=True) == json.dumps(stored, sort_keys=True)


@pytest.mark.parametrize(
    "hostile",
    [
        {"queueSeconds": -1, "cpuSeconds": "x", "maxRSSBytes": True, "nodes": [1, "", "a" * 300],
         "cpuEfficiency": 7, "memoryEfficiency": None},
        "garbage",
        [1, 2],
    ],
)
def test_hostile_stored_usage_is_dropped_field_by_field(hostile: object) -> None:
    usage = from_raw({"usage": hostile}, {}).usage
    assert usage is None or usage == Usage()


def test_a_completed_job_waits_for_its_accounting_when_sacct_lags() -> None:
    """squeue shows COMPLETED while sacct still says RUNNING, or does not list the task yet
    while it knows the job: the final record, with the usage, is a round away; without any
    accounting record, squeue's COMPLETED stands."""
    queued = SlurmRecord("7_1", "COMPLETED", start_time="2026-11-27T00:00:00")
    lagging = SlurmRecord("7_1", "RUNNING", start_time="2026-11-27T00:00:00")
    sibling = SlurmRecord("7_0", "COMPLETED", exit_code="0:0")
    for accounted in ({"7_1": lagging}, {"7_0": sibling}):
        assert to_task(merge({"7_1": queued}, accounted)["7_1"]).outcome is Outcome.RUNNING
    assert to_task(merge({"7_1": queued}, {})["7_1"]).outcome is Outcome.SUCCEEDED
