"""The site features under attack: a hostile stored status, hostile inputs, a tampered log Pod
annotation and odd work directories, each answered without touching what is not the
BatchJob's own and without unbounded work."""

from __future__ import annotations

import datetime
import json
import tracemalloc
from typing import Any

import pytest

from hooks.core import response, status, sync
from hooks.core.children import LAST_APPLIED, carried_over, log_pod
from hooks.core.effects import Cancel, Hold, Query, Release, Submit
from hooks.core.fields import SpecError
from hooks.core.layout import work_dir
from hooks.core.model import (
    ClusterRef,
    JobRequest,
    Outcome,
    Reason,
    Spec,
    SubmitAnswer,
    SubmitOutcome,
    TaskState,
)
from hooks.core.payload import Unresolved, resolve
from hooks.core.spec import parse_spec
from hooks.schedulers import REGISTRY
from tests.unit.builders import LOGIN, T0, config_map, drive, request
from tests.unit.conftest import NOW, UID, call

ATTEMPT = {"host": LOGIN, "port": 22, "secretRef": {"name": "login"}}
VICTIM = "8534"
"""A job of another BatchJob of the same cluster account."""
EXISTING = SubmitOutcome(SubmitAnswer.EXISTING, "500")
"""The guard's answer for an attempt submitted before: the job id it recorded."""


def stored(backend: str = "slurm", **fields: Any) -> dict[str, Any]:
    """A status as a user who may write it could leave it: attempt 1 queued."""
    return {"phase": "Pending", "backend": backend, "attempt": 1, "attemptGeneration": 1,
            "cluster": ATTEMPT, **fields}


# --- stored job ids ------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["slurm", "htcondor"])
@pytest.mark.parametrize("ids", [
    ["-u", "hpcuser"], ["--user=hpcuser"], ["-all"], ["jobname=hpcb-x-1"], ["1,2"],
    ["4242", "4343"], ["15.0", "16.0"], ["abc"], ["4242_--x"], ["4242 4343"], [""],
    ["1" * 21],
], ids=repr)
def test_stored_job_ids_of_no_scheduler_form_or_of_two_jobs_are_dropped(
        ids: list[str], backend: str) -> None:
    assert status.from_raw({"backend": backend, "jobIDs": ids}, REGISTRY).job_ids == ()


@pytest.mark.parametrize(("backend", "ids"), [
    ("slurm", ["4242"]), ("slurm", ["4242_0", "4242_1"]), ("slurm", ["4242+0", "4242+1"]),
    ("slurm", ["4242_[3-5%2]"]), ("htcondor", ["15.0", "15.1"]), ("htcondor", ["15"]),
], ids=repr)
def test_stored_job_ids_of_one_job_are_kept(backend: str, ids: list[str]) -> None:
    assert status.from_raw({"backend": backend, "jobIDs": ids}, REGISTRY).job_ids == tuple(ids)


@pytest.mark.parametrize(("backend", "ids"), [
    ("slurm", ["15.0"]), ("htcondor", ["4242_0"]), ("htcondor", ["4242+1"]),
    ("pbs", ["4242"]), ("", ["4242"]),
], ids=repr)
def test_stored_job_ids_are_kept_only_in_the_form_of_the_stored_backend(
        backend: str, ids: list[str]) -> None:
    """Each scheduler says which task ids are its own; a backend no scheduler answers to has
    none."""
    assert status.from_raw({"backend": backend, "jobIDs": ids}, REGISTRY).job_ids == ()


def test_an_option_as_a_stored_job_id_reaches_no_command() -> None:
    """``scancel -u hpcuser`` would cancel every job of the account: the ids are dropped and
    the attempt is submitted again, which its guard answers with the job it recorded."""
    body = request({"activeDeadlineSeconds": 5},
                   status=stored(jobIDs=["-u", "hpcuser", "500"], submitTime=T0))
    run = drive(sync.decide(call(body)), {Query: [TaskState("500", Outcome.RUNNING)],
                                          Submit: EXISTING})
    assert run.kinds[0] == "Submit"
    assert not [a for a in run.actions if isinstance(a, (Cancel, Hold, Release))]


def test_a_non_numeric_htcondor_id_is_no_server_error() -> None:
    """``condor_hold`` takes the ids as ``ClusterId == int(id)``: ``abc`` was a 500."""
    body = request({"backend": "htcondor", "suspend": True},
                   status=stored("htcondor", jobIDs=["abc"]))
    run = drive(sync.decide(call(body)), {Query: [], Submit: EXISTING})
    assert not [a for a in run.actions if isinstance(a, Hold)]
    assert isinstance(run.actions[0], Submit)


def test_suspend_holds_no_job_the_scheduler_does_not_show_for_the_attempt() -> None:
    """A stored id of another BatchJob's job (the same account may run both) is not held:
    only what squeue/condor_q show under the attempt's own name or key is."""
    body = request({"suspend": True}, status=stored(jobIDs=[VICTIM]))
    run = drive(sync.decide(call(body)), {Query: []})
    assert run.kinds == ["Query"]
    assert run.status["reason"] != str(Reason.SUSPENDED)
    assert run.answer.body["resyncAfterSeconds"] > 0


