"""The sync decision with jump hosts, workDir, env, inputs, suspend and the deadline, driven
effect by effect with results the test makes up: what is asked of the cluster, in which order,
and the status each answer carries. Finalize under a workDir and along a route, too."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from hooks.core import lifecycle, response, rounds, sync
from hooks.core.effects import (
    Access,
    Answer,
    Cancel,
    Cleanup,
    Forget,
    Hold,
    ListActive,
    MarkEnded,
    Query,
    Release,
    Submit,
    Track,
    Trouble,
)
from hooks.core.lifecycle import Due, Plan
from hooks.core.model import (
    ClusterRef,
    Hop,
    JobRequest,
    Outcome,
    Phase,
    Reason,
    SubmitAnswer,
    SubmitOutcome,
    TaskState,
)
from hooks.core.spec import digest
from hooks.core.status import Status
from tests.unit.builders import (
    LOGIN,
    Loop,
    Run,
    config_map,
    login_secret,
    request,
    secret,
)
from tests.unit.conftest import UID, call

SUBMITTED: dict[type, Any] = {Submit: SubmitOutcome(SubmitAnswer.SUBMITTED, "500")}
DOWN = Trouble(Reason.CLUSTER_UNREACHABLE, "Connection refused.")
SECRET_VALUE = "env-value-that-must-not-leak"
FILE_CONTENT = "input-content-that-must-not-leak"
JUMP = [{"host": "bastion.example.org"},
        {"host": "inner.example.org", "port": 2222, "secretRef": {"name": "inner-hop"},
         "insecureSkipHostKeyCheck": True}]


def queue(*states: TaskState) -> dict[type, Any]:
    return {Query: list(states)}


def pending(reason: Reason = Reason.NONE, task: str = "500") -> TaskState:
    return TaskState(task, Outcome.PENDING, reason)


def running(task: str = "500") -> TaskState:
    return TaskState(task, Outcome.RUNNING, start_time="2026-11-22T10:05:10Z")


def condition(run: Run, kind: str) -> dict[str, str]:
    (found,) = [c for c in run.status["conditions"] if c["type"] == kind]
    return found  # type: ignore[no-any-return]


def submitted_loop(**spec: Any) -> Loop:
    """A BatchJob whose attempt 1 was just submitted as job 500."""
    loop = Loop(request(spec))
    assert loop.sync(SUBMITTED).kinds == ["Submit", "Track"]
    return loop


# --- the route and the logins --------------------------------------------------------------------


def route_request(**secrets: Any) -> dict[str, Any]:
    cluster = {"host": LOGIN, "secretRef": {"name": "login"}, "jump": JUMP,
               "workDir": "/scratch/alice/bridge"}
    return request({"cluster": cluster},
                   secrets={"inner-hop": login_secret("inner.example.org"), **secrets})


def test_credentials_are_the_login_nodes_then_each_hops_in_order() -> None:
    parsed = call(route_request())
    assert parsed.parsed.placement is not None
    access = rounds.credentials(parsed, parsed.parsed.placement.cluster)
    assert isinstance(access, Access)
    assert access.login.username == "alice"
    assert len(access.hops) == 2
    assert access.hops[1].known_hosts is not None
    assert "inner.example.org" in access.hops[1].known_hosts


@pytest.mark.parametrize(
    ("secrets", "reason", "words"),
    [
        pytest.param({"inner-hop": None}, Reason.SECRET_NOT_FOUND,
                     "Secret 'inner-hop' (jump host inner.example.org) was not found",
                     id="hop-secret-missing"),
        pytest.param({"inner-hop": {"data": {"password": "cHc="}}}, Reason.INVALID_SECRET,
                     "Secret 'inner-hop' (jump host inner.example.org): the Secret has no "
                     "'username' key", id="hop-secret-invalid"),
        pytest.param({"login": None}, Reason.SECRET_NOT_FOUND,
                     "Secret 'login' was not found", id="cluster-secret-missing"),
    ],
)
def test_a_missing_or_invalid_route_secret_waits_without_an_effect(
    secrets: dict[str, Any], reason: Reason, words: str
) -> None:
    run = Loop(route_request(**secrets)).sync()
    assert run.actions == []
    assert (run.status["phase"], run.status["reason"]) == ("Pending", str(reason))
    assert run.status["message"].startswith(words), run.status["message"]
    assert condition(run, "ClusterReachable")["status"] == "Unknown"


def test_the_attempt_goes_along_the_route_into_the_work_dir() -> None:
    loop = Loop(route_request())
    run = loop.sync(SUBMITTED)
    first = loop.effects[0]
    assert isinstance(first.action, Submit)
    assert first.placement.cluster.jump == (
        Hop("bastion.example.org", 22, "login"),
        Hop("inner.example.org", 2222, "inner-hop", True),
    )
    assert len(first.access.hops) == 2
    job = first.action.job
    assert job.remote_dir == f"/scratch/alice/bridge/research/sim/{UID}/attempt-1"
    stored = run.status["cluster"]
    assert stored["workDir"] == "/scratch/alice/bridge"
    assert [hop["host"] for hop in stored["jump"]] == ["bastion.example.org", "inner.example.org"]
    assert [hop["secretRef"]["name"] for hop in stored["jump"]] == ["login", "inner-hop"]


def test_tracking_stays_on_the_attempts_route_after_an_edit() -> None:
    loop = Loop(route_request())
    loop.sync(SUBMITTED)
    loop.edit(cluster={"host": "other-login", "secretRef": {"name": "login"}})
    loop.effects.clear()
    run = loop.sync(queue(running()))
    (query,) = loop.effects
    assert isinstance(query.action, Query)
    assert (query.placement.cluster.host, len(query.placement.cluster.jump)) == (LOGIN, 2)
    assert query.placement.cluster.work_dir == "/scratch/alice/bridge"
    assert "waits for the end of attempt 1" in run.status["message"]


def test_a_retried_submission_keeps_the_attempts_work_dir_and_route() -> None:
    stored = {"host": LOGIN, "port": 22, "secretRef": {"name": "login"},
              "insecureSkipHostKeyCheck": False, "workDir": "/old/place",
              "jump": [{"host": "bastion.example.org", "port": 22,
                        "secretRef": {"name": "login"}, "insecureSkipHostKeyCheck": False}]}
    body = request({"cluster": {"host": LOGIN, "secretRef": {"name": "login"},
                                "workDir": "/new/place"}},
                   status={"phase": "Pending", "reason": "Submitting", "attempt": 1,
                           "attemptGeneration": 1, "cluster": stored}, generation=2)
    loop = Loop(body)
    run = loop.sync({Submit: SubmitOutcome(SubmitAnswer.EXISTING, "500")})
    job = run.action(Submit).job
    assert job.remote_dir.startswith("/old/place/")
    assert job.spec.cluster.jump == (Hop("bastion.example.org", 22, "login"),)
    assert run.status["cluster"] == stored


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        pytest.param({"cluster": {"host": LOGIN, "secretRef": {"name": "login"},
                                  "jump": [{"host": f"h{i}"} for i in range(4)]}},
                     "spec.cluster.jump", id="four-jump-hosts"),
        pytest.param({"cluster": {"host": LOGIN, "secretRef": {"name": "login"},
                                  "jump": [{"host": "b", "port": 70000}]}},
                     "spec.cluster.jump[0].port", id="jump-port"),
        pytest.param({"cluster": {"host": LOGIN, "secretRef": {"name": "login"},
                                  "workDir": "jobs/../.."}}, "spec.cluster.workDir",
                     id="work-dir-parent"),
        pytest.param({"cluster": {"host": LOGIN, "secretRef": {"name": "login"},
                                  "workDir": ""}}, "spec.cluster.workDir", id="work-dir-empty"),
        pytest.param({"env": [{"name": "A-1", "value": "x"}]}, "spec.env[0].name",
                     id="env-name"),
        pytest.param({"env": [{"name": "A", "value": "x"}, {"name": "A", "value": "y"}]},
                     "spec.env[1].name", id="env-twice"),
        pytest.param({"inputs": [{"configMap": {"name": "c"}, "path": "../x"}]},
                     "spec.inputs[0].path", id="input-path-escaping"),
        pytest.param({"inputs": [{"configMap": {"name": "c"}, "path": "x\ty"}]},
                     "spec.inputs[0].path", id="input-path-control"),
        pytest.param({"inputs": [
            {"configMap": {"name": "c"}, "items": [{"key": "k", "path": "same"}]},
            {"secret": {"name": "s"}, "items": [{"key": "k", "path": "same"}]}]},
            "spec.inputs[1].items", id="two-inputs-one-file"),
        pytest.param({"activeDeadlineSeconds": -1}, "spec.activeDeadlineSeconds",
                     id="negative-deadline"),
        pytest.param({"suspend": "yes"}, "spec.suspend", id="suspend-text"),
    ],
)
def test_an_invalid_new_field_fails_without_an_effect(fields: dict[str, Any], field: str) -> None:
    run = Loop(request(fields)).sync(SUBMITTED)
    assert run.actions == []
    assert (run.status["phase"], run.status["reason"]) == ("Failed", "InvalidSpec")
    assert run.status["message"].startswith(field), run.status["message"]
    assert condition(run, "Failed")["reason"] == "InvalidSpec"


# --- env and inputs at submission ----------------------------------------------------------------


def payload_request(**secrets: Any) -> dict[str, Any]:
    return request(
        {"env": [{"name": "MODE", "value": "fast"},
                 {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "api",
                                                                  "key": "token"}}}],
         "inputs": [{"configMap": {"name": "params"}, "path": "in"}]},
        secrets={"api": secret(token=SECRET_VALUE), **secrets},
        config_maps={"params": config_map(**{"p.json": FILE_CONTENT})},
    )


def test_the_submission_carries_the_env_and_the_input_files() -> None:
    run = Loop(payload_request()).sync(SUBMITTED)
    job: JobRequest = run.action(Submit).job
    assert job.environment == (("MODE", "fast"), ("TOKEN", SECRET_VALUE))
    assert [(f.path, f.content) for f in job.inputs] == [("in/p.json", FILE_CONTENT.encode())]
    assert run.status["attemptSpecHash"] == digest(job.spec)


@pytest.mark.parametrize(
    ("change", "reason", "named"),
    [
        pytest.param({"secrets": {"api": None}}, "SecretNotFound", "'api'", id="secret"),
        pytest.param({"config_maps": {}}, "ConfigMapNotFound", "'params'", id="config-map"),
    ],
)
def test_a_missing_env_or_input_object_waits_without_an_effect(
    change: dict[str, Any], reason: str, named: str
) -> None:
    body = payload_request()
    if "secrets" in change:
        del body["related"]["Secret.v1"]["api"]
    else:
        body["related"]["ConfigMap.v1"] = {}
    loop = Loop(body)
    run = loop.sync(SUBMITTED)
    assert run.actions == []
    assert (run.status["phase"], run.status["reason"]) == ("Pending", reason)
    assert named in run.status["message"]
    assert condition(run, "ClusterReachable")["status"] == "Unknown"
    assert run.answer.body["resyncAfterSeconds"] >= response.SLOW_POLL * 0.75


def test_an_unusable_env_value_fails_without_an_effect() -> None:
    run = Loop(payload_request(api=secret(token="a\x00b"))).sync(SUBMITTED)
    assert run.actions == []
    assert (run.status["phase"], run.status["reason"]) == ("Failed", "InvalidSpec")
    assert run.status["message"].startswith("spec.env[1] (TOKEN)")
    assert "resyncAfterSeconds" not in run.answer.body


def test_the_objects_are_read_at_submission_only() -> None:
    loop = Loop(payload_request())
    loop.sync(SUBMITTED)
    del loop.body["related"]["Secret.v1"]["api"]
    loop.body["related"]["ConfigMap.v1"] = {}
    run = loop.sync(queue(running()))
    assert run.kinds == ["Query"]
    assert (run.status["phase"], run.status["reason"]) == ("Running", "")


def test_values_never_reach_the_answer() -> None:
    loop = Loop(payload_request())
    answers = [loop.sync(SUBMITTED), loop.sync(queue(running())),
               loop.sync(queue(TaskState("500", Outcome.FAILED, Reason.NON_ZERO_EXIT_CODE,
                                         exit_code=1)))]
    broken = Loop(payload_request(api=secret(token=SECRET_VALUE + "\x00"))).sync(SUBMITTED)
    for run in [*answers, broken]:
        text = json.dumps(run.answer.body) + repr(run.answer.status) + repr(run.actions)
        assert SECRET_VALUE not in text and FILE_CONTENT not in text


# --- suspend -------------------------------------------------------------------------------------


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


# --- activeDeadlineSeconds -----------------------------------------------------------------------


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


# --- finalize ------------------------------------------------------------------------------------


def test_finalize_cleans_the_work_dir_along_the_route() -> None:
    loop = Loop(route_request())
    loop.sync(SUBMITTED)
    loop.body["finalizing"] = True
    loop.body["parent"]["spec"]["cluster"] = {"host": "elsewhere",
                                              "secretRef": {"name": "login"}}
    loop.effects.clear()
    run = loop.sync({ListActive: (), Cleanup: "removed"})
    assert run.kinds == ["ListActive", "Cleanup", "Forget"]
    assert run.action(Cleanup).root == f"/scratch/alice/bridge/research/sim/{UID}"
    assert all(len(effect.access.hops) == 2 for effect in loop.effects)
    assert all(effect.placement.cluster.host == LOGIN for effect in loop.effects)
    assert run.answer.body["finalized"] is True


def test_finalize_of_a_batchjob_suspended_before_submission() -> None:
    loop = Loop(request({"suspend": True}))
    loop.sync()
    loop.body["finalizing"] = True
    run = loop.sync({ListActive: (), Cleanup: "gone"})
    assert run.kinds == ["ListActive", "Cleanup", "Forget"]
    assert run.action(Cleanup).root == f".hpcbridge/research/sim/{UID}"
    assert run.answer.body["finalized"] is True


# --- how the effects look -------------------------------------------------------------------------


def test_every_effect_names_its_access_and_placement() -> None:
    parsed = call(route_request())
    decision = sync.decide(parsed)
    effect = next(decision)
    assert isinstance(effect.action, Submit)
    assert effect.placement.cluster == ClusterRef(
        LOGIN, 22, "login", False,
        (Hop("bastion.example.org", 22, "login"),
         Hop("inner.example.org", 2222, "inner-hop", True)),
        "/scratch/alice/bridge")
    with pytest.raises(StopIteration) as done:
        decision.send(SubmitOutcome(SubmitAnswer.IN_FLIGHT))
    answer = done.value.value
    assert isinstance(answer, Answer)
    assert answer.status.reason is Reason.SUBMITTING
    assert answer.status.spec_hash == digest(effect.action.job.spec)


def test_a_track_follows_every_new_job_id() -> None:
    run = Loop(request()).sync(SUBMITTED)
    assert run.action(Track).ref.key == f"{UID}-1"
    assert run.action(Track).ref.job_id == "500"


def test_a_finished_attempt_is_forgotten_once() -> None:
    loop = submitted_loop()
    run = loop.sync(queue(TaskState("500", Outcome.FAILED, Reason.NON_ZERO_EXIT_CODE,
                                    exit_code=2)))
    assert run.action(Forget).key == f"{UID}-1"
    assert loop.sync().actions == []


# --- the lifecycle' own functions ---------------------------------------------------------------


HELD_BY_HOOKS = Status(reason=Reason.SUSPENDED, message="held", backend="slurm",
                       job_ids=("500",), attempt=1, attempt_generation=1, active=1)
TRACK = Plan(Due.TRACK, 1, 1, 0)


@pytest.mark.parametrize(
    ("status", "ours"),
    [
        pytest.param(HELD_BY_HOOKS, True, id="held-for-suspend"),
        pytest.param(replace(HELD_BY_HOOKS, job_ids=()), False, id="never-submitted"),
        pytest.param(replace(HELD_BY_HOOKS, phase=Phase.RUNNING), False,
                     id="suspended-by-the-scheduler"),
        pytest.param(replace(HELD_BY_HOOKS, reason=Reason.HELD), False, id="held-by-others"),
    ],
)
def test_held_by_hooks(status: Status, ours: bool) -> None:
    assert lifecycle.held_by_hooks(status) is ours


def test_unreachable_keeps_a_hold_of_the_hooks_and_says_why_beside_it() -> None:
    new = lifecycle.unreachable(HELD_BY_HOOKS, TRACK, Reason.CLUSTER_UNREACHABLE, "Down.",
                                backend="slurm")
    assert (new.reason, new.message) == (Reason.SUSPENDED, "held")
    assert (new.reachable, new.reachability_reason, new.reachability_message) == (
        False, "ClusterUnreachable", "Down.")
    other = lifecycle.unreachable(replace(HELD_BY_HOOKS, reason=Reason.HELD), TRACK,
                                  Reason.CLUSTER_UNREACHABLE, "Down.", backend="slurm")
    assert (other.reason, other.message) == (Reason.CLUSTER_UNREACHABLE, "Down.")


def test_deadline_exceeded_counts_the_active_tasks_as_cancelled() -> None:
    running_status = Status(phase=Phase.RUNNING, job_ids=("7_0", "7_1", "7_2"), attempt=1,
                            active=2, succeeded=1, cancelled=0)
    new = lifecycle.deadline_exceeded(running_status, 90, ["7"], now="2026-11-22T10:05:00Z")
    assert (new.phase, new.reason, new.active, new.succeeded, new.cancelled) == (
        Phase.FAILED, Reason.DEADLINE_EXCEEDED, 0, 1, 2)
    assert new.completion_time == "2026-11-22T10:05:00Z"
    assert new.finished
    assert new.message.endswith("(90 s); its job 7 was cancelled.")


@pytest.mark.parametrize(("active", "job_ids", "ended"), [
    (0, [], "none of its jobs was left to cancel."),
    (0, ["7"], "none of its jobs was left to cancel."),
    (2, ["7", "8"], "its jobs 7, 8 were cancelled."),
])
def test_deadline_exceeded_says_what_was_cancelled(
    active: int, job_ids: list[str], ended: str
) -> None:
    # With nothing to cancel it read "and was cancelled (job )."
    new = lifecycle.deadline_exceeded(Status(phase=Phase.RUNNING, attempt=1, active=active),
                                      90, job_ids, now="2026-11-22T10:05:00Z")
    assert new.message == ("The attempt was active longer than spec.activeDeadlineSeconds "
                           f"(90 s); {ended}")


def test_suspended_before_submission_keeps_the_attempts_cluster() -> None:
    prev = Status(reason=Reason.SECRET_NOT_FOUND, attempt=1, attempt_generation=1,
                  cluster=ClusterRef("h", 22, "s", False, work_dir="/w"))
    new = lifecycle.suspended(prev, Plan(Due.SUBMIT, 1, 1, 0), backend="slurm")
    assert (new.phase, new.reason, new.attempt, new.cluster) == (
        Phase.PENDING, Reason.SUSPENDED, 1, prev.cluster)
    assert "attempt 1" in new.message
