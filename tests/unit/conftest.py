"""Shared helpers of the unit tests: recorded scheduler output, a fake SSH connection, job and
spec builders, and a runtime whose schedulers and connections are stand-ins.

Tests import the plain functions (``from tests.unit.conftest import job``); fixtures are
found by pytest as usual.
"""

from __future__ import annotations

import base64
import datetime
import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from hooks.core.spec.batchjob import parse_spec
from hooks.core.values.fields import SpecError
from hooks.core.values.job import JobRequest
from hooks.core.wire.request import Call, Policy, parse_call
from hooks.deadline import Deadline
from hooks.metrics import Metrics, verb
from hooks.runtime import Runtime
from hooks.schedulers.base import Registry
from hooks.schedulers.registry import REGISTRY
from hooks.schedulers.shell import ShellTransport
from hooks.settings import Settings
from hooks.ssh.client import Completed, Target

FIXTURES = Path(__file__).resolve().parent / "fixtures"
UID = "2b7e1f6a-5c3d-4e8f-9a0b-1c2d3e4f5a6b"
NOW = datetime.datetime(2026, 11, 22, 10, 5, 0, tzinfo=datetime.UTC)
HOSTS = {"slurm": "login.hpc.example.org", "htcondor": "submit.example.org"}
IMAGE = "registry.example.org/hpcbridge:test"
POLICY = Policy(log_image=IMAGE, finalize_grace=600.0, guard_stale=120)


def recorded(backend: str, name: str) -> str:
    """A recorded output file, without its ``#`` comment lines."""
    lines = (FIXTURES / backend / name).read_text().splitlines(keepends=True)
    return "".join(line for line in lines if not line.startswith("#"))


def completed(out: str = "", err: str = "", status: int = 0) -> Completed:
    return Completed(status, out.encode(), err.encode())


def deadline(seconds: float = 30.0) -> Deadline:
    return Deadline.after(seconds)


def raw_spec(backend: str = "slurm", **fields: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "backend": backend,
        "cluster": {"host": HOSTS[backend], "secretRef": {"name": "hpc-login"}},
        "script": "#!/bin/bash\necho hi\n",
    }
    raw.update(fields)
    return raw


def spec_of(raw: object) -> Any:
    """``parse_spec`` with the product's schedulers."""
    return parse_spec(raw, REGISTRY)


def login_cluster(**fields: Any) -> dict[str, Any]:
    """A ``spec.cluster`` on the SLURM login node with Secret ``hpc-login``, plus ``fields``."""
    return {"host": HOSTS["slurm"], "secretRef": {"name": "hpc-login"}, **fields}


def refusal(**fields: Any) -> str:
    """The sentence a spec of ``raw_spec(**fields)`` is refused with."""
    with pytest.raises(SpecError) as caught:
        spec_of(raw_spec(**fields))
    return str(caught.value)


def call(body: object, now: datetime.datetime = NOW) -> Call:
    """``parse_call`` with the product's schedulers and default settings."""
    return parse_call(body, rules=REGISTRY, policy=POLICY, now=now)


def job(backend: str = "slurm", attempt: int = 1, *, name: str = "hello",
        **fields: Any) -> JobRequest:
    """Attempt ``attempt`` of research/``name`` with a spec of ``raw_spec(backend, **fields)``."""
    return JobRequest("research", name, UID, attempt, spec_of(raw_spec(backend, **fields)), 120)


class FakeConnection:
    """A ``Remote`` that answers each command by its program (``squeue``, ``condor_q``, the
    ``$0`` of an ``sh -c`` program...), in order, and records every argv and stdin. A program
    with no answers left gets an empty success."""

    target = Target("login.hpc.example.org", 22)

    def __init__(self, answers: dict[str, list[Completed]] | None = None) -> None:
        self.answers = answers or {}
        self.calls: list[tuple[list[str], bytes]] = []

    def run(self, argv: Sequence[str], *, stdin: bytes = b"", deadline: Deadline) -> Completed:
        self.calls.append((list(argv), stdin))
        queue = self.answers.get(verb(argv), [])
        return queue.pop(0) if queue else completed()

    def stream(
        self, argv: Sequence[str], sink: Callable[[bytes], None], *, stdin: bytes = b"",
        deadline: Deadline,
    ) -> tuple[int, bytes]:
        result = self.run(argv, stdin=stdin, deadline=deadline)
        sink(result.stdout)
        return result.exit_status, result.stderr

    def programs(self) -> list[str]:
        return [verb(argv) for argv, _ in self.calls]


