"""The log Pod's program: one remote command per poll reads every task file's new bytes in
task order (run here by the local shell against a temporary home), from a directory below the
home or an absolute one; the end written by the hook server stops a follower without asking the
scheduler, and SIGTERM ends it at once. ``--jump`` takes each jump host with its own Secret."""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from hooks.deadline import Deadline
from hooks.pods import login, logs
from hooks.ssh.client import Completed, Target


class LocalShell:
    """A ``Remote`` that runs each command with the local ``sh``, HOME set to ``home``."""

    target = Target("localhost", 22)

    def __init__(self, home: Path) -> None:
        self.home = home
        self.argvs: list[list[str]] = []

    def run(self, argv: Sequence[str], *, stdin: bytes = b"", deadline: Deadline) -> Completed:
        self.argvs.append(list(argv))
        done = subprocess.run(list(argv), input=stdin, capture_output=True, check=False,
                              env={**os.environ, "HOME": str(self.home)}, timeout=30)
        return Completed(done.returncode, done.stdout, done.stderr)

    def stream(
        self, argv: Sequence[str], sink: Callable[[bytes], None], *, stdin: bytes = b"",
        deadline: Deadline,
    ) -> tuple[int, bytes]:
        result = self.run(argv, stdin=stdin, deadline=deadline)
        for start in range(0, len(result.stdout), 7):  # arrives in pieces, as over SSH
            sink(result.stdout[start:start + 7])
        return result.exit_status, result.stderr


@pytest.fixture
def attempt(tmp_path: Path) -> Path:
    directory = tmp_path / ".hpcbridge" / "research" / "hello" / "u-1" / "attempt-1"
    directory.mkdir(parents=True)
    return directory


def printer(tmp_path: Path) -> tuple[logs.Printer, LocalShell]:
    shell = LocalShell(tmp_path)
    return logs.Printer(shell, ".hpcbridge/research/hello/u-1/attempt-1"), shell


