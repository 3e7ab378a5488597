"""The sync decision with jump hosts, workDir, env and inputs, driven effect by effect with
results the test makes up: what is asked of the cluster, in which order, and the status each
answer carries; finalize under a workDir and along a route. Suspend and the deadline have
files of their own (``test_sync_suspend.py``, ``test_sync_deadline.py``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hooks.core.decide import rounds, sync
from hooks.core.decide.effects import (
    Access,
    Answer,
    Cleanup,
    Forget,
    ListActive,
    Query,
    Submit,
    Track,
)
from hooks.core.spec.batchjob import digest
from hooks.core.values.job import ClusterRef, Hop, JobRequest, SubmitAnswer, SubmitOutcome
from hooks.core.values.phases import Outcome, TaskState
from hooks.core.values.reasons import Reason
from hooks.core.wire import response
from tests.unit.builders import (
    LOGIN,
    SUBMITTED,
    Loop,
    condition,
    config_map,
    login_secret,
    queue,
    request,
    running,
    secret,
    submitted_loop,
)
from tests.unit.conftest import UID, call

SECRET_VALUE = "env-value-that-must-not-leak"
FILE_CONTENT = "input-content-that-must-not-leak"
JUMP = [{"host": "bastion.example.org"},
        {"host": "inner.example.org", "port": 2222, "secretRef": {"name": "inner-hop"},
         "insecureSkipHostKeyCheck": True}]


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


