"""The README's "Install on a cluster" steps, run as written: what each install applies, the
image it sets reaching the hooks and the log Pods, and a copy of the overlay that never nests;
and its "Quickstart" steps: a BatchCluster, the namespace it selects, a login Secret and a
BatchJob that fit one another."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.static.conftest import OVERLAY_COPY, README_IMAGE, readme_install_blocks
from tests.static.install import (
    HOOKS,
    INSTALLS,
    README,
    README_SOURCES,
    SET_IMAGE,
    copy_install_dirs,
)
from tests.static.kube import REPO, Object, Render, field, load_all, select
from tests.static.test_hook_tls import dry_run_secrets


def test_readme_has_both_installs(readme_installs: dict[str, Object]) -> None:
    assert sorted(readme_installs) == sorted(INSTALLS)


@pytest.mark.parametrize("install", INSTALLS)
def test_readme_install_applies(install: str, readme_installs: dict[str, Object]) -> None:
    assert readme_installs[install]["sources"] == README_SOURCES[install]


@pytest.mark.parametrize("install", INSTALLS)
def test_readme_install_runs_the_image_it_sets(
    install: str, readme_installs: dict[str, Object]
) -> None:
    """The hook container and the log Pods (HPCBRIDGE_LOG_IMAGE) both get the image set."""
    objects = readme_installs[install]["objects"]
    deployment = select(objects, {"kind": "Deployment", "name": "hpcbridge-hooks"})
    assert field(deployment, f"{HOOKS}.image") == SET_IMAGE
    assert field(deployment, f"{HOOKS}.env.[name=HPCBRIDGE_LOG_IMAGE].value") == SET_IMAGE


@pytest.mark.parametrize("where", ["deploy", "deploy/base"])
def test_image_set_in_either_kustomization_reaches_the_log_pods(
    where: str, tmp_path: Path, render: Render, kustomize: str
) -> None:
    """`kustomize edit set image` in deploy/ or in deploy/base: either way deploy/ gives the
    log Pods the image of the hooks (each of the two kustomizations copies it)."""
    workdir = copy_install_dirs(tmp_path)
    subprocess.run(
        [kustomize, "edit", "set", "image", f"hpcbridge={SET_IMAGE}"],
        cwd=workdir / where,
        check=True,
    )
    deployment = select(
        render(workdir / "deploy"), {"kind": "Deployment", "name": "hpcbridge-hooks"}
    )
    assert field(deployment, f"{HOOKS}.image") == SET_IMAGE
    assert field(deployment, f"{HOOKS}.env.[name=HPCBRIDGE_LOG_IMAGE].value") == SET_IMAGE


@pytest.mark.parametrize("block", readme_install_blocks(), ids=INSTALLS)
def test_readme_install_sets_registry_and_tag_first(block: list[str]) -> None:
    """The reader sets REGISTRY and TAG once, in the block's first line, for the steps after it
    (which run with the tests' own REGISTRY and TAG, and set the image the tests check)."""
    assert README_IMAGE.fullmatch(block[0])


@pytest.mark.parametrize("block", readme_install_blocks(), ids=INSTALLS)
def test_readme_copy_of_the_overlay_never_nests(block: list[str], tmp_path: Path) -> None:
    """Run twice, as when an install is run again, the copy leaves deploy/overlays/site/
    holding the example overlay's files, not a copy of the directory inside the first one."""
    (copy,) = (line for line in block if line.startswith(OVERLAY_COPY))
    workdir = copy_install_dirs(tmp_path)
    for _ in range(2):
        subprocess.run(["bash", "-ec", copy], cwd=workdir, check=True)
    example = workdir / copy.split()[-2].removesuffix("/.")
    site = workdir / "deploy/overlays/site"
    assert sorted(path.name for path in site.iterdir()) == sorted(
        path.name for path in example.iterdir())


def quickstart_lines() -> list[str]:
    """The README's Quickstart steps, a command a line (continued lines joined)."""
    section = README.read_text().split("\n## Quickstart: a BatchCluster, then a BatchJob\n")[1]
    (block,) = re.findall(r"```sh\n(.*?)```", section.split("\n## ", 1)[0], re.DOTALL)
    return block.replace("\\\n", " ").splitlines()


def quickstart() -> list[list[str]]:
    """The README's Quickstart steps, each a command's words."""
    return [shlex.split(line) for line in quickstart_lines()]


def quickstart_objects() -> tuple[Object, Object]:
    """The BatchCluster and the BatchJob the Quickstart applies, in that order."""
    applied = [doc for words in quickstart() if words[:3] == ["kubectl", "apply", "-f"]
               for doc in load_all(REPO / words[3])]
    site, batchjob = applied
    assert (site["kind"], batchjob["kind"]) == ("BatchCluster", "BatchJob")
    return site, batchjob


def test_quickstart_batchjob_names_the_batchcluster_and_runs_where_it_is_allowed() -> None:
    site, batchjob = quickstart_objects()
    namespace = batchjob["metadata"]["namespace"]
    assert batchjob["spec"]["cluster"]["name"] == site["metadata"]["name"]
    assert ["kubectl", "create", "namespace", namespace] in quickstart()
    (label,) = (words for words in quickstart() if words[:3] == ["kubectl", "label", "namespace"])
    assert label[3] == namespace
    labels = dict(word.split("=", 1) for word in label[4:])
    assert set(site["spec"]["namespaceSelector"]) == {"matchLabels"}
    assert site["spec"]["namespaceSelector"]["matchLabels"].items() <= labels.items()


def test_quickstart_watches_the_batchjob_and_reads_its_log_pod() -> None:
    _, batchjob = quickstart_objects()
    name, namespace = batchjob["metadata"]["name"], batchjob["metadata"]["namespace"]
    assert ["kubectl", "get", "bj", "-n", namespace, name, "-w"] in quickstart()
    assert ["kubectl", "logs", "-n", namespace, f"{name}-logs"] in quickstart()


def test_quickstart_secret_is_the_login_the_batchjob_names(
        kubectl: str, tmp_path: Path) -> None:
    """Made from the key file (a client-side dry run): the user name and the private key, in the
    BatchJob's namespace, and no known_hosts: the BatchCluster holds the host keys."""
    _, batchjob = quickstart_objects()
    (ssh := tmp_path / ".ssh").mkdir()
    (ssh / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n...\n")
    (step,) = (line for line in quickstart_lines()
               if line.startswith("kubectl create secret generic "))
    (secret,) = dry_run_secrets(step.replace("$HOME", str(tmp_path)), tmp_path, kubectl)
    assert (secret["metadata"]["name"], secret["metadata"]["namespace"]) == (
        batchjob["spec"]["cluster"]["secretRef"]["name"], batchjob["metadata"]["namespace"])
    assert secret["type"] == "kubernetes.io/ssh-auth"
    assert sorted(secret["data"]) == ["ssh-privatekey", "username"]
