"""``spec.dependsOn`` through whole sync calls of the pure core: nothing is submitted (and no
input staged) until every dependency reached its condition; a dependency that can no longer
reach it, is deleted, or never appears ends the dependent ``DependencyFailed``; cycles are
``InvalidSpec``; an attempt already submitted is never touched by its dependencies; and every
dependency field is read as hostile."""

from __future__ import annotations

import copy
import datetime
from typing import Any

import pytest

from hooks.core.decide.effects import Query
from hooks.core.spec.batchjob import parse
from hooks.core.status.dependencies import MAX_UPSTREAM
from hooks.core.values.phases import Outcome, TaskState
from hooks.core.wire.request import BATCHJOB_GROUP, customize
from hooks.schedulers.registry import REGISTRY
from tests.unit.builders import SUBMITTED, Loop, request
from tests.unit.conftest import NOW

CREATED = "2026-11-22T10:04:00Z"


def dependency(name: str, phase: str | None, *, attempt: int = 1, uid: str = "",
               generation: int = 1, observed: int | None = 1, **status: Any) -> dict[str, Any]:
    """A BatchJob of research as Metacontroller hands it over, in ``phase``."""
    obj: dict[str, Any] = {
        "apiVersion": "hpcbridge.io/v1alpha1", "kind": "BatchJob",
        "metadata": {"name": name, "namespace": "research", "uid": uid or f"uid-{name}",
                     "generation": generation},
        "spec": status.pop("spec", {}),
        "status": {},
    }
    if phase is not None:
        obj["status"] = {"phase": phase, "attempt": attempt, **status}
    if observed is not None:
        obj["status"]["observedGeneration"] = observed
    return obj


def waiting(*depends: dict[str, Any], **related: dict[str, Any]) -> Loop:
    """The BatchJob ``sim`` of research, depending on ``depends``, with ``related`` handed
    over."""
    body = request({"dependsOn": list(depends)})
    body["parent"]["metadata"]["creationTimestamp"] = CREATED
    body["related"][BATCHJOB_GROUP] = dict(related)
    return Loop(body)


def hand_over(loop: Loop, **related: dict[str, Any]) -> None:
    loop.body["related"][BATCHJOB_GROUP] = dict(related)


def test_customize_asks_for_the_batchjobs_named_in_its_namespace() -> None:
    body = request({"dependsOn": [{"name": "prep"}, {"name": "calib", "condition": "Failed"},
                                  {"name": "Not A Name"}]})
    rules = customize(body)["relatedResources"]
    assert {"apiVersion": "hpcbridge.io/v1alpha1", "resource": "batchjobs",
            "namespace": "research", "names": ["calib", "prep"]} in rules


def test_nothing_is_submitted_until_every_dependency_succeeded() -> None:
    loop = waiting({"name": "prep"}, {"name": "calib"},
                   prep=dependency("prep", "Succeeded", attempt=2),
                   calib=dependency("calib", "Running"))
    run = loop.sync(SUBMITTED)
    assert run.kinds == []
    assert (run.status["phase"], run.status["reason"]) == ("Pending", "WaitingForDependency")
    assert run.status["message"] == (
        "Waiting for dependency calib to reach Succeeded (it is Running).")
    assert run.status["dependencies"] == [
        {"name": "prep", "condition": "Succeeded", "met": True, "uid": "uid-prep",
         "phase": "Succeeded", "attempt": 2},
        {"name": "calib", "condition": "Succeeded", "met": False, "uid": "uid-calib",
         "phase": "Running", "attempt": 1},
    ]
    assert run.answer.body["resyncAfterSeconds"] >= 30
    hand_over(loop, prep=dependency("prep", "Succeeded", attempt=2),
              calib=dependency("calib", "Succeeded"))
    run = loop.sync(SUBMITTED)
    assert run.kinds == ["Submit", "Track"]
    assert [d["met"] for d in run.status["dependencies"]] == [True, True]
    # The attempt keeps what it was built from, whatever its dependencies do next.
    hand_over(loop, prep=dependency("prep", "Pending", attempt=3), calib=dependency(
        "calib", "Failed"))
    run = loop.sync({Query: [TaskState("500", Outcome.RUNNING)]})
    assert run.kinds == ["Query"]
    assert run.status["phase"] == "Running"
    assert [(d["phase"], d["attempt"]) for d in run.status["dependencies"]] == [
        ("Succeeded", 2), ("Succeeded", 1)]


