"""``spec.container`` as a BatchJob writes it: what each field accepts, and the one sentence
naming the field for what it refuses, hostile text first."""

from __future__ import annotations

from typing import Any

import pytest

from hooks.core.spec.batchjob import digest
from hooks.core.spec.container import MAX_MOUNTS
from hooks.core.values.fields import SpecError
from hooks.core.values.image import Mount, PullPolicy, Transport, parse_reference
from tests.unit.conftest import raw_spec, refusal, spec_of
from tests.unit.spec.test_spec import one_sentence_naming

DIGEST = "sha256:" + "ab" * 32


def contained(**fields: Any) -> dict[str, Any]:
    return raw_spec(container={"image": "registry.example.org/lab/sim:2.1", **fields})


def test_a_full_container_reads_field_by_field() -> None:
    spec = spec_of(contained(
        imagePullPolicy="Always", imagePullSecrets=[{"name": "regcred"}],
        command=["python"], args=["train.py", "--epochs", "10"], workingDir="/work/",
        mounts=[{"hostPath": "/scratch/lab", "mountPath": "/scratch", "readOnly": True}],
        runtime="podman"))
    container = spec.container
    assert container.image.registry == "registry.example.org"
    assert (container.image.repository, container.image.tag) == ("lab/sim", "2.1")
    assert container.pull_policy is PullPolicy.ALWAYS
    assert container.pull_secrets == ("regcred",)
    assert container.command == ("python",)
    assert container.args == ("train.py", "--epochs", "10")
    assert container.working_dir == "/work"
    assert container.mounts == (Mount("/scratch/lab", "/scratch", True),)
    assert container.runtime == "podman"


def test_the_script_may_be_left_out_only_with_a_container() -> None:
    raw = contained()
    del raw["script"]
    assert spec_of(raw).script == ""
    without = raw_spec()
    del without["script"]
    with pytest.raises(SpecError, match=r"spec\.script must be a batch script"):
        spec_of(without)


def test_defaults() -> None:
    container = spec_of(contained()).container
    assert container.pull_policy is PullPolicy.IF_NOT_PRESENT
    assert container.command is None and container.args == () and container.mounts == ()
    assert container.working_dir == "" and container.runtime == ""


@pytest.mark.parametrize("text, named", [
    ("python", "docker://docker.io/library/python:latest"),
    ("python:3.12", "docker://docker.io/library/python:3.12"),
    ("ghcr.io/org/tool:v1", "docker://ghcr.io/org/tool:v1"),
    ("localhost:5000/a", "docker://localhost:5000/a:latest"),
    (f"127.0.0.1:5443/lab/hello@{DIGEST}", f"docker://127.0.0.1:5443/lab/hello@{DIGEST}"),
    ("oras://ghcr.io/org/sif:1", "oras://ghcr.io/org/sif:1"),
    ("docker://quay.io/org/x:1", "docker://quay.io/org/x:1"),
])
def test_references(text: str, named: str) -> None:
    assert parse_reference(text, "image").named == named


def test_an_image_file_is_a_path() -> None:
    ref = parse_reference("/scratch/images/sim.sif", "image")
    assert (ref.transport, ref.path) == (Transport.FILE, "/scratch/images/sim.sif")


@pytest.mark.parametrize("image", [
    "", " ", "a b", "a;b", "a|b", "$(id)", "`id`", "-x", "--privileged", "a\nb", "a\x00b",
    "Upper/case", "a:b:c/d", "a@sha256:short", "/a/../b", "/a/./b", "relative/../x:1",
    "a" * 800, "docker://", "http://example.org/x", 3, None, ["a"],
])
def test_hostile_references_are_refused(image: object) -> None:
    one_sentence_naming(refusal(container={"image": image}), "spec.container.image")


@pytest.mark.parametrize("fields, field", [
    ({"imagePullPolicy": "Sometimes"}, "spec.container.imagePullPolicy"),
    ({"imagePullPolicy": ["Always"]}, "spec.container.imagePullPolicy"),
    ({"runtime": ["podman"]}, "spec.container.runtime"),
    ({"imagePullSecrets": [{"name": "Bad_Name"}]}, "spec.container.imagePullSecrets[0].name"),
    ({"imagePullSecrets": "regcred"}, "spec.container.imagePullSecrets"),
    ({"command": []}, "spec.container.command"),
    ({"command": [""]}, "spec.container.command[0]"),
    ({"command": ["a\x00b"]}, "spec.container.command[0]"),
    ({"args": "x"}, "spec.container.args"),
    ({"args": [1]}, "spec.container.args[0]"),
    ({"workingDir": "work"}, "spec.container.workingDir"),
    ({"workingDir": "/a/../b"}, "spec.container.workingDir"),
    ({"mounts": [{"hostPath": "scratch", "mountPath": "/s"}]}, "spec.container.mounts[0].hostPath"),
    ({"mounts": [{"hostPath": "/s/..", "mountPath": "/s"}]}, "spec.container.mounts[0].hostPath"),
    ({"mounts": [{"hostPath": "/s", "mountPath": "s"}]}, "spec.container.mounts[0].mountPath"),
    ({"mounts": [{"hostPath": "/s:/etc", "mountPath": "/s"}]},
     "spec.container.mounts[0].hostPath"),
    ({"mounts": [{"hostPath": "/s", "mountPath": "/s,/x"}]},
     "spec.container.mounts[0].mountPath"),
    ({"mounts": [{"hostPath": "/s", "mountPath": "/proc/x"}]},
     "spec.container.mounts[0].mountPath"),
    ({"mounts": [{"hostPath": "/s", "mountPath": "/"}]}, "spec.container.mounts[0].mountPath"),
    ({"mounts": [{"hostPath": "/s", "mountPath": "/s", "readOnly": "yes"}]},
     "spec.container.mounts[0].readOnly"),
    ({"mounts": [{"hostPath": "/s", "mountPath": "/m"}] * (MAX_MOUNTS + 1)},
     "spec.container.mounts"),
    ({"mounts": [{"hostPath": "/a", "mountPath": "/m"}, {"hostPath": "/b", "mountPath": "/m"}]},
     "spec.container.mounts"),
    ({"runtime": "Docker;rm"}, "spec.container.runtime"),
    ({"privileged": True}, "spec.container.privileged"),
])
def test_refusals_name_the_field(fields: dict[str, Any], field: str) -> None:
    one_sentence_naming(refusal(container={"image": "lab/sim:1", **fields}), field)


def test_a_container_changes_the_attempts_digest() -> None:
    plain, other = spec_of(contained()), spec_of(contained(args=["x"]))
    assert digest(plain) != digest(other) != digest(spec_of(raw_spec()))
