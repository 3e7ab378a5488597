"""The ``hpcbridge`` command (``python -m hooks``): its help, version, the hook server it starts
and the log Pods' program behind ``hpcbridge logs``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hooks import __version__, cli
from hooks.pods import logs
from hooks.pods.movers import program

REPO = Path(__file__).resolve().parents[3]


def python_m_hooks(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hooks", *argv], cwd=REPO,
                          capture_output=True, text=True, check=False, timeout=60)


def test_python_m_hooks_answers_help_with_its_commands() -> None:
    done = python_m_hooks("--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: hpcbridge ")
    assert {"serve", "logs", "movers", "--version"} <= set(done.stdout.split())


def test_version_is_the_package_version() -> None:
    done = python_m_hooks("--version")
    assert (done.returncode, done.stdout) == (0, f"hpcbridge {__version__}\n")


def test_a_command_is_required() -> None:
    done = python_m_hooks()
    assert done.returncode == 2
    assert "required: COMMAND" in done.stderr


class Exec(Exception):
    """os.execve was called: what with."""


@pytest.fixture
def execve(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list[str], dict[str, str]]]:
    calls: list[tuple[str, list[str], dict[str, str]]] = []

    def record(path: str, argv: list[str], env: dict[str, str]) -> None:
        calls.append((path, argv, env))
        raise Exec

    monkeypatch.setattr(cli.os, "execve", record)
    return calls


def test_serve_runs_gunicorn_with_the_products_settings(
    execve: list[tuple[str, list[str], dict[str, str]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.setenv("HOST", "127.0.0.1")
    with pytest.raises(Exec):
        cli.main(["serve", "--port", "18080"])
    ((path, argv, env),) = execve
    assert path == sys.executable
    assert argv == [sys.executable, "-m", "gunicorn", "-c", "python:hooks.gunicorn_conf",
                    "hooks.app:create_app()"]
    assert (env["HOST"], env["PORT"], env["MALLOC_ARENA_MAX"]) == ("127.0.0.1", "18080", "2")


def test_serve_keeps_the_environments_own_malloc_arenas(
    execve: list[tuple[str, list[str], dict[str, str]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    with pytest.raises(Exec):
        cli.main(["serve", "--host", "0.0.0.0"])
    ((_, _, env),) = execve
    assert (env["HOST"], env["MALLOC_ARENA_MAX"]) == ("0.0.0.0", "4")


def test_serve_refuses_options_it_does_not_know(
    execve: list[tuple[str, list[str], dict[str, str]]], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["serve", "--workers", "3"])
    assert exit_.value.code == 2
    assert "unrecognized arguments: --workers 3" in capsys.readouterr().err
    assert execve == []


@pytest.mark.parametrize(("command", "program_of"), [("logs", logs), ("movers", program)])
def test_logs_and_movers_pass_every_argument_to_their_pods_program(
    command: str, program_of: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[list[str], str]] = []

    def main(argv: list[str], prog: str) -> int:
        calls.append((argv, prog))
        return 7

    monkeypatch.setattr(program_of, "main", main)
    argv = ["outputs", "--host", "login", "--follow", "--help"]
    assert cli.main([command, *argv]) == 7
    assert calls == [(argv, f"hpcbridge {command}")]


def test_logs_help_is_the_log_programs(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["logs", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: hpcbridge logs ")
    assert "--remote-dir" in out


def test_movers_answers_help_with_its_own_program() -> None:
    done = python_m_hooks("movers", "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: hpcbridge movers ")
    assert "{inputs,outputs}" in done.stdout
