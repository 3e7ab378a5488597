"""The sync decision under spec.suspend, driven effect by effect with results the test makes
up: what is held and released, when, and what the status says."""

from __future__ import annotations

import pytest

from hooks.core.decide import sync
from hooks.core.decide.effects import Hold, Query, Release
from hooks.core.values.phases import Outcome, TaskState
from hooks.core.values.reasons import Reason
from hooks.core.wire import response
from tests.unit.builders import (
    ANOTHER_JOB,
    DOWN,
    SUBMITTED,
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
from tests.unit.conftest import call


def test_suspended_before_submission_sends_nothing() -> None:
    loop = Loop(request({"suspend": True}))
    run = loop.sync(SUBMITTED)
    assert run.actions == []
    assert (run.status["phase"], run.status["reason"], run.status["attempt"]) == (
        "Pending", "Suspended", 1)
    suspended = condition(run, "Suspended")
    assert (suspended["status"], suspended["reason"]) == ("True", "Suspended")
    assert "spec.suspend" in suspended["message"]
    assert condition(run, "Submitted")["status"] == "False"
    assert run.answer.body["resyncAfterSeconds"] >= response.SLOW_POLL * 0.75
    assert loop.sync(SUBMITTED).actions == []  # and stays so


def test_suspended_needs_no_secret() -> None:
    run = Loop(request({"suspend": True}, secrets={"login": None})).sync()
    assert (run.actions, run.status["reason"]) == ([], "Suspended")


def test_resumed_before_submission_submits() -> None:
    loop = Loop(request({"suspend": True}))
    loop.sync()
    loop.edit(suspend=False)
    run = loop.sync(SUBMITTED)
    assert run.kinds == ["Submit", "Track"]
    assert (run.status["attempt"], run.status["jobIDs"], run.status["reason"]) == (1, ["500"], "")
    assert condition(run, "Suspended")["status"] == "False"
    assert condition(run, "Suspended")["reason"] == "NotSuspended"


@pytest.mark.parametrize("reason", ["Submitting", "ClusterUnreachable"])
def test_suspended_while_a_submission_may_be_in_flight_completes_it(reason: str) -> None:
    body = request({"suspend": True}, status={
        "phase": "Pending", "reason": reason, "attempt": 1, "attemptGeneration": 1})
    run = Loop(body).sync(SUBMITTED)
    assert run.kinds == ["Submit", "Track"]
    assert run.status["jobIDs"] == ["500"]


@pytest.mark.parametrize("reason", ["SecretNotFound", "ConfigMapNotFound", "InvalidSecret"])
def test_suspended_while_waiting_for_an_object_sends_nothing(reason: str) -> None:
    body = request({"suspend": True}, status={
        "phase": "Pending", "reason": reason, "attempt": 1, "attemptGeneration": 1})
    run = Loop(body).sync(SUBMITTED)
    assert run.actions == []
    assert run.status["reason"] == "Suspended"


def test_suspended_while_queued_holds_the_job() -> None:
    loop = submitted_loop()
    loop.edit(suspend=True)
    run = loop.sync(queue(pending()))
    assert run.kinds == ["Query", "Hold"]
    assert run.action(Hold).job_ids == ("500",)
    assert (run.status["phase"], run.status["reason"]) == ("Pending", "Suspended")
    assert "job 500 is held" in run.status["message"]
    assert condition(run, "Suspended")["status"] == "True"
    assert run.answer.body["resyncAfterSeconds"] <= response.MAX_POLL
    assert run.status["attemptGeneration"] == 1


def test_an_array_is_held_once_by_its_job_id() -> None:
    loop = Loop(request({"slurm": {"array": "0-2"}}))
    loop.sync(SUBMITTED)
    loop.edit(suspend=True)
    run = loop.sync(queue(*(pending(task=f"500_{i}") for i in range(3))))
    assert run.action(Hold).job_ids == ("500",)


def test_suspended_and_held_already_needs_no_effect() -> None:
    loop = submitted_loop()
    loop.edit(suspend=True)
    loop.sync(queue(pending()))
    run = loop.sync(queue(pending(Reason.HELD)))
    assert run.kinds == ["Query"]
    assert (run.status["phase"], run.status["reason"]) == ("Pending", "Suspended")


def test_suspended_while_held_by_someone_else_counts_as_held() -> None:
    loop = submitted_loop()
    loop.edit(suspend=True)
    run = loop.sync(queue(pending(Reason.HELD)))
    assert run.kinds == ["Query"]
    assert run.status["reason"] == "Suspended"


def test_suspended_while_running_keeps_running_and_says_so() -> None:
    loop = submitted_loop()
    loop.edit(suspend=True)
    run = loop.sync(queue(running()))
    assert run.kinds == ["Query"]
    assert (run.status["phase"], run.status["reason"]) == ("Running", "")
    assert "cannot be suspended" in run.status["message"]
    assert condition(run, "Suspended")["status"] == "False"


def test_resumed_while_held_releases_the_job() -> None:
    loop = submitted_loop()
    loop.edit(suspend=True)
    loop.sync(queue(pending()))
    loop.edit(suspend=False)
    run = loop.sync(queue(pending(Reason.HELD)))
    assert run.kinds == ["Query", "Release"]
    assert run.action(Release).job_ids == ("500",)
    assert (run.status["phase"], run.status["reason"]) == ("Pending", "")
    assert "released" in run.status["message"]
    assert condition(run, "Suspended")["status"] == "False"
    assert loop.sync(queue(pending())).kinds == ["Query"]


def test_resumed_soon_after_the_hold_releases_the_job_the_queue_does_not_show_held() -> None:
    # The queue a sync sees comes from the shared status, which may be older than the hold.
    loop = submitted_loop()
    loop.edit(suspend=True)
    assert loop.sync(queue(pending())).kinds == ["Query", "Hold"]
    loop.edit(suspend=False)
    run = loop.sync(queue(pending()))
    assert run.kinds == ["Query", "Release"]
    assert run.action(Release).job_ids == ("500",)
    assert (run.status["phase"], run.status["reason"]) == ("Pending", "")
    assert "released" in run.status["message"]
    assert loop.sync(queue(pending())).kinds == ["Query"]


def test_an_invalid_edit_soon_after_the_hold_stays_suspended() -> None:
    loop = submitted_loop()
    loop.edit(suspend=True)
    loop.sync(queue(pending()))
    loop.edit(suspend=False, backoffLimit=-1)
    invalid = loop.sync(queue(pending()))
    assert (invalid.kinds, invalid.status["reason"]) == (["Query"], "Suspended")
    loop.edit(backoffLimit=0)
    assert loop.sync(queue(pending())).kinds == ["Query", "Release"]


def test_a_job_held_by_someone_else_is_not_released() -> None:
    loop = submitted_loop()
    run = loop.sync(queue(pending(Reason.HELD)))
    assert (run.kinds, run.status["reason"]) == (["Query"], "Held")
    assert loop.sync(queue(pending(Reason.HELD))).kinds == ["Query"]


def test_a_failed_hold_is_tried_again() -> None:
    loop = submitted_loop()
    loop.edit(suspend=True)
    run = loop.sync({**queue(pending()), Hold: DOWN})
    assert run.kinds == ["Query", "Hold"]
    assert (run.status["phase"], run.status["reason"]) == ("Pending", "ClusterUnreachable")
    assert condition(run, "ClusterReachable")["status"] == "False"
    again = loop.sync(queue(pending()))
    assert again.kinds == ["Query", "Hold"]
    assert again.status["reason"] == "Suspended"


def test_a_failed_release_is_tried_again() -> None:
    loop = submitted_loop()
    loop.edit(suspend=True)
    loop.sync(queue(pending()))
    loop.edit(suspend=False)
    run = loop.sync({**queue(pending(Reason.HELD)), Release: DOWN})
    assert run.kinds == ["Query", "Release"]
    assert (run.status["phase"], run.status["reason"]) == ("Pending", "Suspended")
    assert condition(run, "ClusterReachable")["status"] == "False"
    again = loop.sync(queue(pending(Reason.HELD)))
    assert again.kinds == ["Query", "Release"]
    assert again.status["reason"] == ""


def test_a_held_job_is_released_after_the_cluster_was_unreachable() -> None:
    loop = submitted_loop()
    loop.edit(suspend=True)
    loop.sync(queue(pending()))
    loop.edit(suspend=False)
    down = loop.sync({Query: DOWN})
    assert down.kinds == ["Query"]
    assert condition(down, "ClusterReachable")["status"] == "False"
    assert loop.sync(queue(pending(Reason.HELD))).kinds == ["Query", "Release"]


def test_an_invalid_edit_neither_holds_nor_releases() -> None:
    loop = submitted_loop()
    loop.edit(suspend=True)
    loop.sync(queue(pending()))
    loop.edit(suspend=False, backoffLimit=-1)
    invalid = loop.sync(queue(pending(Reason.HELD)))
    assert invalid.kinds == ["Query"]
    assert invalid.status["reason"] == "Suspended"
    assert "The new spec is invalid: spec.backoffLimit" in invalid.status["message"]
    loop.edit(backoffLimit=0)
    assert loop.sync(queue(pending(Reason.HELD))).kinds == ["Query", "Release"]


def test_a_job_the_scheduler_suspended_and_requeued_held_is_not_released() -> None:
    loop = submitted_loop()
    run = loop.sync(queue(TaskState("500", Outcome.RUNNING, Reason.SUSPENDED)))
    assert (run.status["phase"], run.status["reason"]) == ("Running", "Suspended")
    assert condition(run, "Suspended")["status"] == "True"
    assert loop.sync(queue(pending(Reason.HELD))).kinds == ["Query"]


def test_suspending_and_resuming_is_no_new_spec() -> None:
    loop = submitted_loop()
    loop.edit(suspend=True)
    loop.sync(queue(pending()))
    loop.edit(suspend=False)
    loop.sync(queue(pending(Reason.HELD)))
    run = loop.sync(queue(running()))
    assert "spec changed" not in run.status["message"]
    done = loop.sync(queue(TaskState("500", Outcome.SUCCEEDED, exit_code=0)))
    assert done.status["phase"] == "Succeeded"
    loop.edit(suspend=True)
    idle = loop.sync(SUBMITTED)
    assert idle.actions == []
    assert (idle.status["phase"], idle.status["attempt"]) == ("Succeeded", 1)
    assert idle.status["attemptGeneration"] == 1


def test_a_real_edit_after_the_end_while_suspended_waits_suspended() -> None:
    loop = submitted_loop()
    loop.sync(queue(TaskState("500", Outcome.SUCCEEDED, exit_code=0)))
    loop.edit(suspend=True, script="#!/bin/sh\necho again\n")
    run = loop.sync(SUBMITTED)
    assert run.actions == []
    assert (run.status["phase"], run.status["reason"], run.status["attempt"]) == (
        "Pending", "Suspended", 2)
    loop.edit(suspend=False)
    assert loop.sync(SUBMITTED).kinds == ["Submit", "Track"]


def test_the_next_attempt_after_a_node_failure_waits_while_suspended() -> None:
    loop = submitted_loop(backoffLimit=2)
    loop.edit(suspend=True)
    loop.sync(queue(running()))
    run = loop.sync(queue(TaskState("500", Outcome.FAILED, Reason.NODE_FAIL, "A node failed")))
    assert "Submit" not in run.kinds
    assert (run.status["phase"], run.status["reason"], run.status["attempt"],
            run.status["retries"]) == ("Pending", "Suspended", 2, 1)


def test_an_edit_undone_while_running_is_no_new_spec() -> None:
    loop = submitted_loop()
    loop.edit(script="#!/bin/sh\necho other\n")
    assert "waits for the end" in loop.sync(queue(running())).status["message"]
    loop.edit(script="#!/bin/sh\ntrue\n")
    assert "waits" not in loop.sync(queue(running())).status["message"]
    done = loop.sync(queue(TaskState("500", Outcome.SUCCEEDED, exit_code=0)))
    assert done.kinds == ["Query", "Forget"]
    assert loop.sync(SUBMITTED).actions == []


# --- only the jobs the scheduler shows for the attempt, not the stored ids -----------------------


def test_suspend_holds_no_job_the_scheduler_does_not_show_for_the_attempt() -> None:
    """A stored id of another BatchJob's job (the same account may run both) is not held:
    only what squeue/condor_q show under the attempt's own name or key is."""
    body = request({"suspend": True}, status=stored_status(jobIDs=[ANOTHER_JOB]))
    run = drive(sync.decide(call(body)), {Query: []})
    assert run.kinds == ["Query"]
    assert run.status["reason"] != str(Reason.SUSPENDED)
    assert run.answer.body["resyncAfterSeconds"] > 0


def test_suspend_holds_the_jobs_the_scheduler_shows() -> None:
    body = request({"suspend": True}, status=stored_status(jobIDs=["500"]))
    run = drive(sync.decide(call(body)), {Query: [TaskState("500", Outcome.PENDING)]})
    assert run.action(Hold).job_ids == ("500",)
    assert run.status["reason"] == str(Reason.SUSPENDED)


def test_a_held_job_not_visible_for_a_moment_stays_ours_to_release() -> None:
    held = stored_status(jobIDs=["500"], reason="Suspended")
    run = drive(sync.decide(call(request({"suspend": False}, status=held))), {Query: []})
    assert run.kinds == ["Query"]
    assert run.status["reason"] == str(Reason.SUSPENDED)