def test_suspend_holds_the_jobs_the_scheduler_shows() -> None:
    body = request({"suspend": True}, status=stored(jobIDs=["500"]))
    run = drive(sync.decide(call(body)), {Query: [TaskState("500", Outcome.PENDING)]})
    assert run.action(Hold).job_ids == ("500",)
    assert run.status["reason"] == str(Reason.SUSPENDED)


def test_the_deadline_cancels_only_the_jobs_the_scheduler_shows() -> None:
    """The attempt's own job runs; a stored id of another job is not cancelled with it."""
    body = request({"activeDeadlineSeconds": 5},
                   status=stored(jobIDs=[VICTIM], submitTime=T0))
    run = drive(sync.decide(call(body)), {Query: [TaskState("500", Outcome.RUNNING)]})
    assert run.action(Cancel).job_ids == ("500",)
    assert run.status["reason"] == str(Reason.DEADLINE_EXCEEDED)


def test_the_deadline_waits_for_jobs_not_visible_yet() -> None:
    recent = response.format_time(NOW - datetime.timedelta(seconds=30))
    body = request({"activeDeadlineSeconds": 5},
                   status=stored(jobIDs=["500"], submitTime=recent))
    run = drive(sync.decide(call(body)), {Query: []})
    assert run.kinds == ["Query"]
    assert run.status["phase"] == "Pending"


def test_a_held_job_not_visible_for_a_moment_stays_ours_to_release() -> None:
    held = stored(jobIDs=["500"], reason="Suspended")
    run = drive(sync.decide(call(request({"suspend": False}, status=held))), {Query: []})
    assert run.kinds == ["Query"]
    assert run.status["reason"] == str(Reason.SUSPENDED)


# --- inputs ---------------------------------------------------------------------------------


def test_many_deep_input_paths_cost_neither_memory_nor_time() -> None:
    """1400 items of one key, each a path 800 characters deep: a BatchJob etcd takes. Their
    parent directories were all kept (270 MB, 3 s) before the limits refused them."""
    deep = "/".join(["a"] * 400)
    items = [{"key": "k", "path": f"x{i:05d}/{deep}"} for i in range(1400)]
    spec = parse_spec({"backend": "slurm", "script": "#!/bin/sh\n",
                       "cluster": {"host": LOGIN, "secretRef": {"name": "login"}},
                       "inputs": [{"configMap": {"name": "c"}, "items": items}]}, REGISTRY)
    tracemalloc.start()
    try:
        found = resolve(spec, namespace="research", secrets={},
                        config_maps={"c": config_map(k="v")},
                        writes_file=REGISTRY["slurm"].writes_file)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert isinstance(found, Unresolved) and found.reason is Reason.INVALID_SPEC
    assert "at most 1024 files" in found.message
    assert peak < 4 * 1024 * 1024, peak


@pytest.mark.parametrize(("first", "second"), [("d", "d/e/f"), ("d/e/f", "d"),
                                               ("d/e", "d/e/f/g"), ("d-e/x", "d/e")])
def test_a_file_inside_another_file_is_refused_at_any_depth(first: str, second: str) -> None:
    spec = parse_spec({"backend": "slurm", "script": "#!/bin/sh\n",
                       "cluster": {"host": LOGIN, "secretRef": {"name": "login"}},
                       "inputs": [{"configMap": {"name": "c"},
                                   "items": [{"key": "k", "path": first},
                                             {"key": "k", "path": second}]}]}, REGISTRY)
    found = resolve(spec, namespace="research", secrets={},
                    config_maps={"c": config_map(k="v")}, writes_file=REGISTRY["slurm"].writes_file)
    if second.startswith(first + "/") or first.startswith(second + "/"):
        assert isinstance(found, Unresolved), found
        assert f"{second!r} is written by another input too" in found.message
    else:
        assert not isinstance(found, Unresolved), found


# --- the log Pod ----------------------------------------------------------------------------


def test_a_log_pod_annotation_naming_another_batchjob_is_not_carried_over() -> None:
    """The annotation is the user's to edit: a Pod rebuilt under another BatchJob's name
    (``other-logs``) would be a child this BatchJob never had."""
    cluster = ClusterRef(LOGIN, 22, "login", False)
    other = JobRequest("research", "other", UID, 1, Spec("slurm", cluster, ""), 0)
    applied = log_pod(other, job_ids=("500",), image="img")
    observed = {**applied, "metadata": {"name": "sim-logs",
                                        "annotations": {LAST_APPLIED: json.dumps(applied)}}}
    assert carried_over(observed, namespace="research", name="sim", uid=UID, image="img",
                        clusters={cluster}) is None
    assert carried_over(observed, namespace="research", name="other", uid=UID, image="img",
                        clusters={cluster}) == applied


# --- workDir ----------------------------------------------------------------------------------


def test_an_empty_component_after_the_home_is_refused() -> None:
    """``~//x`` became the absolute ``/x``; the CRD refuses it as an empty component."""
    with pytest.raises(SpecError):
        work_dir("~//x", "spec.cluster.workDir")
    assert work_dir("~/x", "spec.cluster.workDir") == "x"
    assert status.from_raw({"cluster": {**ATTEMPT, "workDir": "~//x"}}, REGISTRY).cluster is None
