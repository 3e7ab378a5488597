"""Status rendering: deterministic, no nulls, only fields the CRD's status schema declares,
lastTransitionTime moving only when a condition's status flips, and a fixed point when the last
stored status is read back and rendered again (else every status write triggers a sync); the
attempt's route and workDir (written only when not the default, read back only in a form the
spec takes), attemptSpecHash, the Suspended condition, and how often a suspended BatchJob is
synced."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from hooks.core.status.record import CONDITION_TYPES, Status, conditions, from_raw, to_raw
from hooks.core.status.usage import Usage
from hooks.core.values.job import ClusterRef, Hop
from hooks.core.values.phases import Phase
from hooks.core.values.reasons import Reason
from hooks.core.wire.response import MAX_POLL, SLOW_POLL, resync_after
from hooks.schedulers.registry import REGISTRY
from tests.unit.conftest import UID

REPO = Path(__file__).resolve().parents[3]
T0, T1, T2 = "2026-11-22T10:00:00Z", "2026-11-22T10:05:00Z", "2026-11-22T10:10:00Z"
NOW = datetime.datetime(2026, 11, 22, 10, 5, tzinfo=datetime.UTC)
HASH = "0123456789abcdef"
ROUTE = ClusterRef("login.hpc.example.org", 2222, "hpc-login", False,
                   jump=(Hop("bastion.example.org", 22, "hpc-login"),
                         Hop("10.1.2.3", 2200, "inner-hop", True)),
                   work_dir="/scratch/alice/hpcbridge")
PLAIN = ClusterRef("login.hpc.example.org", 22, "hpc-login", False)

STATUSES = {
    "new": Status(),
    "secret-not-found": Status(reason=Reason.SECRET_NOT_FOUND, message="Secret 'x' was not found.",
                               backend="slurm", attempt=1, attempt_generation=1, reachable=False,
                               reachability_reason="SecretNotFound",
                               reachability_message="Secret 'x' was not found."),
    "invalid-spec": Status(phase=Phase.FAILED, reason=Reason.INVALID_SPEC,
                           message="spec.script must start with #!.", backend="slurm"),
    "submitting": Status(reason=Reason.SUBMITTING, message="In flight.", backend="slurm",
                         attempt=1, attempt_generation=1, reachable=True),
    "pending": Status(backend="slurm", job_ids=("4242",), attempt=1, attempt_generation=1,
                      active=1, submit_time=T0, reachable=True),
    "held": Status(reason=Reason.HELD, message="The job is held on the cluster (JobHeldUser).",
                   backend="slurm", job_ids=("4242",), attempt=1, attempt_generation=1, active=1,
                   submit_time=T0, reachable=True),
    "running": Status(phase=Phase.RUNNING, backend="slurm", job_ids=("4242",), attempt=1,
                      attempt_generation=1, active=1, submit_time=T0, start_time=T0,
                      logs_pod="hello-logs", reachable=True),
    "running-unreachable": Status(phase=Phase.RUNNING, reason=Reason.CLUSTER_UNREACHABLE,
                                  message="Connection refused.", backend="slurm",
                                  job_ids=("4242",), attempt=1, attempt_generation=1, active=1,
                                  submit_time=T0, start_time=T0, reachable=False,
                                  reachability_reason="ClusterUnreachable",
                                  reachability_message="Connection refused."),
    "array-running": Status(phase=Phase.RUNNING, backend="slurm",
                            job_ids=tuple(f"7_{i}" for i in range(6)), attempt=2,
                            attempt_generation=3, retries=1, active=4, succeeded=1, failed=1,
                            submit_time=T0, start_time=T0, reachable=True),
    "succeeded": Status(phase=Phase.SUCCEEDED, message="The job completed.", backend="slurm",
                        job_ids=("4242",), attempt=1, attempt_generation=1, succeeded=1,
                        exit_code=0, submit_time=T0, start_time=T0, completion_time=T1,
                        logs_pod="hello-logs", reachable=True),
    "failed": Status(phase=Phase.FAILED, reason=Reason.NON_ZERO_EXIT_CODE,
                     message="The job exited with code 3.", backend="htcondor",
                     job_ids=("15.0",), attempt=1, attempt_generation=1, failed=1, exit_code=3,
                     submit_time=T0, start_time=T0, completion_time=T1, reachable=True),
    "cancelled": Status(phase=Phase.CANCELLED, reason=Reason.CANCELLED_ON_CLUSTER,
                        message="The job was cancelled on the cluster (by 1001).",
                        backend="slurm", job_ids=("4242",), attempt=1, attempt_generation=1,
                        cancelled=1, submit_time=T0, completion_time=T1, reachable=True),
    "lost": Status(phase=Phase.UNKNOWN, reason=Reason.JOB_NOT_FOUND, message="Lost.",
                   backend="slurm", job_ids=("4242",), attempt=1, attempt_generation=1,
                   submit_time=T0, reachable=True),
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
    crd = yaml.safe_load((REPO / "crds" / "batchjob.yaml").read_text())
    version, = crd["spec"]["versions"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]["properties"]["status"]
    return schema


def strict(schema: dict[str, Any]) -> dict[str, Any]:
    """The structural schema as JSON Schema that rejects undeclared keys (the API server would
    prune them, and the next sync would see a change)."""
    out = {k: v for k, v in schema.items() if not k.startswith("x-kubernetes-")}
    if "properties" in schema:
        out["properties"] = {k: strict(v) for k, v in schema["properties"].items()}
        out["additionalProperties"] = False
    if "items" in schema:
        out["items"] = strict(schema["items"])
    return out


def values(node: Any) -> Iterator[Any]:
    yield node
    if isinstance(node, dict):
        for child in node.values():
            yield from values(child)
    elif isinstance(node, list):
        for child in node:
            yield from values(child)


def render(status: Status, previous: object = None, now: str = T1, **kw: Any) -> dict[str, Any]:
    return to_raw(status, previous=previous, now=now, **kw)


@pytest.mark.parametrize("status", CASES)
def test_rendering_is_deterministic(status: Status) -> None:
    first, second = render(status), render(status)
    assert json.dumps(first, sort_keys=False) == json.dumps(second, sort_keys=False)


@pytest.mark.parametrize("status", CASES)
def test_no_null_anywhere(status: Status) -> None:
    for generation in (None, 7):
        assert None not in list(values(render(status, generation=generation)))


@pytest.mark.parametrize("status", CASES)
def test_every_rendered_key_is_declared_in_the_crd(status: Status) -> None:
    schema = strict(status_schema())
    for generation in (None, 3):
        jsonschema.validate(render(status, generation=generation), schema)


@pytest.mark.parametrize("status", CASES)
def test_conditions(status: Status) -> None:
    rendered = render(status)["conditions"]
    assert [c["type"] for c in rendered] == list(CONDITION_TYPES)
    for condition in rendered:
        assert set(condition) == {"type", "status", "reason", "message", "lastTransitionTime"}
        assert condition["status"] in ("True", "False", "Unknown")
        assert condition["reason"], condition  # Kubernetes conditions carry a reason


@pytest.mark.parametrize(
    ("status", "true"),
    [
        pytest.param(STATUSES["new"], set(), id="new"),
        pytest.param(STATUSES["pending"], {"Submitted", "ClusterReachable"}, id="pending"),
        pytest.param(STATUSES["running"],
                     {"Submitted", "Running", "Scheduled", "ClusterReachable"}, id="running"),
        pytest.param(STATUSES["running-unreachable"], {"Submitted", "Running", "Scheduled"},
                     id="running-unreachable"),
        pytest.param(STATUSES["succeeded"],
                     {"Submitted", "Complete", "Scheduled", "ClusterReachable"}, id="succeeded"),
        pytest.param(STATUSES["failed"],
                     {"Submitted", "Failed", "Scheduled", "ClusterReachable"}, id="failed"),
        pytest.param(STATUSES["invalid-spec"], {"Failed"}, id="invalid-spec"),
        pytest.param(STATUSES["cancelled"], {"Submitted", "Failed", "ClusterReachable"},
                     id="cancelled"),
        pytest.param(STATUSES["lost"], {"Submitted", "Failed", "ClusterReachable"}, id="lost"),
    ],
)
def test_which_conditions_are_true(status: Status, true: set[str]) -> None:
    assert {c["type"] for c in conditions(status) if c["status"] == "True"} == true


@pytest.mark.parametrize(
    ("status", "reason"),
    [pytest.param(STATUSES["cancelled"], "CancelledOnCluster", id="cancelled"),
     pytest.param(STATUSES["lost"], "JobNotFound", id="lost"),
     pytest.param(STATUSES["failed"], "NonZeroExitCode", id="failed")],
)
def test_every_end_but_success_is_told_by_the_failed_condition(status: Status,
                                                                reason: str) -> None:
    """``kubectl wait --for=condition=Failed`` returns for a cancelled job and for one the
    scheduler lost, as for a failed one, with the typed reason and the message."""
    found = {c["type"]: c for c in conditions(status)}
    assert (found["Failed"]["status"], found["Failed"]["reason"]) == ("True", reason)
    assert found["Failed"]["message"] == status.message
    assert found["Complete"]["status"] == "False"


def test_cluster_reachable_is_unknown_before_the_first_contact() -> None:
    reachable, = (c for c in conditions(Status()) if c["type"] == "ClusterReachable")
    assert reachable["status"] == "Unknown"


def test_unreachable_condition_carries_the_reason() -> None:
    reachable, = (c for c in conditions(STATUSES["running-unreachable"])
                  if c["type"] == "ClusterReachable")
    assert (reachable["status"], reachable["reason"], reachable["message"]) == (
        "False", "ClusterUnreachable", "Connection refused."
    )


def stamps(raw: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["lastTransitionTime"] for c in raw["conditions"]}


def test_first_render_stamps_every_condition_now() -> None:
    assert set(stamps(render(STATUSES["pending"], now=T0)).values()) == {T0}


def test_last_transition_time_only_moves_when_the_status_flips() -> None:
    pending = render(STATUSES["pending"], now=T0)
    # Same statuses, another message and reason: nothing moves.
    held = render(STATUSES["held"], previous=pending, now=T1)
    assert stamps(held) == stamps(pending)
    # Running flips False -> True; Complete and Failed stay False, so they keep T0.
    running = render(STATUSES["running"], previous=held, now=T1)
    assert stamps(running) == {**stamps(pending), "Running": T1, "Scheduled": T1}
    # Succeeded: Running flips back, Complete flips on.
    done = render(STATUSES["succeeded"], previous=running, now=T2)
    assert stamps(done) == {**stamps(pending), "Running": T2, "Complete": T2, "Scheduled": T1}


def test_unreachable_moves_only_cluster_reachable() -> None:
    running = render(STATUSES["running"], now=T0)
    unreachable = render(STATUSES["running-unreachable"], previous=running, now=T1)
    assert stamps(unreachable) == {**stamps(running), "ClusterReachable": T1}


@pytest.mark.parametrize(
    "previous",
    [
        pytest.param(None, id="none"),
        pytest.param("garbage", id="not-an-object"),
        pytest.param({"conditions": [{"type": "Running", "status": "False"}]}, id="no-stamp"),
        pytest.param({"conditions": [{"type": "Running", "status": "False",
                                      "lastTransitionTime": 17}]}, id="stamp-not-text"),
        pytest.param({"conditions": ["Running", None]}, id="conditions-not-objects"),
        pytest.param({"conditions": [{"type": ["Running"], "status": "False",
                                      "lastTransitionTime": T0}]}, id="type-not-text"),
    ],
)
def test_broken_previous_conditions_are_stamped_now(previous: object) -> None:
    assert set(stamps(render(STATUSES["pending"], previous=previous, now=T2)).values()) == {T2}


@pytest.mark.parametrize("status", CASES)
def test_reading_back_and_rendering_again_is_a_fixed_point(status: Status) -> None:
    stored = render(status, now=T0)
    read = from_raw(stored, REGISTRY)
    assert (read.cluster, read.spec_hash, read.reason) == (status.cluster, status.spec_hash,
                                                         status.reason)
    assert to_raw(read, previous=stored, now=T2) == stored


@pytest.mark.parametrize("status", CASES)
def test_observed_generation_only_when_given(status: Status) -> None:
    assert "observedGeneration" not in render(status)
    assert render(status, generation=5)["observedGeneration"] == 5


@pytest.mark.parametrize(
    ("field", "status", "present"),
    [
        pytest.param("exitCode", STATUSES["running"], False, id="exit-code-before-the-end"),
        pytest.param("exitCode", STATUSES["succeeded"], True, id="exit-code-after-the-end"),
        pytest.param("completionTime", STATUSES["running"], False, id="completion-running"),
        pytest.param("startTime", STATUSES["pending"], False, id="start-pending"),
        pytest.param("logsPod", STATUSES["new"], False, id="no-logs-pod"),
        pytest.param("logsPod", STATUSES["running"], True, id="logs-pod"),
    ],
)
def test_optional_fields(field: str, status: Status, present: bool) -> None:
    assert (field in render(status)) is present


def test_printer_columns_read_rendered_fields() -> None:
    crd = yaml.safe_load((REPO / "crds" / "batchjob.yaml").read_text())
    rendered = render(replace(STATUSES["array-running"], scheduler_reason="Priority",
                              usage=Usage(elapsed_seconds=1)))
    columns = crd["spec"]["versions"][0]["additionalPrinterColumns"]
    for column in columns:
        path = column["jsonPath"]
        if path.startswith(".status."):
            field, *inner = path.removeprefix(".status.").split("[")[0].split(".")
            assert field in rendered and all(key in rendered[field] for key in inner), column


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(None, Status(), id="none"),
        pytest.param("x", Status(), id="not-an-object"),
        pytest.param({"phase": "Sideways", "reason": "Whatever"}, Status(), id="unknown-enums"),
        pytest.param({"attempt": -1, "active": "3", "retries": True}, Status(),
                     id="bad-counts"),
        pytest.param({"exitCode": "3"}, Status(), id="exit-code-text"),
        pytest.param({"submitTime": ""}, Status(), id="empty-time"),
        pytest.param({"backend": "slurm", "jobIDs": ["7_1", 7, None]},
                     Status(backend="slurm", job_ids=("7_1", "7")), id="mixed-ids"),
        pytest.param({"conditions": [{"type": "ClusterReachable", "status": ["True"],
                                      "reason": 7}]}, Status(), id="reachability-not-text"),
    ],
)
def test_from_raw_falls_back_on_broken_fields(raw: object, expected: Status) -> None:
    assert from_raw(raw, REGISTRY) == expected


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param({"jobIDs": 5}, id="job-ids-number"),
        pytest.param({"jobIDs": "4242"}, id="job-ids-string"),
        pytest.param({"conditions": 5}, id="conditions-number"),
    ],
)
def test_from_raw_falls_back_on_non_list_fields(raw: dict[str, Any]) -> None:
    assert from_raw(raw, REGISTRY).job_ids in ((), ("4242",))


@pytest.mark.parametrize("cluster", [
    pytest.param({"host": "h", "port": 70000, "secretRef": {"name": "s"}}, id="port-too-big"),
    pytest.param({"host": "h", "port": 0, "secretRef": {"name": "s"}}, id="port-zero"),
    pytest.param({"host": "h", "port": True, "secretRef": {"name": "s"}}, id="port-bool"),
    pytest.param({"host": "h\x00x", "port": 22, "secretRef": {"name": "s"}}, id="host-nul"),
    pytest.param({"host": "h", "port": 22, "secretRef": {"name": "../s"}}, id="secret-path"),
])
def test_a_stored_cluster_the_hooks_could_not_have_written_is_none(
    cluster: dict[str, Any]
) -> None:
    assert from_raw({"cluster": cluster}, REGISTRY).cluster is None


def test_stored_numbers_out_of_range_are_ignored() -> None:
    stored = from_raw({"attempt": 10**5000, "active": 2**64, "exitCode": -(10**30),
                       "retries": 3}, REGISTRY)
    assert (stored.attempt, stored.active, stored.exit_code, stored.retries) == (0, 0, None, 3)


# --- the route, workDir and attemptSpecHash ------------------------------------------------------


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
    assert stamps(held)["Suspended"] == T1
    assert stamps(held)["Submitted"] == T0
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
