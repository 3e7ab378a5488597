"""The sync decision past spec.activeDeadlineSeconds, driven effect by effect with results the
test makes up: which attempt is cancelled, once, and what the status says."""

from __future__ import annotations

import datetime

from hooks.core.decide import sync
from hooks.core.decide.effects import Cancel, MarkEnded, Query
from hooks.core.values.phases import Outcome, TaskState
from hooks.core.values.reasons import Reason
from hooks.core.wire import response
from tests.unit.builders import (
    ANOTHER_JOB,
    DOWN,
    LOGIN,
    SUBMITTED,
    T0,
    Loop,
    condition,
    drive,
    pending,
    queue,
    request,
    running,
    stored_status,
    submitted_loop,
)
from tests.unit.conftest import NOW, UID, call


def test_the_deadline_cancels_an_active_attempt() -> None:
    loop = submitted_loop(activeDeadlineSeconds=600, backoffLimit=3)
    loop.later(300)
    assert loop.sync(queue(running())).kinds == ["Query"]
    loop.later(300)
    run = loop.sync(queue(running()))
    assert run.kinds == ["Query", "Cancel", "Forget"]
    assert run.action(Cancel).job_ids == ("500",)
    status = run.status
    assert (status["phase"], status["reason"], status["active"], status["cancelled"]) == (
        "Failed", "DeadlineExceeded", 0, 1)
    assert "600 s" in status["message"] and "500" in status["message"]
    assert status["completionTime"] == response.format_time(loop.now)
    assert condition(run, "Failed")["status"] == "True"
    assert condition(run, "Failed")["reason"] == "DeadlineExceeded"
    assert "resyncAfterSeconds" not in run.answer.body
    assert loop.sync(SUBMITTED).actions == []  # not retried by backoffLimit


def test_the_deadline_counts_queue_time_and_cancels_each_job_once() -> None:
    loop = Loop(request({"slurm": {"array": "0-1"}, "activeDeadlineSeconds": 60}))
    loop.sync(SUBMITTED)
    loop.later(61)
    run = loop.sync(queue(pending(task="500_0"), running("500_1")))
    assert run.action(Cancel).job_ids == ("500",)
    assert run.status["cancelled"] == 2


def test_an_attempt_that_ended_by_itself_is_not_cancelled() -> None:
    loop = submitted_loop(activeDeadlineSeconds=60)
    loop.later(3600)
    run = loop.sync(queue(TaskState("500", Outcome.SUCCEEDED, exit_code=0)))
    assert run.kinds == ["Query", "Forget"]
    assert run.status["phase"] == "Succeeded"


def test_a_failed_cancel_keeps_what_was_observed_and_is_tried_again() -> None:
    loop = submitted_loop(activeDeadlineSeconds=60)
    loop.later(120)
    run = loop.sync({**queue(running()), Cancel: DOWN})
    assert run.kinds == ["Query", "Cancel"]
    assert (run.status["phase"], run.status["reason"]) == ("Running", "ClusterUnreachable")
    assert loop.sync(queue(running())).kinds == ["Query", "Cancel", "Forget"]


def test_moving_the_deadline_acts_on_the_current_attempt() -> None:
    loop = submitted_loop(activeDeadlineSeconds=60)
    loop.edit(activeDeadlineSeconds=7200)
    loop.later(120)
    run = loop.sync(queue(running()))
    assert run.kinds == ["Query"]
    assert "spec changed" not in run.status["message"]
    loop.edit(activeDeadlineSeconds=100)
    assert loop.sync(queue(running())).kinds == ["Query", "Cancel", "Forget"]


def test_a_held_attempt_is_cancelled_by_its_deadline_too() -> None:
    loop = submitted_loop(activeDeadlineSeconds=60)
    loop.edit(suspend=True)
    loop.sync(queue(pending()))
    loop.later(60)
    run = loop.sync(queue(pending(Reason.HELD)))
    assert run.kinds == ["Query", "Cancel", "Forget"]
    assert run.status["reason"] == "DeadlineExceeded"


def test_a_followed_attempt_past_its_deadline_marks_its_end_in_the_work_dir() -> None:
    loop = Loop(request({"logs": {"follow": True}, "activeDeadlineSeconds": 60,
                         "cluster": {"host": LOGIN, "secretRef": {"name": "login"},
                                     "workDir": "~/jobs"}}))
    loop.sync(SUBMITTED)
    loop.later(60)
    run = loop.sync(queue(running()))
    assert run.kinds == ["Query", "Cancel", "MarkEnded", "Forget"]
    assert run.action(MarkEnded) == MarkEnded(f"jobs/research/sim/{UID}/attempt-1", "Failed")
    assert [pod["metadata"]["name"] for pod in run.answer.body["children"]] == ["sim-logs"]


# --- only the jobs the scheduler shows for the attempt, not the stored ids -----------------------


def test_the_deadline_cancels_only_the_jobs_the_scheduler_shows() -> None:
    """The attempt's own job runs; a stored id of another job is not cancelled with it."""
    body = request({"activeDeadlineSeconds": 5},
                   status=stored_status(jobIDs=[ANOTHER_JOB], submitTime=T0))
    run = drive(sync.decide(call(body)), {Query: [TaskState("500", Outcome.RUNNING)]})
    assert run.action(Cancel).job_ids == ("500",)
    assert run.status["reason"] == str(Reason.DEADLINE_EXCEEDED)


def test_the_deadline_waits_for_jobs_not_visible_yet() -> None:
    recent = response.format_time(NOW - datetime.timedelta(seconds=30))
    body = request({"activeDeadlineSeconds": 5},
                   status=stored_status(jobIDs=["500"], submitTime=recent))
    run = drive(sync.decide(call(body)), {Query: []})
    assert run.kinds == ["Query"]
    assert run.status["phase"] == "Pending"
