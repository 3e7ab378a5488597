"""The files an attempt carries besides its script, and how each scheduler hands them on: the
env file (NUL-separated for sbatch --export-file, shell assignments for HTCondor's wrapper), the
input files, the sbatch and condor_submit command lines and descriptions, hold and release;
then the guarded submission run for real by a local ``sh``, with stand-in sbatch and
condor_submit, files in sub-directories and an absolute workDir."""

from __future__ import annotations

import os
import stat
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from hooks.core.values.job import InputFile, JobRequest
from hooks.core.values.sdk import SchedulerError
from hooks.schedulers import guard
from hooks.schedulers.files import (
    ENV_FILE,
    WRAPPER,
    WRAPPER_PROGRAM,
    environment_file,
    input_files,
    input_tops,
    shell_environment,
)
from hooks.schedulers.htcondor.commands import SUBMIT as HTCONDOR_SUBMIT
from hooks.schedulers.htcondor.description import submit_description
from hooks.schedulers.htcondor.scheduler import SCHEDULER as HTCONDOR
from hooks.schedulers.slurm.commands import EXPORT, sbatch_argv, submit_argv
from hooks.schedulers.slurm.scheduler import SCHEDULER as SLURM
from tests.unit.conftest import UID, FakeConnection, completed, deadline, job, stand_ins

SECRET_VALUE = "tok'en $(rm -rf /) `id` \\n \"quoted\"\nsecond line"
ENVIRONMENT = (("MODE", "fast"), ("TOKEN", SECRET_VALUE), ("EMPTY", ""), ("EQ", "a=b=c"))
INPUTS = (
    InputFile("params.json", b'{"n": 3}\n'),
    InputFile("data/raw/blob.bin", bytes(range(256))),
    InputFile("data/empty", b""),
    InputFile("my dir/notes.txt", b"spaces in a name\n"),
)
CONDOR_INPUTS = INPUTS[:3]
"""HTCondor's transfer_input_files is a list split at commas and white space: no spaces."""


def with_payload(
    request: JobRequest, *, env: bool = True, inputs: tuple[InputFile, ...] = INPUTS
) -> JobRequest:
    return replace(request, environment=ENVIRONMENT if env else (), inputs=inputs)


def values_of(env_file: bytes) -> dict[str, str]:
    """The variables of a NUL-separated env file, the last of a name winning."""
    found: dict[str, str] = {}
    for entry in env_file.split(b"\0"):
        if entry:
            name, _, value = entry.decode().partition("=")
            found[name] = value
    return found


# --- files.py ------------------------------------------------------------------------------------


def test_environment_file_is_nul_separated_in_order() -> None:
    assert environment_file([("A", "1"), ("B", "x\ny"), ("C", "")]) == b"A=1\0B=x\ny\0C=\0"
    assert values_of(environment_file(ENVIRONMENT)) == dict(ENVIRONMENT)


def test_shell_environment_quotes_every_value() -> None:
    assert shell_environment([("A", "it's"), ("B", "")]) == b"A='it'\\''s'\nB=''\n"


def test_input_files_in_order() -> None:
    request = with_payload(job())
    assert input_files(request) == [(f.path, f.content) for f in INPUTS]


def test_input_tops_are_the_top_names_once_in_order() -> None:
    assert input_tops(with_payload(job())) == ["params.json", "data", "my dir"]
    assert input_tops(job()) == []


def test_the_wrapper_is_plain_sh() -> None:
    assert subprocess.run(["sh", "-n", "-c", WRAPPER_PROGRAM], check=False).returncode == 0
    assert subprocess.run(["sh", "-n", "-c", EXPORT], check=False).returncode == 0


def run_wrapper(
    directory: Path, environment: Any, script: str
) -> subprocess.CompletedProcess[bytes]:
    (directory / ENV_FILE).write_bytes(shell_environment(environment))
    (directory / WRAPPER).write_text(WRAPPER_PROGRAM)
    (directory / WRAPPER).chmod(0o700)
    (directory / "script").write_text(script)
    return subprocess.run([f"./{WRAPPER}", "first arg", "second"], cwd=directory,
                          capture_output=True, check=False, timeout=30,
                          env={"PATH": os.environ["PATH"], "HOME": str(directory)})


