"""The repository as a Python package (pyproject.toml, LICENSE) and its one version, in
hooks/__init__.py: the package's, the metrics' build_info (tests/unit/server/test_metrics.py), the
default log image's tag, the image's label (Makefile, Dockerfile) and deploy/base's image."""

from __future__ import annotations

import importlib
import re
import tomllib
from pathlib import Path
from typing import Any

import yaml
from packaging.requirements import Requirement

from hooks import __version__
from hooks.settings import Settings

REPO = Path(__file__).resolve().parents[2]
PYPROJECT: dict[str, Any] = tomllib.loads((REPO / "pyproject.toml").read_text())
PROJECT: dict[str, Any] = PYPROJECT["project"]
SETUPTOOLS: dict[str, Any] = PYPROJECT["tool"]["setuptools"]


def test_builds_with_setuptools_under_the_apache_license() -> None:
    assert PYPROJECT["build-system"]["build-backend"] == "setuptools.build_meta"
    # PEP 639's SPDX `license` and `license-files` need setuptools 77
    (requirement,) = map(Requirement, PYPROJECT["build-system"]["requires"])
    assert (requirement.name, str(requirement.specifier)) == ("setuptools", ">=77")
    assert (PROJECT["license"], PROJECT["license-files"]) == ("Apache-2.0", ["LICENSE"])
    text = (REPO / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert "Copyright 2026 The hpcbridge authors" in text


def test_packages_hooks_and_its_subpackages() -> None:
    assert SETUPTOOLS["packages"]["find"] == {"include": ["hooks", "hooks.*"]}
    assert (REPO / "hooks/__main__.py").is_file()


def test_console_script_is_importable() -> None:
    assert set(PROJECT["scripts"]) == {"hpcbridge"}
    module, _, name = PROJECT["scripts"]["hpcbridge"].partition(":")
    assert callable(getattr(importlib.import_module(module), name))


def test_dependencies_are_the_requirements_file() -> None:
    """setuptools reads the dependencies from requirements.txt: each of its lines must be a
    plain PEP 508 requirement (no -r, -c or hashes), and they are what the code imports."""
    assert set(PROJECT["dynamic"]) == {"version", "dependencies"}
    assert "dependencies" not in PROJECT
    assert SETUPTOOLS["dynamic"]["dependencies"] == {"file": ["requirements.txt"]}
    lines = (REPO / "requirements.txt").read_text().split("\n")
    names = {Requirement(line).name for line in lines if line.strip()}
    assert {"flask", "gunicorn", "paramiko", "prometheus-client", "orjson"} <= names


def test_version_is_read_from_hooks() -> None:
    assert "version" not in PROJECT
    assert SETUPTOOLS["dynamic"]["version"] == {"attr": "hooks.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)


def test_default_log_image_is_the_versions() -> None:
    assert Settings().log_image == f"hpcbridge:{__version__}"


def test_deploy_base_image_is_the_versions() -> None:
    kustomization = yaml.safe_load((REPO / "deploy/base/kustomization.yaml").read_text())
    assert kustomization["images"] == [{"name": "hpcbridge", "newTag": __version__}]


def test_image_label_carries_the_version_make_image_passes() -> None:
    """The Dockerfile names no version: `make image` passes hooks/__init__.py's, the label
    carries it, and a build given another one (or none) fails."""
    dockerfile = (REPO / "Dockerfile").read_text()
    assert __version__ not in dockerfile
    assert "\nARG VERSION\n" in dockerfile
    assert 'org.opencontainers.image.version="${VERSION}"' in dockerfile
    check = re.search(r"^RUN python -c .*?\n(?=\S)", dockerfile, re.MULTILINE | re.DOTALL)
    assert check is not None
    assert "sys.argv[1:] == [hooks.__version__]" in check.group(0)
    assert check.group(0).rstrip().endswith('"$VERSION"')
    makefile = (REPO / "Makefile").read_text()
    assert "VERSION = $(shell $(PYTHON) -c 'import hooks; print(hooks.__version__)')" in makefile
    assert "docker build --build-arg VERSION=$(VERSION) " in makefile
