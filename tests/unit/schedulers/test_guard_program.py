"""The guarded submission program, run by a local ``sh`` in a temporary HOME.

The submit command here is a tiny shell command that records what it was given, so these
tests check the program's own logic: the guard, the upload, the stale marker, the refusal.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from hooks.schedulers import guard

SCRIPT = b"#!/bin/sh\necho hello\n"
SUBMIT = ["sh", "-c", 'cat script >> "$HOME/submitted"; echo 4242']


def run(home: Path, stdin: bytes | None = None, *, submit: list[str] = SUBMIT,
        lookup: str = "exit 0", stale: int = 120) -> str:
    argv, payload = guard.command(remote_dir=".hpcbridge/ns/name/uid/attempt-1",
                                  files=[("script", SCRIPT)], submit=submit, lookup=lookup,
                                  transient="Unable to contact", stale_seconds=stale)
    done = subprocess.run(argv, input=payload if stdin is None else stdin,
                          capture_output=True, env={**os.environ, "HOME": str(home)},
                          check=True, timeout=30)
    return done.stdout.decode().strip()


def attempt(home: Path) -> Path:
    return home / ".hpcbridge/ns/name/uid/attempt-1"


def test_first_call_submits_and_later_calls_get_the_recorded_id(tmp_path: Path) -> None:
    assert run(tmp_path) == "submitted 4242"
    assert run(tmp_path) == "existing 4242"
    assert (tmp_path / "submitted").read_bytes() == SCRIPT


def test_a_cut_upload_is_not_submitted(tmp_path: Path) -> None:
    assert run(tmp_path, stdin=SCRIPT[:7]).startswith("error the upload of script")
    assert not (tmp_path / "submitted").exists()
    assert run(tmp_path) == "inflight"  # the guard stays until it is stale


def test_a_guard_without_id_is_in_flight_until_stale_then_taken_over(tmp_path: Path) -> None:
    (attempt(tmp_path)).mkdir(parents=True)
    (attempt(tmp_path) / ".guard").touch()
    assert run(tmp_path) == "inflight"
    os.utime(attempt(tmp_path) / ".guard", (0, 0))
    assert run(tmp_path) == "submitted 4242"
    assert (attempt(tmp_path) / "takeover.1").is_dir()


def test_a_job_writing_into_its_directory_does_not_keep_the_guard_young(
    tmp_path: Path
) -> None:
    attempt(tmp_path).mkdir(parents=True)
    (attempt(tmp_path) / ".guard").touch()
    os.utime(attempt(tmp_path) / ".guard", (0, 0))
    (attempt(tmp_path) / "4242.out").write_text("the job is writing\n")  # fresh dir mtime
    assert run(tmp_path, lookup="echo 4242") == "existing 4242"
    assert not (tmp_path / "submitted").exists()


def test_a_failed_lookup_never_takes_the_guard_over(tmp_path: Path) -> None:
    attempt(tmp_path).mkdir(parents=True)
    os.utime(attempt(tmp_path), (0, 0))
    assert run(tmp_path, lookup="exit 1") == "inflight"
    assert not (tmp_path / "submitted").exists()


@pytest.mark.parametrize(("error", "answer"), [
    pytest.param("Invalid partition name specified", "refused", id="refused"),
    pytest.param("Unable to contact slurm controller", "transient", id="transient"),
])
def test_submit_errors(tmp_path: Path, error: str, answer: str) -> None:
    failing = ["sh", "-c", f'echo "sbatch: error: {error}" >&2; echo >&2; exit 1']
    assert run(tmp_path, submit=failing) == f"{answer} sbatch: error: {error}"
    again = "refused" if answer == "refused" else "inflight"
    assert run(tmp_path, submit=failing).startswith(again)


def test_cleanup_waits_for_a_young_guard_and_removes_the_rest(tmp_path: Path) -> None:
    attempt(tmp_path).mkdir(parents=True)
    (attempt(tmp_path) / ".guard").touch()
    cleanup = guard.cleanup_command(root=".hpcbridge/ns/name/uid", stale_seconds=120)
    env = {**os.environ, "HOME": str(tmp_path)}

    def clean() -> str:
        return subprocess.run(cleanup, capture_output=True, env=env, check=True,
                              timeout=30).stdout.decode().strip()

    assert clean() == "busy"
    (attempt(tmp_path) / "jobid").write_text("4242\n")
    assert clean() == "removed"
    assert clean() == "gone"


def test_an_early_answer_waits_for_the_end_of_its_input(tmp_path: Path) -> None:
    """sshd frees a channel once its command exits; OpenSSH then drops the whole connection
    on the client's late EOF. So even an instant answer ("in flight") reads stdin to EOF."""
    attempt(tmp_path).mkdir(parents=True)
    (attempt(tmp_path) / ".guard").touch()
    argv, payload = guard.command(remote_dir=".hpcbridge/ns/name/uid/attempt-1",
                                  files=[("script", SCRIPT)], submit=SUBMIT, lookup="exit 0",
                                  transient="x", stale_seconds=120)
    program = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               env={**os.environ, "HOME": str(tmp_path)})
    assert program.stdin is not None
    program.stdin.write(payload)
    program.stdin.flush()
    with pytest.raises(subprocess.TimeoutExpired):
        program.wait(timeout=0.5)  # still reading: the input has not ended
    out, _ = program.communicate(timeout=10)
    assert out.decode().strip() == "inflight"