@pytest.mark.parametrize(
    ("condition", "phase", "verdict"),
    [
        pytest.param("Succeeded", "Failed", "DependencyFailed", id="succeeded-but-failed"),
        pytest.param("Succeeded", "Cancelled", "DependencyFailed", id="succeeded-but-cancelled"),
        pytest.param("Failed", "Succeeded", "DependencyFailed", id="failed-but-succeeded"),
        pytest.param("Failed", "Failed", "submitted", id="failed-met"),
        pytest.param("Failed", "Cancelled", "submitted", id="failed-met-by-cancel"),
        pytest.param("Finished", "Failed", "submitted", id="finished-failed"),
        pytest.param("Finished", "Succeeded", "submitted", id="finished-succeeded"),
        pytest.param("Finished", "Unknown", "WaitingForDependency", id="finished-unknown"),
        pytest.param("Succeeded", "Pending", "WaitingForDependency", id="pending"),
    ],
)
def test_conditions(condition: str, phase: str, verdict: str) -> None:
    loop = waiting({"name": "prep", "condition": condition},
                   prep=dependency("prep", phase))
    run = loop.sync(SUBMITTED)
    if verdict == "submitted":
        assert run.kinds == ["Submit", "Track"]
        return
    assert run.kinds == []
    assert run.status["reason"] == verdict
    if verdict == "DependencyFailed":
        assert run.status["phase"] == "Failed"
        assert run.status["message"] == (
            f"Dependency prep ended {phase} (attempt 1), so its condition {condition} can no "
            "longer be met.")
        assert run.answer.body.get("resyncAfterSeconds", 0) == 0
        assert loop.sync(SUBMITTED).kinds == []  # final: never a job that runs anyway


def test_a_missing_dependency_is_waited_for_then_fails_after_the_grace_period() -> None:
    loop = waiting({"name": "later"})
    run = loop.sync(SUBMITTED)
    assert (run.status["reason"], run.kinds) == ("WaitingForDependency", [])
    assert "does not exist yet (for up to 300 s" in run.status["message"]
    assert run.status["dependencies"] == [
        {"name": "later", "condition": "Succeeded", "met": False}]
    loop.later(240)
    run = loop.sync(SUBMITTED)
    assert (run.status["phase"], run.status["reason"]) == ("Failed", "DependencyFailed")
    assert run.status["message"] == (
        "Dependency later does not exist (300 s after this BatchJob was created; "
        "spec.dependencyGracePeriodSeconds).")


def test_a_dependency_created_after_the_dependent_is_followed() -> None:
    loop = waiting({"name": "later"})
    assert loop.sync(SUBMITTED).status["reason"] == "WaitingForDependency"
    hand_over(loop, later=dependency("later", "Running"))
    assert loop.sync(SUBMITTED).status["message"] == (
        "Waiting for dependency later to reach Succeeded (it is Running).")
    hand_over(loop, later=dependency("later", "Succeeded"))
    assert loop.sync(SUBMITTED).kinds == ["Submit", "Track"]


