"""The status fields of the site features: the attempt's route and workDir (written only when
not the default, read back only in a form the spec takes), attemptSpecHash, and the sixth
condition, Suspended; and how often a suspended BatchJob is synced."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from hooks.core.model import ClusterRef, Hop, Phase, Reason
from hooks.core.response import MAX_POLL, SLOW_POLL, resync_after
from hooks.core.status import CONDITION_TYPES, Status, conditions, from_raw, to_raw
from hooks.schedulers import REGISTRY
from tests.unit.conftest import UID
from tests.unit.test_status import status_schema as crd_status_schema
from tests.unit.test_status import strict

REPO = Path(__file__).resolve().parents[2]
T0, T1 = "2026-11-22T10:00:00Z", "2026-11-22T10:05:00Z"
NOW = datetime.datetime(2026, 11, 22, 10, 5, tzinfo=datetime.UTC)
HASH = "0123456789abcdef"
ROUTE = ClusterRef("login.hpc.example.org", 2222, "hpc-login", False,
                   jump=(Hop("bastion.example.org", 22, "hpc-login"),
                         Hop("10.1.2.3", 2200, "inner-hop", True)),
                   work_dir="/scratch/alice/hpcbridge")
PLAIN = ClusterRef("login.hpc.example.org", 22, "hpc-login", False)

STATUSES = {
    "suspended-before-submission": Status(
        reason=Reason.SUSPENDED, message="The BatchJob is suspended.", backend="slurm",
        attempt=1, attempt_generation=1),
    "held-for-suspend": Status(
        reason=Reason.SUSPENDED, message="The BatchJob is suspended; job 4242 is held.",
        backend="slurm", job_ids=("4242",), attempt=1, attempt_generation=1, active=1,
        submit_time=T0, cluster=ROUTE, reachable=True, spec_hash=HASH),
    "suspended-by-the-scheduler": Status(
        phase=Phase.RUNNING, reason=Reason.SUSPENDED, message="The job is suspended.",
        backend="slurm", job_ids=("4242",), attempt=1, attempt_generation=1, active=1,
        submit_time=T0, start_time=T0, cluster=PLAIN, reachable=True, spec_hash=HASH),
    "deadline-exceeded": Status(
        phase=Phase.FAILED, reason=Reason.DEADLINE_EXCEEDED, message="Too long.",
        backend="htcondor", job_ids=("15.0", "15.1"), attempt=1, attempt_generation=1,
        cancelled=2, submit_time=T0, completion_time=T1, cluster=ROUTE, reachable=True,
        spec_hash=HASH),
    "waiting-for-a-config-map": Status(
        reason=Reason.CONFIG_MAP_NOT_FOUND, message="ConfigMap 'params' was not found.",
        backend="slurm", attempt=1, attempt_generation=1, cluster=ROUTE,
        reachability_reason="ConfigMapNotFound",
        reachability_message="ConfigMap 'params' was not found."),
}
CASES = [pytest.param(s, id=name) for name, s in STATUSES.items()]


def status_schema() -> dict[str, Any]:
    return strict(crd_status_schema())


def render(status: Status, previous: object = None, now: str = T1) -> dict[str, Any]:
    return to_raw(status, previous=previous, now=now)


@pytest.mark.parametrize("status", CASES)
def test_every_rendered_key_is_declared_in_the_crd(status: Status) -> None:
    jsonschema.validate(render(status), status_schema())


@pytest.mark.parametrize("status", CASES)
def test_reading_back_and_rendering_again_is_a_fixed_point(status: Status) -> None:
    stored = render(status, now=T0)
    read = from_raw(stored, REGISTRY)
    assert (read.cluster, read.spec_hash, read.reason) == (status.cluster, status.spec_hash,
                                                         status.reason)
    assert to_raw(from_raw(stored, REGISTRY), previous=stored, now=T1) == stored


def test_the_route_and_work_dir_as_stored() -> None:
    assert render(STATUSES["held-for-suspend"])["cluster"] == {
        "host": "login.hpc.example.org", "port": 2222, "secretRef": {"name": "hpc-login"},
        "insecureSkipHostKeyCheck": False,
        "jump": [
            {"host": "bastion.example.org", "port": 22, "secretRef": {"name": "hpc-login"},
             "insecureSkipHostKeyCheck": False},
            {"host": "10.1.2.3", "port": 2200, "secretRef": {"name": "inner-hop"},
             "insecureSkipHostKeyCheck": True},
        ],
        "workDir": "/scratch/alice/hpcbridge",
    }


def test_no_jump_and_the_default_work_dir_are_not_written() -> None:
    """A status written before these features existed reads and renders the same."""
    cluster = render(STATUSES["suspended-by-the-scheduler"])["cluster"]
    assert set(cluster) == {"host", "port", "secretRef", "insecureSkipHostKeyCheck"}


def test_a_relative_work_dir_round_trips() -> None:
    status = Status(cluster=ClusterRef("h", 22, "s", False, work_dir="jobs/bridge"))
    assert render(status)["cluster"]["workDir"] == "jobs/bridge"
    assert from_raw(render(status), REGISTRY).cluster == status.cluster


def test_a_stored_route_reads_as_the_spec_reads_it() -> None:
    """A hop without its host key choice verifies, one without a Secret logs in with the
    cluster's, as in spec.cluster."""
    stored = {"host": "h", "port": 22, "secretRef": {"name": "s"},
              "jump": [{"host": "b", "port": 22, "secretRef": {"name": "t"}}, {"host": "c"}]}
    cluster = from_raw({"cluster": stored}, REGISTRY).cluster
    assert cluster is not None
    assert cluster.jump == (Hop("b", 22, "t", False), Hop("c", 22, "s", False))