def test_the_wrapper_gives_the_script_every_value_exactly_and_its_arguments(
    tmp_path: Path
) -> None:
    script = ('#!/bin/sh\nenv -0 > seen-env\nprintf "%s|" "$@" > seen-args\n'
              'sh -c \'printf "%s" "$TOKEN"\' > seen-exported\n')
    done = run_wrapper(tmp_path, ENVIRONMENT, script)
    assert done.returncode == 0, done.stderr
    seen = values_of((tmp_path / "seen-env").read_bytes())
    assert {name: seen.get(name) for name, _ in ENVIRONMENT} == dict(ENVIRONMENT)
    assert (tmp_path / "seen-args").read_text() == "first arg|second|"
    assert (tmp_path / "seen-exported").read_text() == SECRET_VALUE


def test_the_wrapper_passes_the_scripts_exit_status(tmp_path: Path) -> None:
    assert run_wrapper(tmp_path, [("A", "1")], "#!/bin/sh\nexit 3\n").returncode == 3


def test_the_wrapper_stops_without_its_env_file(tmp_path: Path) -> None:
    (tmp_path / WRAPPER).write_text(WRAPPER_PROGRAM)
    (tmp_path / WRAPPER).chmod(0o700)
    (tmp_path / "script").write_text("#!/bin/sh\ntouch ran\n")
    done = subprocess.run([f"./{WRAPPER}"], cwd=tmp_path, capture_output=True, check=False,
                          timeout=30)
    assert done.returncode != 0
    assert not (tmp_path / "ran").exists()


# --- SLURM ---------------------------------------------------------------------------------------


def test_without_env_sbatch_runs_as_it_is() -> None:
    request = with_payload(job(), env=False)
    assert submit_argv(request) == sbatch_argv(request)
    assert not [a for a in sbatch_argv(request) if a.startswith("--export")]


def test_with_env_sbatch_reads_the_env_file_completed_first() -> None:
    request = with_payload(job(slurm={"partition": "debug"}))
    argv = submit_argv(request)
    assert argv[:5] == ["sh", "-c", EXPORT, "hpcbridge-export", ENV_FILE]
    assert argv[5:] == sbatch_argv(request)
    sbatch = sbatch_argv(request)
    assert f"--export-file={ENV_FILE}" in sbatch
    assert sbatch.index(f"--export-file={ENV_FILE}") < sbatch.index("--partition=debug")
    assert sbatch[-1] == "script"


def test_slurm_submission_uploads_the_env_file_and_inputs_on_stdin_only() -> None:
    request = with_payload(job(cluster={"host": "h", "secretRef": {"name": "s"},
                                        "workDir": "/scratch/alice"}))
    conn = FakeConnection({"hpcbridge-submit": [completed("submitted 4242\n")]})
    outcome = SLURM.submit(conn, request, deadline=deadline())
    assert outcome.job_id == "4242"
    ((argv, stdin),) = conn.calls
    assert argv[4] == f"/scratch/alice/research/hello/{UID}/attempt-1"
    names = [ENV_FILE, *(f.path for f in INPUTS)]
    listed = argv[9:9 + 2 * (1 + len(names))]
    assert listed[0::2] == ["script", *names]
    assert argv[8] == str(1 + len(names))
    assert SECRET_VALUE not in " ".join(argv)
    assert environment_file(ENVIRONMENT) in stdin
    assert all(f.content in stdin for f in INPUTS)


@pytest.mark.parametrize(("method", "verb"), [("hold", "hold"), ("release", "release")])
def test_slurm_hold_and_release(method: str, verb: str) -> None:
    conn = FakeConnection()
    getattr(SLURM, method)(conn, ["500", "501"], deadline=deadline())
    assert [argv for argv, _ in conn.calls] == [["scontrol", verb, "500", "501"]]
    getattr(SLURM, method)(conn, [], deadline=deadline())
    assert len(conn.calls) == 1


