"""Aggregation of tasks (array tasks, HTCondor procs) into one phase, as the BatchJob API orders
it: any active -> Running if one runs, else Pending; else any failed -> Failed with the first
failed task's reason; else any cancelled -> Cancelled; else Succeeded."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict, Unpack

import pytest

from hooks.core.status.aggregate import NOT_VISIBLE_GRACE_SECONDS, Summary, summarize, task_order
from hooks.core.values.phases import Outcome, Phase, TaskState
from hooks.core.values.reasons import Reason

P, R, S, F, C, U = (Outcome.PENDING, Outcome.RUNNING, Outcome.SUCCEEDED, Outcome.FAILED,
                    Outcome.CANCELLED, Outcome.UNKNOWN)


class TaskFields(TypedDict, total=False):
    """The fields of a ``TaskState`` the tests set beyond its id, outcome and reason."""

    message: str
    exit_code: int | None
    submit_time: str | None
    start_time: str | None
    end_time: str | None


def task(
    task_id: str, outcome: Outcome, reason: Reason = Reason.NONE, **fields: Unpack[TaskFields]
) -> TaskState:
    return TaskState(task_id, outcome, reason, **fields)


def array(*outcomes: Outcome | tuple[Outcome, Reason]) -> list[TaskState]:
    tasks = []
    for index, item in enumerate(outcomes):
        outcome, reason = item if isinstance(item, tuple) else (item, Reason.NONE)
        tasks.append(task(f"7_{index}", outcome, reason, message=f"m{index}"))
    return tasks


def run(tasks: Sequence[TaskState], *, single: bool = False, since: float = 5) -> Summary:
    return summarize(tasks, expected=[t.task_id for t in tasks], single=single,
                     seconds_since_submit=since)


@pytest.mark.parametrize(
    ("tasks", "phase", "reason"),
    [
        pytest.param(array(R, P), Phase.RUNNING, Reason.NONE, id="one-runs"),
        pytest.param(array(P, P), Phase.PENDING, Reason.NONE, id="all-pending"),
        pytest.param(array(S, R, F), Phase.RUNNING, Reason.NONE, id="active-beats-failed"),
        pytest.param(array(C, P), Phase.PENDING, Reason.NONE, id="active-beats-cancelled"),
        pytest.param(array((P, Reason.HELD), P), Phase.PENDING, Reason.HELD,
                     id="pending-reason-of-first-pending"),
        pytest.param(array((R, Reason.SUSPENDED)), Phase.RUNNING, Reason.SUSPENDED,
                     id="suspended-runs"),
        pytest.param(array(S, (F, Reason.TIMEOUT), (F, Reason.OUT_OF_MEMORY)), Phase.FAILED,
                     Reason.TIMEOUT, id="first-failed-reason"),
        pytest.param(array(C, (F, Reason.NODE_FAIL)), Phase.FAILED, Reason.NODE_FAIL,
                     id="failed-beats-cancelled"),
        pytest.param(array(S, (C, Reason.CANCELLED_ON_CLUSTER)), Phase.CANCELLED,
                     Reason.CANCELLED_ON_CLUSTER, id="cancelled-beats-succeeded"),
        pytest.param(array(S, S, S, S), Phase.SUCCEEDED, Reason.NONE, id="all-succeeded"),
        pytest.param(array((U, Reason.UNKNOWN_STATE), R), Phase.RUNNING, Reason.NONE,
                     id="unknown-while-another-runs"),
        # The API doc's order does not mention Unknown; the code documents that a task in an
        # unknown state makes the finished job Unknown rather than a guess.
        pytest.param(array((U, Reason.UNKNOWN_STATE), S), Phase.UNKNOWN, Reason.UNKNOWN_STATE,
                     id="unknown-when-nothing-is-active"),
    ],
)
def test_phase_order(tasks: list[TaskState], phase: Phase, reason: Reason) -> None:
    summary = run(tasks)
    assert (summary.phase, summary.reason) == (phase, reason)


def test_first_failed_task_is_first_by_task_number_not_text() -> None:
    tasks = [task("7_10", F, Reason.OUT_OF_MEMORY), task("7_2", F, Reason.TIMEOUT, message="t")]
    summary = run(tasks)
    assert summary.reason is Reason.TIMEOUT
    assert summary.message == "Task 7_2: t."
    assert summary.task_ids == ("7_2", "7_10")


@pytest.mark.parametrize(
    ("ids", "ordered"),
    [
        pytest.param(["4242_10", "4242_9", "4242_0"], ["4242_0", "4242_9", "4242_10"],
                     id="slurm-array"),
        pytest.param(["15.10", "15.2", "9.0"], ["9.0", "15.2", "15.10"], id="htcondor-procs"),
        pytest.param(["100", "99"], ["99", "100"], id="plain-ids"),
    ],
)
def test_task_order(ids: list[str], ordered: list[str]) -> None:
    assert sorted(ids, key=task_order) == ordered


def test_counts() -> None:
    summary = run(array(P, R, R, S, F, F, F, C))
    assert (summary.active, summary.succeeded, summary.failed, summary.cancelled) == (3, 1, 3, 1)


@pytest.mark.parametrize(
    ("tasks", "single", "exit_code"),
    [
        pytest.param([task("42", S, exit_code=0)], True, 0, id="single-succeeded"),
        pytest.param([task("42", F, Reason.NON_ZERO_EXIT_CODE, exit_code=3)], True, 3,
                     id="single-failed"),
        pytest.param([task("42", R, exit_code=0)], True, None, id="single-before-the-end"),
        pytest.param([task("7_0", S, exit_code=0), task("7_1", S, exit_code=0)], False, None,
                     id="array"),
        pytest.param([task("7_0", S, exit_code=0)], False, None, id="array-of-one"),
        pytest.param([task("15.0", F, Reason.NON_ZERO_EXIT_CODE, exit_code=1)], False, None,
                     id="queue-n"),
    ],
)
def test_exit_code_only_for_a_single_job_after_the_end(
    tasks: list[TaskState], single: bool, exit_code: int | None
) -> None:
    assert run(tasks, single=single).exit_code == exit_code


def test_times_are_min_submit_min_start_max_end() -> None:
    tasks = [
        task("7_0", S, submit_time="2026-11-22T10:00:02Z", start_time="2026-11-22T10:00:09Z",
             end_time="2026-11-22T10:05:00Z"),
        task("7_1", F, Reason.NON_ZERO_EXIT_CODE, submit_time="2026-11-22T10:00:01Z",
             start_time="2026-11-22T10:00:05Z", end_time="2026-11-22T10:09:00Z"),
        task("7_2", C, Reason.CANCELLED_ON_CLUSTER, submit_time="2026-11-22T10:00:03Z",
             end_time="2026-11-22T10:01:00Z"),
    ]
    summary = run(tasks)
    assert (summary.submit_time, summary.start_time, summary.completion_time) == (
        "2026-11-22T10:00:01Z", "2026-11-22T10:00:05Z", "2026-11-22T10:09:00Z"
    )


def test_no_completion_time_while_a_task_is_active() -> None:
    tasks = [task("7_0", S, end_time="2026-11-22T10:05:00Z"),
             task("7_1", R, start_time="2026-11-22T10:00:05Z")]
    assert run(tasks).completion_time is None


@pytest.mark.parametrize(
    ("since", "phase", "reason", "active"),
    [
        pytest.param(0, Phase.PENDING, Reason.NONE, 4, id="just-submitted"),
        pytest.param(NOT_VISIBLE_GRACE_SECONDS - 0.1, Phase.PENDING, Reason.NONE, 4,
                     id="not-visible-yet"),
        pytest.param(NOT_VISIBLE_GRACE_SECONDS, Phase.UNKNOWN, Reason.JOB_NOT_FOUND, 0,
                     id="not-found-after-60s"),
        pytest.param(3600, Phase.UNKNOWN, Reason.JOB_NOT_FOUND, 0, id="long-gone"),
    ],
)
def test_nothing_visible(since: float, phase: Phase, reason: Reason, active: int) -> None:
    expected = ("7_0", "7_1", "7_2", "7_3")
    summary = summarize([], expected=expected, single=False, seconds_since_submit=since)
    assert (summary.phase, summary.reason, summary.active) == (phase, reason, active)
    assert summary.task_ids == expected
    assert summary.exit_code is None
    if reason is Reason.JOB_NOT_FOUND:
        assert "7_0" in summary.message and "60 s" in summary.message
    else:
        assert summary.message == "Task 7_0: The job is not visible on the cluster yet."


def test_not_visible_single_job_message() -> None:
    summary = summarize([], expected=("4242",), single=True, seconds_since_submit=1)
    assert summary.message == "The job is not visible on the cluster yet."


@pytest.mark.parametrize(
    ("tasks", "single", "message"),
    [
        pytest.param([task("42", S)], True, "The job completed.", id="single-success"),
        pytest.param(array(S, S, S), False, "All 3 tasks completed.", id="array-success"),
        pytest.param([task("42", R)], True, "The job is running.", id="running-default"),
        pytest.param([task("42", P)], True, "The job is queued.", id="pending-default"),
        pytest.param([task("42", F, Reason.TIMEOUT, message="The job ran past its time limit")],
                     True, "The job ran past its time limit.", id="one-sentence"),
    ],
)
def test_messages(tasks: list[TaskState], single: bool, message: str) -> None:
    assert run(tasks, single=single).message == message


def test_expected_tasks_that_are_missing_do_not_count_as_succeeded() -> None:
    summary = summarize([task("7_0", S)], expected=("7_0", "7_1", "7_2", "7_3"), single=False,
                        seconds_since_submit=120)
    assert (summary.phase, summary.succeeded, summary.active) == (Phase.PENDING, 1, 3)
    assert summary.message == "Task 7_1: The job is not visible on the cluster yet."


def test_a_heterogeneous_job_reports_its_components_instead_of_its_id() -> None:
    from hooks.core.status.aggregate import summarize as aggregate

    done = [TaskState("4242+0", Outcome.SUCCEEDED, exit_code=0),
            TaskState("4242+1", Outcome.SUCCEEDED, exit_code=0)]
    summary = aggregate(done, expected=("4242",), single=True, seconds_since_submit=5)
    assert (summary.phase, summary.task_ids) == (Phase.SUCCEEDED, ("4242+0", "4242+1"))