def test_a_dependency_deleted_while_waited_for_fails_the_dependent() -> None:
    loop = waiting({"name": "prep"}, prep=dependency("prep", "Running"))
    assert loop.sync(SUBMITTED).status["reason"] == "WaitingForDependency"
    hand_over(loop)
    run = loop.sync(SUBMITTED)
    assert (run.status["reason"], run.status["message"]) == (
        "DependencyFailed", "Dependency prep was deleted.")
    loop = waiting({"name": "prep"}, prep=dependency("prep", "Running"))
    loop.sync(SUBMITTED)
    hand_over(loop, prep=dependency("prep", "Succeeded", uid="another"))
    run = loop.sync(SUBMITTED)
    assert run.status["reason"] == "DependencyFailed"
    assert "was deleted (a new BatchJob of that name is another one)" in run.status["message"]
    deleting = dependency("prep", "Succeeded")
    deleting["metadata"]["deletionTimestamp"] = "2026-11-22T10:04:30Z"
    run = waiting({"name": "prep"}, prep=deleting).sync(SUBMITTED)
    assert (run.status["reason"], run.kinds) == ("DependencyFailed", [])


def test_a_dependency_edited_waits_for_its_new_attempt() -> None:
    """A rerun (a new spec the dependency's own sync has not seen yet) is not the result
    the dependent was built from."""
    loop = waiting({"name": "prep"},
                   prep=dependency("prep", "Succeeded", generation=2, observed=1))
    run = loop.sync(SUBMITTED)
    assert (run.status["reason"], run.kinds) == ("WaitingForDependency", [])
    assert "has not been synced yet" in run.status["message"]
    hand_over(loop, prep=dependency("prep", "Pending", attempt=2, generation=2, observed=2))
    assert loop.sync(SUBMITTED).kinds == []
    hand_over(loop, prep=dependency("prep", "Succeeded", attempt=2, generation=2, observed=2))
    run = loop.sync(SUBMITTED)
    assert run.kinds == ["Submit", "Track"]
    assert run.status["dependencies"][0]["attempt"] == 2


@pytest.mark.parametrize(
    ("related", "words"),
    [
        pytest.param({}, "names the BatchJob itself (sim)", id="itself"),
        pytest.param({"prep": dependency("prep", "Pending", spec={"dependsOn": [
            {"name": "sim"}]})}, "sim depends on prep, which waits", id="two"),
        pytest.param({"prep": dependency("prep", "Pending", dependencies=[
            {"name": "calib", "met": False, "upstream": ["sim", "other"]}])},
            "sim depends on prep, which waits (directly or through others) for sim",
            id="longer"),
    ],
)
def test_a_cycle_is_an_invalid_spec(related: dict[str, Any], words: str) -> None:
    name = "sim" if not related else "prep"
    loop = waiting({"name": name}, **related)
    run = loop.sync(SUBMITTED)
    assert (run.status["phase"], run.status["reason"], run.kinds) == (
        "Failed", "InvalidSpec", [])
    assert words in run.status["message"]


def test_a_waiting_batchjob_tells_what_it_waits_for_so_that_a_longer_cycle_closes() -> None:
    """a -> b -> c -> a: each sees what the next still waits for, until one sees itself."""
    statuses: dict[str, dict[str, Any]] = {}
    loops = {}
    for name, after in (("a", "b"), ("b", "c"), ("c", "a")):
        body = request({"dependsOn": [{"name": after}]})
        body["parent"]["metadata"].update(name=name, creationTimestamp=CREATED)
        loops[name] = Loop(body)
    verdicts: dict[str, str] = {}
    for _ in range(4):
        for name, after in (("a", "b"), ("b", "c"), ("c", "a")):
            if after in statuses:
                hand_over(loops[name], **{after: dependency(after, "Pending",
                                                            **statuses[after])})
            status = loops[name].sync(SUBMITTED).status
            statuses[name] = {"dependencies": status.get("dependencies", []),
                              "reason": status["reason"]}
            verdicts[name] = status["reason"]
    assert "InvalidSpec" in verdicts.values()