@pytest.mark.parametrize("method", ["hold", "release"])
def test_a_failing_scontrol_is_a_scheduler_error(method: str) -> None:
    conn = FakeConnection({"scontrol": [completed(err="slurm_update error: Access/permission "
                                                      "denied\n", status=1)]})
    with pytest.raises(SchedulerError, match="permission denied"):
        getattr(SLURM, method)(conn, ["500"], deadline=deadline())


# --- HTCondor ------------------------------------------------------------------------------------


def description(request: JobRequest) -> dict[str, str]:
    lines = [line for line in submit_description(request).splitlines()
             if " = " in line and not line.startswith("#")]
    return dict(line.split(" = ", 1) for line in lines)


def test_with_env_the_wrapper_is_the_executable_and_takes_its_files_along() -> None:
    request = with_payload(job("htcondor"), inputs=CONDOR_INPUTS)
    found = description(request)
    assert found["executable"] == WRAPPER
    assert found["transfer_input_files"] == f"script, {ENV_FILE}, params.json, data"
    assert SECRET_VALUE not in submit_description(request)
    assert "fast" not in submit_description(request)


def test_with_inputs_only_the_script_is_the_executable() -> None:
    found = description(with_payload(job("htcondor"), env=False, inputs=CONDOR_INPUTS))
    assert found["executable"] == "script"
    assert found["transfer_input_files"] == "params.json, data"


def test_with_env_only_the_script_and_env_file_travel() -> None:
    found = description(with_payload(job("htcondor"), inputs=()))
    assert found["transfer_input_files"] == f"script, {ENV_FILE}"


def test_without_either_nothing_extra_travels() -> None:
    assert "transfer_input_files" not in description(job("htcondor"))


def test_htcondor_submission_uploads_the_env_file_and_wrapper_on_stdin_only() -> None:
    request = with_payload(job("htcondor"), inputs=CONDOR_INPUTS)
    conn = FakeConnection({"hpcbridge-submit": [completed("submitted 23.0\n")]})
    assert HTCONDOR.submit(conn, request, deadline=deadline()).job_id == "23"
    ((argv, stdin),) = conn.calls
    names = argv[9:9 + 2 * int(argv[8])][0::2]
    assert names == ["script", "submit.sub", ENV_FILE, WRAPPER,
                     *(f.path for f in CONDOR_INPUTS)]
    assert SECRET_VALUE not in " ".join(argv)
    assert shell_environment(ENVIRONMENT) in stdin
    assert WRAPPER_PROGRAM.encode() in stdin


@pytest.mark.parametrize(
    ("tool", "result"),
    [
        # The wording of HTCondor 23.9.6 for a constraint.
        pytest.param("condor_hold", completed(
            "All jobs matching constraint ((ClusterId == 23 || ClusterId == 24) && "
            "JobStatus == 1) have been held\n"), id="held"),
        pytest.param("condor_hold", completed(err=(
            "\nCouldn't find/hold all jobs matching constraint ((ClusterId == 23 || "
            "ClusterId == 24) && JobStatus == 1)\n"), status=1), id="nothing-idle"),
        pytest.param("condor_release", completed(
            "All jobs matching constraint ((ClusterId == 23 || ClusterId == 24) && "
            "JobStatus == 5) have been released\n"), id="released"),
        pytest.param("condor_release", completed(err=(
            "Couldn't find/release all jobs matching constraint ((ClusterId == 23 || "
            "ClusterId == 24) && JobStatus == 5)\n"), status=1), id="nothing-held"),
    ],
)
def test_htcondor_hold_and_release_tolerate_nothing_to_do(tool: str, result: Any) -> None:
    """Only idle procs are held (one that started since the query keeps running) and only
    held ones released: a constraint, not the cluster ids."""
    conn = FakeConnection({tool: [result]})
    method = "hold" if tool == "condor_hold" else "release"
    getattr(HTCONDOR, method)(conn, ["23", "24"], deadline=deadline())
    status = 1 if tool == "condor_hold" else 5
    assert [argv for argv, _ in conn.calls] == [[
        tool, "-constraint", f"(ClusterId == 23 || ClusterId == 24) && JobStatus == {status}"]]


