"""The README's "Install on a cluster" steps, run as written: what each install applies, and the
image it sets reaching the hooks and the log Pods."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.static.install import HOOKS, INSTALLS, README_SOURCES, SET_IMAGE, copy_install_dirs
from tests.static.kube import Object, Render, field, select


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
