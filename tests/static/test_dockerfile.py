"""The Dockerfile, .dockerignore, requirements.txt and requirements.lock: hadolint, the image's
stages, an install by hash alone and no pip in the final image."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.static.kube import REPO


def test_dockerfile_passes_hadolint() -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    result = subprocess.run(
        [str(hadolint), "--no-color", "Dockerfile"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


DOCKERFILE = (REPO / "Dockerfile").read_text()


def dockerfile_stages() -> list[list[str]]:
    """The Dockerfile's instructions, continuation lines joined and comments dropped, by stage."""
    stages: list[list[str]] = []
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE)
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith("FROM "):
            stages.append([])
        stages[-1].append(line)
    return stages


@pytest.mark.parametrize(
    "line",
    [
        pytest.param("FROM python:3.11-slim-bookworm AS build", id="builder"),
        pytest.param("COPY requirements.lock /tmp/requirements.lock", id="copy-lock"),
        pytest.param("FROM python:3.11-slim-bookworm", id="base"),
        pytest.param("COPY --from=build /opt/hpcbridge /opt/hpcbridge", id="copy-venv"),
        pytest.param("WORKDIR /app", id="workdir"),
        pytest.param("COPY hooks/ hooks/", id="copy-hooks"),
        pytest.param("USER 65532:65532", id="user"),
        pytest.param("EXPOSE 8080 9090", id="expose"),
        pytest.param(
            'CMD ["gunicorn", "-c", "python:hooks.gunicorn_conf", "hooks.app:create_app()"]',
            id="cmd",
        ),
    ],
)
def test_dockerfile_line(line: str) -> None:
    assert line in DOCKERFILE.splitlines()


def test_builder_installs_the_lock_file_by_hash_alone() -> None:
    builder, _ = dockerfile_stages()
    (install,) = (line for line in builder if " install " in line)
    for option in ("--require-hashes", "--no-deps", "--only-binary=:all:"):
        assert option in install.split()
    assert install.endswith("-r /tmp/requirements.lock")
    assert "python -m venv --without-pip /opt/hpcbridge" in install


def test_final_image_has_no_pip_and_runs_the_virtualenv() -> None:
    _, final = dockerfile_stages()
    assert not any(" install " in line for line in final)
    (uninstall,) = (line for line in final if "pip uninstall" in line)
    assert uninstall.split()[-3:] == ["pip", "setuptools", "wheel"]
    # pip goes before the virtualenv arrives, so that `python` is still the base image's
    assert final.index(uninstall) < final.index("COPY --from=build /opt/hpcbridge /opt/hpcbridge")
    assert "ENV PATH=/opt/hpcbridge/bin:$PATH" in " ".join(final)


def test_final_image_has_oci_labels() -> None:
    _, final = dockerfile_stages()
    (label,) = (line for line in final if line.startswith("LABEL "))
    keys = re.findall(r"(org\.opencontainers\.image\.[a-z]+)=", label)
    assert keys == [
        f"org.opencontainers.image.{key}" for key in ("title", "description", "version", "revision")
    ]
    assert 'org.opencontainers.image.version="${VERSION}"' in label


def test_dockerignore_admits_what_the_dockerfile_copies() -> None:
    admitted = {
        line[1:].rstrip("/")
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    }
    copied = {
        line.split()[1].rstrip("/")
        for stage in dockerfile_stages()
        for line in stage
        if line.startswith("COPY ") and "--from=" not in line
    }
    assert copied == admitted


def requirement_pins(text: str) -> dict[str, str]:
    """``name==version`` lines by normalised name (PEP 503)."""
    pins = {}
    for name, version in re.findall(r"^([A-Za-z0-9._-]+)==([^\s;\\]+)", text, re.MULTILINE):
        pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    return pins


def test_requirements_pin_exact_versions() -> None:
    lines = [
        line
        for line in (REPO / "requirements.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines and all(re.fullmatch(r"[A-Za-z0-9._-]+==[^\s]+", line) for line in lines)


def test_lock_file_has_every_requirement_at_its_version() -> None:
    """requirements.lock (`make lock`) holds each requirements.txt pin at the same version."""
    wanted = requirement_pins((REPO / "requirements.txt").read_text())
    locked = requirement_pins((REPO / "requirements.lock").read_text())
    assert {name: locked.get(name) for name in wanted} == wanted


def test_lock_file_pins_every_package_with_hashes() -> None:
    entries = re.split(r"\n(?=[A-Za-z0-9])", (REPO / "requirements.lock").read_text())
    packages = [entry for entry in entries if not entry.startswith("#")]
    assert len(packages) == len(requirement_pins((REPO / "requirements.lock").read_text()))
    for entry in packages:
        assert re.match(r"[A-Za-z0-9._-]+==\S+ \\\n", entry), entry.splitlines()[0]
        assert re.search(r"--hash=sha256:[0-9a-f]{64}", entry), entry.splitlines()[0]