@pytest.mark.parametrize(
    "result",
    [
        pytest.param(completed(err="ERROR: Failed to connect to local queue manager\n",
                               status=1), id="schedd-down"),
        pytest.param(completed(status=1), id="silent"),
        pytest.param(completed(err="Couldn't find/hold all jobs in cluster 23\n"
                                   "ERROR: permission denied\n", status=1), id="mixed"),
    ],
)
def test_htcondor_hold_failures_are_scheduler_errors(result: Any) -> None:
    with pytest.raises(SchedulerError, match="condor_hold failed"):
        HTCONDOR.hold(FakeConnection({"condor_hold": [result]}), ["23"], deadline=deadline())


def test_htcondor_hold_of_nothing_runs_nothing() -> None:
    conn = FakeConnection()
    HTCONDOR.hold(conn, [], deadline=deadline())
    HTCONDOR.release(conn, [], deadline=deadline())
    assert conn.calls == []


# --- the guarded submission, for real ------------------------------------------------------------


def login_env(tmp_path: Path, **programs: str) -> dict[str, str]:
    """Stand-in programs, a HOME of its own, and a variable of the login environment."""
    return {**stand_ins(tmp_path, home=tmp_path / "home", **programs),
            "LOGIN_ONLY": "from-login"}


def guarded(request: JobRequest, files: list[tuple[str, bytes]], submit: list[str],
            env: dict[str, str], stdin: bytes | None = None) -> str:
    argv, payload = guard.command(remote_dir=request.remote_dir, files=files, submit=submit,
                                  lookup="exit 0", transient="Unable to contact",
                                  stale_seconds=request.guard_stale)
    done = subprocess.run(argv, input=payload if stdin is None else stdin, env=env,
                          capture_output=True, check=True, timeout=30)
    return done.stdout.decode().strip()


def absolute(tmp_path: Path, backend: str = "slurm") -> JobRequest:
    return with_payload(job(backend, cluster={"host": "h", "secretRef": {"name": "s"},
                                              "workDir": str(tmp_path / "scratch dir")}),
                        inputs=INPUTS if backend == "slurm" else CONDOR_INPUTS)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_inputs_in_sub_directories_land_in_an_absolute_work_dir(tmp_path: Path) -> None:
    request = absolute(tmp_path)
    env = login_env(tmp_path)
    out = guarded(request, [("script", b"#!/bin/sh\n"), *input_files(request)],
                  ["sh", "-c", "find . -type f | sort > ../listed; echo 4242"], env)
    assert out == "submitted 4242"
    attempt = Path(request.remote_dir)
    assert attempt.is_absolute() and attempt.is_relative_to(tmp_path / "scratch dir")
    for item in INPUTS:
        assert (attempt / item.path).read_bytes() == item.content
        assert mode(attempt / item.path) == 0o600
    assert mode(attempt / "data" / "raw") == 0o700
    assert not any(Path(env["HOME"]).iterdir())
    assert (attempt.parent / "listed").read_text().splitlines() == sorted(
        ["./script", "./.guard", "./submit.out", "./submit.err",
         *(f"./{f.path}" for f in INPUTS)])


def test_a_home_relative_work_dir_lands_in_home(tmp_path: Path) -> None:
    request = with_payload(job(cluster={"host": "h", "secretRef": {"name": "s"},
                                        "workDir": "~/jobs"}))
    env = login_env(tmp_path)
    assert guarded(request, [("script", b"#!/bin/sh\n"), *input_files(request)],
                   ["echo", "4242"], env) == "submitted 4242"
    attempt = Path(env["HOME"]) / "jobs/research/hello" / UID / "attempt-1"
    assert (attempt / "data/raw/blob.bin").read_bytes() == bytes(range(256))


def test_a_cut_upload_of_a_nested_file_is_not_submitted(tmp_path: Path) -> None:
    request = absolute(tmp_path)
    env = login_env(tmp_path)
    files = [("script", b"#!/bin/sh\n"), *input_files(request)]
    _, payload = guard.command(remote_dir=request.remote_dir, files=files, submit=["true"],
                               lookup="exit 0", transient="x", stale_seconds=120)
    out = guarded(request, files, ["sh", "-c", "touch ../submitted; echo 1"], env,
                  stdin=payload[:len(b"#!/bin/sh\n") + len(INPUTS[0].content) + 100])
    assert out.startswith("error the upload of data/raw/blob.bin was cut short")
    assert not (Path(request.remote_dir).parent / "submitted").exists()


