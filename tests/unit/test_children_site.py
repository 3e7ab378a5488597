"""The log Pod of an attempt behind jump hosts and under a workDir: one --jump per hop, each
jump Secret that is not the cluster's as a read-only volume of its own, the remote directory
as written; and such a Pod carried over between attempts, but never one edited by hand."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hooks.core import answer
from hooks.core.children import LAST_APPLIED, SECRET_MOUNT, carried_over, log_pod
from hooks.core.model import JobRequest, Phase
from hooks.core.status import Status
from tests.unit.builders import request
from tests.unit.conftest import IMAGE, UID, call
from tests.unit.conftest import job as build_job
from tests.unit.test_children import Anywhere

JUMP = [{"host": "bastion.example.org"},
        {"host": "10.1.2.3", "port": 2200, "secretRef": {"name": "inner-hop"},
         "insecureSkipHostKeyCheck": True},
        {"host": "third.example.org", "secretRef": {"name": "inner-hop"}}]


def job(attempt: int = 1, /, **cluster: Any) -> JobRequest:
    return build_job("slurm", attempt, cluster={
        "host": "login.hpc.example.org", "secretRef": {"name": "hpc-login"}, **cluster})


def pod(request_: JobRequest, job_ids: tuple[str, ...] = ("4242",)) -> dict[str, Any]:
    return log_pod(request_, job_ids=job_ids, image=IMAGE)


def container(p: dict[str, Any]) -> dict[str, Any]:
    (only,) = p["spec"]["containers"]
    return only  # type: ignore[no-any-return]


def test_one_jump_argument_per_hop_in_order() -> None:
    args = container(pod(job(jump=JUMP)))["args"]
    assert [a for a in args if a.startswith("--jump=")] == [
        f"--jump=bastion.example.org,22,{SECRET_MOUNT},verify",
        f"--jump=10.1.2.3,2200,{SECRET_MOUNT}-jump-1,insecure",
        f"--jump=third.example.org,22,{SECRET_MOUNT}-jump-2,verify",
    ]
    assert f"--secret-dir={SECRET_MOUNT}" in args


def test_each_jump_secret_of_its_own_is_a_read_only_volume() -> None:
    p = pod(job(jump=JUMP))
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
    p = pod(job())
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
    assert f"--remote-dir={remote_dir}" in container(pod(job(**fields)))["args"]


# --- carried over --------------------------------------------------------------------------------


def observed(applied: dict[str, Any]) -> dict[str, Any]:
    return {**applied, "metadata": {**applied["metadata"], "uid": "pod-uid",
                                    "namespace": "research",
                                    "annotations": {LAST_APPLIED: json.dumps(applied)}},
            "status": {"phase": "Succeeded"}}


def carry(pod_: dict[str, Any]) -> dict[str, Any] | None:
    return carried_over(pod_, namespace="research", name="hello", uid=UID, image=IMAGE,
                        clusters=Anywhere())


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
    applied = pod(job(**cluster), job_ids=("4242_0", "4242_1"))
    assert carry(observed(applied)) == applied


def edited(change: Any) -> dict[str, Any]:
    applied = pod(job(jump=JUMP, workDir="/scratch/alice"))
    change(applied)
    return observed(applied)


def args(applied: dict[str, Any]) -> list[str]:
    return container(applied)["args"]  # type: ignore[no-any-return]


def with_arg(prefix: str, value: str) -> dict[str, Any]:
    """The observed Pod with the value of its argument that starts with ``prefix`` (the
    option and what tells it from others of its name) replaced."""
    def change(applied: dict[str, Any]) -> None:
        found = args(applied)
        at = next(i for i, a in enumerate(found) if a.startswith(prefix))
        found[at] = f"{prefix.partition('=')[0]}={value}"
    return edited(change)


HOP = "--jump=10.1.2.3"
REMOTE_DIR = "--remote-dir="


@pytest.mark.parametrize(
    "tampered",
    [
        pytest.param(edited(lambda a: a["spec"]["volumes"].append(
            {"name": "extra", "secret": {"secretName": "admin-token"}})), id="extra-volume"),
        pytest.param(edited(lambda a: container(a)["volumeMounts"].append(
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
        pytest.param(edited(lambda a: a["spec"]["volumes"][1]["secret"].update(
            defaultMode=0o444)), id="jump-volume-readable-by-all"),
        pytest.param(edited(lambda a: container(a)["volumeMounts"][1].update(readOnly=False)),
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
