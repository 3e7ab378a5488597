"""The programs the static tests run besides Python: kubectl (its kustomize renders the installs,
as `kubectl apply -k` does, and its client-side dry runs print the Secrets the documented steps
create), kustomize (`kustomize edit set image`), promtool (the alert rules) and
openssl (the certificate recipe in docs/operations.md). tests/tools.sh installs the missing
ones as root. A test whose program is missing fails with CI=true and is skipped otherwise."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

VENV_BIN = Path(sys.executable).parent
Render = Callable[[Path], tuple[dict[str, Any], ...]]


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