def test_sbatch_gets_the_login_environment_then_the_attempts(tmp_path: Path) -> None:
    request = absolute(tmp_path)
    env = login_env(tmp_path, sbatch='cp hpcbridge-env ../seen-env\n'
                                     'printf "%s\\n" "$@" > ../seen-args\necho 4242')
    files = [("script", b"#!/bin/sh\n"), (ENV_FILE, environment_file(request.environment)),
             *input_files(request)]
    env["MODE"] = "from-login-overridden"
    assert guarded(request, files, submit_argv(request), env) == "submitted 4242"
    attempt = Path(request.remote_dir)
    seen_file = (attempt.parent / "seen-env").read_bytes()
    seen = values_of(seen_file)
    assert {name: seen[name] for name, _ in ENVIRONMENT} == dict(ENVIRONMENT)
    assert seen["LOGIN_ONLY"] == "from-login"
    assert seen_file.endswith(environment_file(ENVIRONMENT))  # the attempt's values win
    assert mode(attempt.parent / "seen-env") == 0o600
    assert not (attempt / ENV_FILE).exists()  # slurmctld keeps the variables with the job
    assert not (attempt / f"{ENV_FILE}.tmp").exists()
    args = (attempt.parent / "seen-args").read_text().splitlines()
    assert f"--export-file={ENV_FILE}" in args and args[-1] == "script"


def test_condor_submit_and_the_wrapper_run_the_script_with_env_and_inputs(
    tmp_path: Path
) -> None:
    """A stand-in condor_submit runs the job where it was submitted, as a pool with a shared
    filesystem would: the wrapper reads the env file, then runs the script."""
    request = absolute(tmp_path, "htcondor")
    env = login_env(tmp_path, condor_submit=(
        'cat > ../seen.sub; ./hpcbridge-run > ../job.out 2>&1; echo "23.0 - 23.0"'))
    script = (b'#!/bin/sh\nprintf "%s|%s|" "$MODE" "$LOGIN_ONLY"\n'
              b'printf "%s" "$TOKEN" | od -c | head -n 1\ncat data/raw/blob.bin | wc -c\n')
    files = [("script", script), ("submit.sub", submit_description(request).encode()),
             (ENV_FILE, shell_environment(request.environment)),
             (WRAPPER, WRAPPER_PROGRAM.encode()), *input_files(request)]
    assert guarded(request, files, list(HTCONDOR_SUBMIT), env) == "submitted 23.0"
    attempt = Path(request.remote_dir)
    out = (attempt.parent / "job.out").read_text()
    token_start = subprocess.run(["od", "-c"], input=SECRET_VALUE.encode(), check=True,
                                 capture_output=True).stdout.decode().splitlines()[0]
    first, size = out.split("\n")[:2]
    assert (first, size.strip()) == (f"fast|from-login|{token_start}", "256")
    assert mode(attempt / WRAPPER) == 0o700
    assert (attempt.parent / "seen.sub").read_text() == submit_description(request)


def test_cleanup_and_the_end_marker_under_an_absolute_work_dir(tmp_path: Path) -> None:
    request = absolute(tmp_path)
    env = login_env(tmp_path)
    guarded(request, [("script", b"#!/bin/sh\n")], ["echo", "4242"], env)
    attempt = Path(request.remote_dir)
    subprocess.run(guard.mark_ended_command(remote_dir=request.remote_dir, phase="Failed"),
                   env=env, check=True, timeout=30)
    assert (attempt / "ended").read_text() == "Failed\n"
    assert mode(attempt / "ended") == 0o600  # as every other file of the attempt
    root = str(attempt.parent)
    cleanup = guard.cleanup_command(root=root, stale_seconds=120)
    assert subprocess.run(cleanup, env=env, capture_output=True, check=True,
                          timeout=30).stdout == b"removed\n"
    assert not attempt.parent.exists() and (tmp_path / "scratch dir" / "research").is_dir()
