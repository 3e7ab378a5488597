"""hooks/core is pure: no I/O, no clock, no environment. Checked on the source, not by running it.

Every module under hooks/core may import only the modules in ``ALLOWED`` (pure standard library
and hooks.core itself), and may not read a clock or call a builtin that does I/O. A module that
needs one of those belongs in the imperative shell (hooks/service.py, hooks/backends, hooks/ssh).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[2] / "hooks" / "core"

ALLOWED = frozenset(
    {
        "__future__",
        "base64",
        "binascii",
        "collections",
        "collections.abc",
        "dataclasses",
        "datetime",  # conversions only; clock reads are caught by CLOCK_READS below
        "enum",
        "functools",
        "hashlib",
        "itertools",
        "json",
        "math",
        "re",
        "string",
        "typing",
        "hooks.core",
    }
)
"""Pure modules hooks/core may import (a submodule of an allowed package is allowed)."""

FORBIDDEN = frozenset(
    {
        "asyncio", "ctypes", "http", "importlib", "io", "logging", "multiprocessing", "os",
        "paramiko", "flask", "pathlib", "random", "requests", "secrets", "select", "shutil",
        "signal", "socket", "subprocess", "sys", "tempfile", "threading", "time", "urllib",
        "uuid", "werkzeug", "hooks.ssh", "hooks.backends", "hooks.service", "hooks.app",
        "hooks.sessions", "hooks.settings", "hooks.logs",
    }
)
"""Modules that mean I/O, a clock, randomness or the shell; none may ever be allowed."""

CLOCK_READS = frozenset(
    {
        "now", "utcnow", "today", "time", "time_ns", "monotonic", "monotonic_ns",
        "perf_counter", "perf_counter_ns", "process_time", "localtime", "gmtime",
    }
)
IO_BUILTINS = frozenset({"open", "print", "input", "exec", "eval", "compile", "__import__"})


def _top(name: str, allowed: frozenset[str]) -> bool:
    parts = name.split(".")
    return any(".".join(parts[:n]) in allowed for n in range(1, len(parts) + 1))


def violations(source: str) -> Iterator[str]:
    """What makes ``source`` impure, one line per finding."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            # Relative imports stay inside hooks.core; absolute ones are checked by name.
            names = ["hooks.core"] if node.level else [node.module or ""]
        elif isinstance(node, ast.Call):
            func = node.func
            called = (
                func.attr if isinstance(func, ast.Attribute)
                else func.id if isinstance(func, ast.Name) else ""
            )
            if called in CLOCK_READS:
                yield f"line {node.lineno}: reads a clock ({called}())"
            if isinstance(func, ast.Name) and called in IO_BUILTINS:
                yield f"line {node.lineno}: calls {called}()"
            continue
        elif isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv"):
            yield f"line {node.lineno}: reads the environment ({node.attr})"
            continue
        else:
            continue
        for name in names:
            if _top(name, FORBIDDEN) or not _top(name, ALLOWED):
                yield f"line {node.lineno}: imports {name}"


def core_modules() -> list[Path]:
    return sorted(CORE.rglob("*.py"))


def test_allow_list_and_deny_list_are_disjoint() -> None:
    assert not {name for name in ALLOWED if _top(name, FORBIDDEN)}


def test_the_core_modules_of_the_design_are_all_checked() -> None:
    names = {path.stem for path in core_modules()}
    assert names >= {
        "model", "units", "spec", "secret", "request", "slurm_states", "htcondor_states",
        "aggregate", "status", "lifecycle", "children", "response",
    }


@pytest.mark.parametrize(
    "path", [pytest.param(path, id=path.stem) for path in core_modules()]
)
def test_core_module_is_pure(path: Path) -> None:
    assert list(violations(path.read_text())) == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param("import os", "imports os", id="import-os"),
        pytest.param("import os.path", "imports os.path", id="import-os-path"),
        pytest.param("from subprocess import run", "imports subprocess", id="from-subprocess"),
        pytest.param("import socket", "imports socket", id="socket"),
        pytest.param("import time", "imports time", id="time"),
        pytest.param("import paramiko", "imports paramiko", id="paramiko"),
        pytest.param("from flask import Flask", "imports flask", id="flask"),
        pytest.param("import requests", "imports requests", id="requests"),
        pytest.param("import select", "imports select", id="select"),
        pytest.param("import threading", "imports threading", id="threading"),
        pytest.param("import random", "imports random", id="random"),
        pytest.param("from pathlib import Path", "imports pathlib", id="pathlib"),
        pytest.param("import io", "imports io", id="io"),
        pytest.param("import logging", "imports logging", id="logging"),
        pytest.param("import http.client", "imports http.client", id="http"),
        pytest.param("from urllib import parse", "imports urllib", id="urllib"),
        pytest.param("import shutil", "imports shutil", id="shutil"),
        pytest.param("import tempfile", "imports tempfile", id="tempfile"),
        pytest.param("import yaml", "imports yaml", id="not-allow-listed"),
        pytest.param("from hooks.ssh import errors", "imports hooks.ssh", id="the-shell"),
        pytest.param("import datetime\ndatetime.datetime.now()", "reads a clock (now())",
                     id="datetime-now"),
        pytest.param("from datetime import datetime\ndatetime.utcnow()",
                     "reads a clock (utcnow())", id="utcnow"),
        pytest.param("import datetime\ndatetime.date.today()", "reads a clock (today())",
                     id="date-today"),
        pytest.param("x.time()", "reads a clock (time())", id="time-time"),
        pytest.param("x.monotonic()", "reads a clock (monotonic())", id="monotonic"),
        pytest.param("open('f')", "calls open()", id="open"),
        pytest.param("print('x')", "calls print()", id="print"),
        pytest.param("x = environ['HOME']\ny = o.environ", "reads the environment (environ)",
                     id="environ"),
    ],
)
def test_checker_catches(source: str, expected: str) -> None:
    assert any(expected in found for found in violations(source)), list(violations(source))


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("from __future__ import annotations", id="future"),
        pytest.param("from collections.abc import Mapping", id="collections-abc"),
        pytest.param("from hooks.core.model import Phase", id="core-absolute"),
        pytest.param("from . import model", id="core-relative"),
        pytest.param("import datetime\ndatetime.datetime.fromtimestamp(0, tz=datetime.UTC)",
                     id="epoch-conversion"),
        pytest.param("import datetime\ndatetime.datetime.strptime(t, '%Y')", id="strptime"),
    ],
)
def test_checker_accepts(source: str) -> None:
    assert list(violations(source)) == []
