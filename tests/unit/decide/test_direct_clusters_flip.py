"""HPCBRIDGE_DIRECT_CLUSTERS turned to false while an attempt of a BatchJob that names its host
runs (an upgrade to deploy/'s default): the attempt keeps being tracked, cancelled and
finalized where it runs, along the route kept in its status; nothing is submitted again, and
the next attempt is refused until the BatchJob names a BatchCluster."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from hooks.core.decide import finalize, sync
from hooks.core.decide.effects import Cancel, Cleanup, ListActive, MarkEnded, Query
from hooks.core.values.phases import Outcome, TaskState
from hooks.core.values.reasons import Reason
from hooks.core.wire.request import parse_call
from hooks.schedulers.registry import REGISTRY
from tests.unit.builders import LOGIN, SUBMITTED, Run, drive, queue, request, running
from tests.unit.conftest import NOW, POLICY

NAMED_ONLY = dataclasses.replace(POLICY, direct_clusters=False)


def flipped() -> dict[str, Any]:
    """The request of a BatchJob naming its host, whose attempt 1 was submitted as job 500
    while the installation allowed that."""
    body = request({"backoffLimit": 2})
    run = drive(sync.decide(parse_call(copy.deepcopy(body), rules=REGISTRY, policy=POLICY,
                                       now=NOW)), SUBMITTED)
    assert run.kinds == ["Submit", "Track"]
    body["parent"]["status"] = run.status
    return body


def named_only(body: dict[str, Any], results: dict[type, Any]) -> Run:
    effects: list[Any] = []
    decide = finalize.decide if body.get("finalizing") else sync.decide
    run = drive(decide(parse_call(copy.deepcopy(body), rules=REGISTRY, policy=NAMED_ONLY,
                                  now=NOW)), results, effects)
    assert all(effect.placement.cluster.host == LOGIN for effect in effects)
    body["parent"]["status"] = run.status
    return run


def test_the_running_attempt_is_still_tracked_where_it_runs() -> None:
    body = flipped()
    run = named_only(body, queue(running()))
    assert "Submit" not in run.kinds and "Query" in run.kinds
    assert run.status["phase"] == "Running"
    assert run.status["cluster"]["host"] == LOGIN


def test_the_attempt_that_fails_is_finished_there_and_not_retried() -> None:
    """Its backoffLimit is the spec's, which no longer parses: no retry goes out."""
    body = flipped()
    failed = TaskState("500", Outcome.FAILED, Reason.NON_ZERO_EXIT_CODE, exit_code=1)
    run = named_only(body, {**queue(failed), MarkEnded: None})
    assert "Submit" not in run.kinds
    again = named_only(body, {Query: [failed]})
    assert "Submit" not in again.kinds
    assert (again.status["phase"], again.status["reason"]) == ("Failed", "NonZeroExitCode")
    assert again.status["attempt"] == 1 and again.status["jobIDs"] == ["500"]


def test_deletion_cancels_and_finalizes_it_where_it_runs() -> None:
    body = flipped()
    body["finalizing"] = True
    run = named_only(body, {ListActive: ("500",), Cancel: None})
    assert "Cancel" in run.kinds and "Submit" not in run.kinds
    assert run.action(Cancel).job_ids == ("500",)
    done = named_only(body, {ListActive: (), Cleanup: "removed"})
    assert done.kinds[-2:] == ["Cleanup", "Forget"]
    assert done.answer.body["finalized"] is True
