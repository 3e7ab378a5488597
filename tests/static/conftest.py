"""The programs the static tests run besides Python: kubectl (its kustomize renders the installs,
as `kubectl apply -k` does, and its client-side dry runs print the Secrets the documented steps
create), kustomize (`kustomize edit set image`), promtool (the alert rules) and
openssl (the certificate recipe in docs/operations.md). tests/tools.sh installs the missing
ones as root. A test whose program is missing fails with CI=true and is skipped otherwise."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.static.install import (
    CONTROLLER_OF_INSTALL,
    METACONTROLLER_INSTALL,
    README,
    SET_IMAGE,
    copy_install_dirs,
)
from tests.static.kube import METACONTROLLER_KINDS, Object, Render, load_all

VENV_BIN = Path(sys.executable).parent


def find_program(name: str) -> str | None:
    """The program in the virtualenv (where tests/tools.sh puts kustomize) or on PATH."""
    local = VENV_BIN / name
    return str(local) if local.is_file() and os.access(local, os.X_OK) else shutil.which(name)


def require_program(name: str) -> str:
    path = find_program(name)
    if path is None:
        why = f"{name} is not installed (as root, tests/tools.sh installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    return path


@pytest.fixture(scope="session")
def promtool() -> str:
    return require_program("promtool")


@pytest.fixture(scope="session")
def kustomize() -> str:
    return require_program("kustomize")


@pytest.fixture(scope="session")
def kubectl() -> str:
    """kubectl itself, for client-side dry runs of `kubectl create secret` steps."""
    return require_program("kubectl")


@pytest.fixture(scope="session")
def openssl() -> str:
    return require_program("openssl")


def run(argv: list[str], cwd: Path | None = None) -> str:
    result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"{' '.join(argv)}:\n{result.stdout}{result.stderr}"
    return result.stdout


@pytest.fixture(scope="session")
def render() -> Render:
    """Render a kustomization as `kubectl apply -k` would: with kubectl's own kustomize, or
    with `kustomize build` where kubectl is missing."""
    kubectl = find_program("kubectl")
    argv = [kubectl, "kustomize"] if kubectl else [require_program("kustomize"), "build"]
    cache: dict[Path, tuple[dict[str, Any], ...]] = {}

    def render(directory: Path) -> tuple[dict[str, Any], ...]:
        if directory not in cache:
            output = run([*argv, str(directory)])
            cache[directory] = tuple(doc for doc in yaml.safe_load_all(output) if doc)
        return cache[directory]

    return render


OVERLAY_COPY = "mkdir -p deploy/overlays/site && cp -r deploy/overlays/"
"""The README's copy of an example overlay into deploy/overlays/site/."""


def readme_install_blocks() -> list[list[str]]:
    """The ```sh blocks of the README's "Install on a cluster" section, a command a line."""
    section = README.read_text().split("\n## Install on a cluster\n", 1)[1].split("\n## ", 1)[0]
    return [
        [line for line in block.splitlines() if line.strip() and not line.startswith("#")]
        for block in re.findall(r"```sh\n(.*?)```", section, re.DOTALL)
    ]


README_IMAGE = re.compile(r"REGISTRY=\S+ TAG=\S+")
"""The README's line that sets where the reader pushed the image, before the steps that use it."""


def readme_image_env() -> dict[str, str]:
    """REGISTRY and TAG as the tests set them: SET_IMAGE is $REGISTRY/hpcbridge:$TAG."""
    name, tag = SET_IMAGE.rsplit(":", 1)
    return {"REGISTRY": name.removesuffix("/hpcbridge"), "TAG": tag}


def run_readme_block(block: list[str], workdir: Path, render: Render) -> Object:
    """Run one README install in ``workdir``, a copy of the install directories. The
    Metacontroller install is only checked to be ours (its base is remote:
    test_metacontroller_install renders it); `kubectl apply -k DIR` and `-f FILE`
    collect what they would apply, DIR rendered by kubectl's own kustomize; `kubectl create
    secret` steps are kept for ``secrets_made`` (they need kubectl); the line that sets
    REGISTRY and TAG is replaced by the tests' own (``readme_image_env``), and every other line
    (a copy of an overlay, or setting its image) runs in bash, after it, with those two in its
    environment and no kustomize on PATH."""
    applied: list[Object] = []
    sources: list[str] = []
    secret_steps: list[str] = []
    image_env: dict[str, str] | None = None
    for line in block:
        words = line.split()
        if README_IMAGE.fullmatch(line):
            image_env = readme_image_env()
        elif words[:3] == ["kubectl", "apply", "-k"] and "metacontroller" in words[3]:
            assert words == ["kubectl", "apply", "-k", METACONTROLLER_INSTALL]
        elif "kubectl create secret" in line:
            secret = words[words.index("secret") + 2]
            sources.append(f"secret:{secret}")
            secret_steps.append(line)
        elif words[:2] == ["kubectl", "apply"]:
            assert len(words) == 4 and words[2] in ("-k", "-f"), line
            sources.append(words[3])
            path = workdir / words[3]
            applied += render(path) if words[2] == "-k" else load_all(path)
        else:
            known = line.startswith(OVERLAY_COPY) or "$REGISTRY/hpcbridge" in line
            assert known, f"the tests do not know this step: {line}"
            assert image_env is not None, f"REGISTRY and TAG are set after {line}"
            result = subprocess.run(
                ["bash", "-ec", line],
                cwd=workdir,
                env={**os.environ, **image_env},
                capture_output=True,
                text=True,
                check=False,
            )
            assert result.returncode == 0, f"{line}:\n{result.stdout}{result.stderr}"
    return {"sources": sources, "objects": applied, "secret_steps": secret_steps}


@pytest.fixture(scope="session")
def readme_installs(
    tmp_path_factory: pytest.TempPathFactory, render: Render
) -> dict[str, Object]:
    """Each README install by its controller kind: what it applied, from where."""
    installs = {}
    for block in readme_install_blocks():
        workdir = copy_install_dirs(tmp_path_factory.mktemp("readme-install"))
        result = run_readme_block(block, workdir, render)
        (kind,) = {doc["kind"] for doc in result["objects"]} & METACONTROLLER_KINDS
        install = {kind: name for name, kind in CONTROLLER_OF_INSTALL.items()}[kind]
        assert install not in installs
        installs[install] = result
    return installs