def test_upstream_is_bounded() -> None:
    many = [f"n{i}" for i in range(200)]
    loop = waiting({"name": "prep"}, prep=dependency("prep", "Pending", dependencies=[
        {"name": "x", "met": False, "upstream": many}]))
    (entry,) = loop.sync(SUBMITTED).status["dependencies"]
    assert len(entry["upstream"]) == MAX_UPSTREAM


@pytest.mark.parametrize(
    "hostile",
    [
        pytest.param({"kind": "Pod"}, id="not-a-batchjob"),
        pytest.param({"metadata": {"name": "other", "namespace": "research"}}, id="other-name"),
        pytest.param({"metadata": {"name": "prep", "namespace": "elsewhere"}},
                     id="other-namespace"),
        pytest.param({"status": {"phase": ["Succeeded"], "attempt": "1"}}, id="junk-status"),
        pytest.param({"status": "Succeeded"}, id="status-not-an-object"),
        pytest.param({"spec": {"dependsOn": "sim"}}, id="junk-spec"),
    ],
)
def test_a_hostile_dependency_is_never_taken_for_one_that_succeeded(
        hostile: dict[str, Any]) -> None:
    obj = dependency("prep", "Pending")
    for key, value in hostile.items():
        obj[key] = {**obj[key], **value} if isinstance(value, dict) and isinstance(
            obj.get(key), dict) else value
    run = waiting({"name": "prep"}, prep=obj).sync(SUBMITTED)
    assert run.kinds == []
    assert run.status["reason"] in ("WaitingForDependency", "DependencyFailed")


def test_a_hostile_stored_dependencies_list_is_read_as_nothing_seen() -> None:
    loop = waiting({"name": "prep"}, prep=dependency("prep", "Running"))
    loop.body["parent"]["status"] = {"phase": "Pending", "dependencies": [
        "junk", {"name": "../x"}, {"name": "prep", "uid": ["x"], "met": "yes",
                                   "upstream": "sim"}]}
    run = loop.sync(SUBMITTED)
    assert run.status["reason"] == "WaitingForDependency"
    assert run.status["dependencies"][0]["met"] is False


@pytest.mark.parametrize(
    ("depends", "words"),
    [
        pytest.param("prep", "spec.dependsOn must be a list", id="not-a-list"),
        pytest.param([{"name": f"n{i}"} for i in range(33)], "at most 32", id="too-many"),
        pytest.param([{"name": "Prep!"}], "spec.dependsOn[0].name must name a BatchJob",
                     id="bad-name"),
        pytest.param([{"name": "prep", "condition": "Done"}],
                     "must be Succeeded, Failed or Finished", id="bad-condition"),
        pytest.param([{"name": "prep"}, {"name": "prep"}], "names prep twice", id="twice"),
        pytest.param([{"name": "prep", "namespace": "x"}], "has 'namespace'",
                     id="other-namespace"),
    ],
)
def test_invalid_depends_on(depends: object, words: str) -> None:
    raw = copy.deepcopy(request({"dependsOn": depends})["parent"]["spec"])
    parsed = parse(raw, REGISTRY)
    assert parsed.spec is None
    assert words in parsed.error


def test_the_grace_period_is_the_specs() -> None:
    loop = waiting({"name": "later"})
    loop.body["parent"]["spec"]["dependencyGracePeriodSeconds"] = 30
    loop.now = datetime.datetime(2026, 11, 22, 10, 4, 10, tzinfo=datetime.UTC)
    assert loop.sync(SUBMITTED).status["reason"] == "WaitingForDependency"
    loop.now = NOW
    run = loop.sync(SUBMITTED)
    assert (run.status["reason"], run.status["message"]) == (
        "DependencyFailed", "Dependency later does not exist (30 s after this BatchJob was "
        "created; spec.dependencyGracePeriodSeconds).")


def test_without_depends_on_nothing_changes() -> None:
    run = Loop(request()).sync(SUBMITTED)
    assert run.kinds == ["Submit", "Track"]
    assert "dependencies" not in run.status