def test_one_command_prints_every_task_file_in_task_order(
    tmp_path: Path, attempt: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    for task in ("7_10", "7_2", "7_1"):
        (attempt / f"{task}.out").write_text(f"out {task}\n")
        (attempt / f"{task}.err").write_text(f"err {task}\n")
    (attempt / "script").write_text("#!/bin/sh\n")
    reader, shell = printer(tmp_path)
    assert reader.poll() == "running"
    assert len(shell.argvs) == 1
    assert capfd.readouterr().out == "".join(
        f"==> task {t} stdout <==\nout {t}\n==> task {t} stderr <==\nerr {t}\n"
        for t in ("7_1", "7_2", "7_10"))


def test_a_second_poll_prints_only_what_is_new(
    tmp_path: Path, attempt: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    (attempt / "15.0.out").write_bytes(b"first\n")
    reader, _ = printer(tmp_path)
    reader.poll()
    with (attempt / "15.0.out").open("ab") as out:
        out.write(b"second \x00\xff binary\n")
    (attempt / "15.0.err").write_text("oops\n")
    (attempt / "ended").write_text("Succeeded\n")
    assert reader.poll() == "ended Succeeded"
    assert reader.grew
    assert capfd.readouterr().out == (
        "==> task 15.0 stdout <==\nfirst\nsecond \x00\ufffd binary\n"
        "==> task 15.0 stderr <==\noops\n")
    assert reader.poll() == "ended Succeeded"
    assert not reader.grew


def test_a_missing_directory(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    reader, _ = printer(tmp_path)
    assert reader.poll() is None
    assert capfd.readouterr().err == ("hpcbridge: no output directory "
                                      "~/.hpcbridge/research/hello/u-1/attempt-1 on the cluster\n")


def test_an_absolute_directory(
    tmp_path: Path, attempt: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    scratch = tmp_path / "scratch" / "alice" / "attempt-1"
    scratch.mkdir(parents=True)
    (scratch / "9.out").write_text("from scratch\n")
    (attempt / "9.out").write_text("from home\n")
    reader = logs.Printer(LocalShell(tmp_path / "elsewhere"), str(scratch))
    assert reader.poll() == "running"
    assert capfd.readouterr().out == "==> task 9 stdout <==\nfrom scratch\n"
    gone = logs.Printer(LocalShell(tmp_path), str(tmp_path / "gone"))
    assert gone.poll() is None
    assert capfd.readouterr().err == (
        f"hpcbridge: no output directory {tmp_path / 'gone'} on the cluster\n")


def args(**changes: object) -> argparse.Namespace:
    values: dict[str, object] = {"backend": "slurm", "key": "u-1-1", "job_id": ["4242"]}
    values.update(changes)
    return argparse.Namespace(**values)


def test_a_follower_stops_at_the_hooks_end_marker_without_asking_the_scheduler(
    tmp_path: Path, attempt: Path
) -> None:
    (attempt / "4242.out").write_text("working\n")
    reader, shell = printer(tmp_path)
    polls = []

    def sleep(seconds: float) -> None:
        polls.append(seconds)
        if len(polls) == 3:
            (attempt / "ended").write_text("Succeeded\n")

    assert logs.follow(shell, reader, args(), sleep=sleep) == 0
    assert len(shell.argvs) == 4
    assert all(argv[3] == "hpcbridge-logs" for argv in shell.argvs)


def test_a_quiet_follower_asks_the_scheduler_once_in_a_while(
    tmp_path: Path, attempt: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reader, shell = printer(tmp_path)
    clock = [0.0]
    asked: list[float] = []

    def ended(conn: object, namespace: argparse.Namespace) -> bool:
        asked.append(clock[0])
        return len(asked) == 2

    monkeypatch.setattr(logs, "ended_on_scheduler", ended)
    assert logs.follow(shell, reader, args(), clock=lambda: clock[0],
                       sleep=lambda s: clock.__setitem__(0, clock[0] + s)) == 0
    assert len(asked) == 2
    assert asked[1] - asked[0] >= logs.QUIET_SECONDS


def test_sigterm_ends_a_follower_at_once(tmp_path: Path) -> None:
    """The program as the Pod runs it, waiting to log in to a host that never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        secret = tmp_path / "secret"
        secret.mkdir()
        (secret / "username").write_text("u")
        (secret / "password").write_text("p")
        pod = subprocess.Popen(
            [sys.executable, "-m", "hooks.pods.logs", "--backend=slurm", "--host=127.0.0.1",
             f"--port={port}", "--remote-dir=x", "--key=u-1-1", f"--secret-dir={secret}",
             "--follow", "--insecure-skip-host-key-check"],
            cwd=Path(__file__).resolve().parents[3], stderr=subprocess.PIPE)
        listener.settimeout(60)
        connection, _ = listener.accept()  # it is logging in: its SIGTERM handler is set
        with connection:
            pod.send_signal(signal.SIGTERM)
            _, err = pod.communicate(timeout=10)
        assert (pod.returncode, err) == (0, b"")


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param("bastion.example.org,22,/etc/hpcbridge/jump-0,verify",
                 login.JumpArg("bastion.example.org", 22, Path("/etc/hpcbridge/jump-0"), False),
                 id="verify"),
    pytest.param("10.0.0.7,2222,/run/jump,1,insecure",
                 login.JumpArg("10.0.0.7", 2222, Path("/run/jump,1"), True),
                 id="insecure-and-a-comma-in-the-directory"),
])
def test_a_jump_argument(text: str, expected: login.JumpArg) -> None:
    assert login.jump_arg(text) == expected


@pytest.mark.parametrize("text", [
    "bastion.example.org,22,/etc/hpcbridge/jump-0",
    "bastion.example.org,22,/etc/hpcbridge/jump-0,check",
    "bastion.example.org,0,/etc/hpcbridge/jump-0,verify",
    "bastion.example.org,65536,/etc/hpcbridge/jump-0,verify",
    "bastion.example.org,²,/etc/hpcbridge/jump-0,verify",
    ",22,/etc/hpcbridge/jump-0,verify",
    "bastion.example.org,22,,verify",
])
def test_a_malformed_jump_argument(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="HOST,PORT,SECRET_DIR,CHECK"):
        login.jump_arg(text)


def test_jump_arguments_keep_their_order() -> None:
    args = logs._parser().parse_args([
        "--backend=slurm", "--host=login.hpc", "--remote-dir=/scratch/a", "--key=u-1",
        "--secret-dir=/s", "--jump=gate,22,/j0,verify", "--jump=inner,2222,/j1,insecure"])
    assert [(jump.host, jump.port, jump.insecure) for jump in args.jump] == [
        ("gate", 22, False), ("inner", 2222, True)]


def test_the_mounted_secret_is_read_with_its_certificate(tmp_path: Path) -> None:
    for key, value in {"username": "alice\n", "ssh-privatekey": "KEY", "known_hosts": "KH",
                       "ssh-certificate": "CERT"}.items():
        (tmp_path / key).write_text(value)
    credentials = login.read_secret(tmp_path)
    assert (credentials.username, credentials.private_key, credentials.password,
            credentials.known_hosts, credentials.certificate) == (
        "alice", "KEY", None, "KH", "CERT")


def test_a_secret_the_hooks_would_refuse_is_said_plainly(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A jump host's known_hosts with an @cert-authority line: the program says so, naming
    the jump host, instead of trying a login that cannot check the host."""
    cluster, jump = tmp_path / "cluster", tmp_path / "jump"
    for directory in (cluster, jump):
        directory.mkdir()
        (directory / "username").write_text("u")
        (directory / "password").write_text("p")
    (jump / "known_hosts").write_text(
        "@cert-authority *.example.org ssh-ed25519 "
        "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n")
    status = logs._run(logs._parser().parse_args([
        "--backend=slurm", "--host=login.hpc", "--remote-dir=x", "--key=u-1",
        f"--secret-dir={cluster}", f"--jump=gate.example.org,22,{jump},verify",
        "--insecure-skip-host-key-check"]))
    assert status == 1
    assert capfd.readouterr().err == (
        "hpcbridge: cannot log in to login.hpc: jump host gate.example.org: the Secret's "
        "known_hosts line 1 is an @cert-authority line; host certificates cannot be verified "
        "yet, so list the host's own key (ssh-keyscan -p PORT HOST).\n")