HOP = {"host": "b", "port": 22, "secretRef": {"name": "s"}}


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"jump": [HOP] * 4}, id="four-hops"),
        pytest.param({"jump": HOP}, id="jump-an-object"),
        pytest.param({"jump": [{**HOP, "port": 0}]}, id="hop-port-zero"),
        pytest.param({"jump": [{**HOP, "port": "22"}]}, id="hop-port-text"),
        pytest.param({"jump": [{**HOP, "secretRef": {"name": "../x"}}]}, id="hop-secret-path"),
        pytest.param({"jump": [{**HOP, "host": "a,b"}]}, id="hop-host-comma"),
        pytest.param({"jump": [{**HOP, "insecureSkipHostKeyCheck": "yes"}]},
                     id="hop-insecure-text"),
        pytest.param({"jump": ["b"]}, id="hop-a-string"),
        pytest.param({"workDir": "/"}, id="work-dir-root"),
        pytest.param({"workDir": "a/../b"}, id="work-dir-parent"),
        pytest.param({"workDir": "a\nb"}, id="work-dir-newline"),
        pytest.param({"workDir": ""}, id="work-dir-empty"),
        pytest.param({"workDir": 7}, id="work-dir-a-number"),
    ],
)
def test_a_stored_route_the_hooks_could_not_have_written_is_no_cluster(
    changes: dict[str, Any]
) -> None:
    stored = {"host": "h", "port": 22, "secretRef": {"name": "s"}, **changes}
    assert from_raw({"cluster": stored}, REGISTRY).cluster is None


@pytest.mark.parametrize(
    ("stored", "read"),
    [
        pytest.param(HASH, HASH, id="sixteen-hex-digits"),
        pytest.param(HASH.upper(), "", id="upper-case"),
        pytest.param(HASH[:-1], "", id="fifteen"),
        pytest.param(HASH + "0", "", id="seventeen"),
        pytest.param(12345, "", id="a-number"),
        pytest.param(None, "", id="none"),
    ],
)
def test_attempt_spec_hash(stored: object, read: str) -> None:
    assert from_raw({"attemptSpecHash": stored}, REGISTRY).spec_hash == read


def test_an_empty_spec_hash_is_not_written() -> None:
    assert "attemptSpecHash" not in render(Status())
    assert render(STATUSES["held-for-suspend"])["attemptSpecHash"] == HASH


# --- the Suspended condition ---------------------------------------------------------------------


def suspended(status: Status) -> dict[str, str]:
    found = conditions(status)
    assert [c["type"] for c in found] == list(CONDITION_TYPES)
    assert found[-1]["type"] == "Suspended"
    return found[-1]


@pytest.mark.parametrize(
    "status",
    [pytest.param(STATUSES[name], id=name) for name in
     ("suspended-before-submission", "held-for-suspend", "suspended-by-the-scheduler")],
)
def test_suspended_is_true_with_the_reason(status: Status) -> None:
    assert suspended(status) == {"type": "Suspended", "status": "True", "reason": "Suspended",
                                 "message": status.message}


@pytest.mark.parametrize(
    "status",
    [
        pytest.param(Status(), id="new"),
        pytest.param(Status(reason=Reason.HELD, message="held by an admin", job_ids=("1",),
                            attempt=1), id="held-by-the-scheduler"),
        pytest.param(STATUSES["deadline-exceeded"], id="deadline-exceeded"),
    ],
)
def test_suspended_is_false_otherwise(status: Status) -> None:
    assert suspended(status) == {"type": "Suspended", "status": "False",
                                 "reason": "NotSuspended", "message": ""}


def test_a_suspended_batchjob_that_was_never_submitted_is_not_submitted() -> None:
    found = {c["type"]: c for c in conditions(STATUSES["suspended-before-submission"])}
    assert (found["Submitted"]["status"], found["Submitted"]["reason"]) == ("False", "Suspended")


def test_deadline_exceeded_is_a_failure() -> None:
    found = {c["type"]: c for c in conditions(STATUSES["deadline-exceeded"])}
    assert (found["Failed"]["status"], found["Failed"]["reason"]) == ("True", "DeadlineExceeded")


def test_the_suspended_condition_moves_only_when_it_flips() -> None:
    pending = Status(job_ids=("4242",), attempt=1, reachable=True)
    first = render(pending, now=T0)
    held = render(STATUSES["held-for-suspend"], previous=first, now=T1)
    stamps = {c["type"]: c["lastTransitionTime"] for c in held["conditions"]}
    assert stamps["Suspended"] == T1
    assert stamps["Submitted"] == T0
    again = render(STATUSES["held-for-suspend"], previous=held, now="2026-11-22T11:00:00Z")
    assert again["conditions"] == held["conditions"]


# --- resync --------------------------------------------------------------------------------------


def test_a_batchjob_suspended_before_submission_is_synced_slowly() -> None:
    seconds = resync_after(STATUSES["suspended-before-submission"], previous=None, uid=UID,
                           now=NOW)
    assert SLOW_POLL * 0.75 <= seconds <= SLOW_POLL


def test_a_held_batchjob_is_polled_like_any_queued_one() -> None:
    seconds = resync_after(STATUSES["held-for-suspend"], previous=None, uid=UID, now=NOW)
    assert 0 < seconds <= MAX_POLL


def test_a_batchjob_past_its_deadline_is_not_polled() -> None:
    assert resync_after(STATUSES["deadline-exceeded"], previous=None, uid=UID, now=NOW) == 0