class FakePool:
    """Stands in for the SSH pool: every open yields ``conn`` (or raises ``error``) and is
    recorded, by host and by its whole target (jump hosts included)."""

    def __init__(self, conn: object = None, error: Exception | None = None) -> None:
        self.conn = conn if conn is not None else FakeConnection()
        self.error = error
        self.hosts: list[str] = []
        self.targets: list[Target] = []

    @contextmanager
    def open(self, target: Target, credentials: object, *, deadline: Deadline) -> Iterator[Any]:
        self.hosts.append(target.host)
        self.targets.append(target)
        if self.error is not None:
            raise self.error
        yield self.conn

    def evict_idle(self, idle_seconds: float) -> int:
        return 0

    def close(self) -> None:
        pass


def runtime(
    pool: FakePool | None = None, *, schedulers: Registry = REGISTRY,
    now: datetime.datetime = NOW, **settings: Any,
) -> Runtime:
    """A runtime with the product's settings (``log_image`` fixed) and a stand-in pool."""
    config = Settings(**{"log_image": IMAGE, **settings})
    shell = ShellTransport(config, Metrics(), pool=pool or FakePool())
    return Runtime.build(config, schedulers=schedulers, clock=lambda: now,
                         transports={ShellTransport: shell})


# --- ssh-keygen ----------------------------------------------------------------------------------

def need_ssh_keygen() -> None:
    """Skip without OpenSSH's ssh-keygen, except under ``CI=true``, where it must be there."""
    if shutil.which("ssh-keygen") is None:
        reason = "ssh-keygen (OpenSSH's client tools) is not installed"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI=true: these tests must run)")
        pytest.skip(reason)


class Keygen:
    """Keys and certificates made by ssh-keygen with a user CA, in UTC."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.run("-t", "ed25519", "-N", "", "-f", str(directory / "ca"))

    def run(self, *args: str) -> None:
        subprocess.run(["ssh-keygen", "-q", *args], check=True, capture_output=True,
                       env={**os.environ, "TZ": "UTC"}, timeout=60)

    def key(self, name: str, kind: str = "ed25519") -> str:
        path = self.directory / name
        if not path.exists():
            self.run("-t", kind, "-N", "", "-f", str(path))
        return path.read_text()

    def public(self, name: str) -> bytes:
        return base64.b64decode((self.directory / f"{name}.pub").read_text().split()[1])

    def certificate(self, name: str, *options: str, kind: str = "ed25519") -> str:
        self.key(name, kind)
        self.run("-s", str(self.directory / "ca"), "-I", f"id-{name}", "-n", "alice",
                 *options, str(self.directory / f"{name}.pub"))
        return (self.directory / f"{name}-cert.pub").read_text()


@pytest.fixture(scope="module")
def keygen(tmp_path_factory: pytest.TempPathFactory) -> Keygen:
    need_ssh_keygen()
    return Keygen(tmp_path_factory.mktemp("keys"))


def stand_ins(tmp_path: Path, *, home: Path, **programs: str) -> dict[str, str]:
    """An environment whose PATH finds these stand-in programs (shell bodies, by name) first,
    with ``home`` as HOME: a login node for the remote programs, run locally."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in programs.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
    home.mkdir(exist_ok=True)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(home)}


@contextmanager
def silent_host(first: bytes) -> Iterator[int]:
    """The port of a listener on 127.0.0.1 that sends ``first`` to the one client it accepts,
    then says nothing more until the context ends."""
    held: list[socket.socket] = []
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()

        def accept() -> None:
            conn, _ = listener.accept()
            held.append(conn)
            conn.sendall(first)

        threading.Thread(target=accept, daemon=True).start()
        yield listener.getsockname()[1]
    for conn in held:
        conn.close()
