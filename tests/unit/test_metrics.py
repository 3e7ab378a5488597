"""Metric labels stay within small fixed sets: the remote-command ``verb`` names the program,
never a path, a job's name or anything else that grows with the number of BatchJobs."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from hooks.backends import guard
from hooks.backends.base import Backend
from hooks.backends.htcondor import HTCondorBackend
from hooks.backends.slurm import SlurmBackend
from hooks.core.model import JobRef, JobRequest
from hooks.core.spec import parse_spec
from hooks.metrics import verb
from hooks.ssh.client import Completed, Target

VERBS = {"hpcbridge-submit", "hpcbridge-cleanup", "squeue", "sacct", "scancel", "condor_q",
         "condor_history", "condor_rm"}


class Recorder:
    """A ``Remote`` that records every argv; a guarded submission is answered as submitted,
    anything else with empty success."""

    target = Target("login.hpc.example.org", 22)

    def __init__(self) -> None:
        self.argvs: list[list[str]] = []

    def run(self, argv: Sequence[str], *, stdin: bytes = b"", timeout: float) -> Completed:
        self.argvs.append(list(argv))
        return Completed(0, b"submitted 4242\n" if "hpcbridge-submit" in argv else b"", b"")

    def stream(
        self, argv: Sequence[str], sink: Callable[[bytes], None], *, stdin: bytes = b"",
        timeout: float,
    ) -> tuple[int, bytes]:
        self.argvs.append(list(argv))
        return 0, b""


def job(backend: str, namespace: str, name: str, uid: str) -> JobRequest:
    spec = parse_spec({
        "backend": backend,
        "cluster": {"host": "login.hpc.example.org", "secretRef": {"name": "hpc-login"}},
        "script": "#!/bin/bash\necho hi\n",
    })
    return JobRequest(namespace, name, uid, 1, spec)


def verbs_of_a_life(backend: Backend, job: JobRequest) -> list[str]:
    """The verbs of every command one BatchJob's life sends: submit, track (the job has left
    the queue, so the accounting or history is asked too), cancel, remove its directory."""
    conn = Recorder()
    backend.submit(conn, job, timeout=10)
    backend.query(conn, [JobRef(job.key, "4242", ("4242",))], timeout=10)
    backend.active_jobs(conn, job.uid, timeout=10)
    backend.cancel(conn, ["4242"], timeout=10)
    conn.run(guard.cleanup_command(root=job.remote_dir, stale_seconds=guard.STALE_SECONDS),
             timeout=10)
    return [verb(argv) for argv in conn.argvs]


@pytest.mark.parametrize("backend", [SlurmBackend(), HTCondorBackend()], ids=lambda b: b.name)
def test_remote_command_verbs_do_not_depend_on_the_batchjob(backend: Backend) -> None:
    one = verbs_of_a_life(backend, job(backend.name, "research", "hello",
                                       "2b7e1f6a-5c3d-4e8f-9a0b-1c2d3e4f5a6b"))
    other = verbs_of_a_life(backend, job(backend.name, "physics", "sweep-17",
                                         "9c8d7e6f-1a2b-4c3d-8e9f-0a1b2c3d4e5f"))
    assert one == other
    assert set(one) <= VERBS, set(one) - VERBS


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        pytest.param(["squeue", "-h"], "squeue", id="plain"),
        pytest.param(["env", "TZ=UTC", "sacct", "-j", "1"], "sacct", id="env"),
        pytest.param(["env", "TZ=UTC", "sh", "-c", "x=1; exec squeue", "squeue"], "squeue",
                     id="env-sh"),
        pytest.param(["sh", "-c", "d=$HOME/$1; mkdir -p -- \"$d\"", "hpcbridge-submit",
                      ".hpcbridge/jobs/research/hello/1"], "hpcbridge-submit",
                     id="program-with-assignments"),
        pytest.param([], "?", id="empty"),
    ],
)
def test_verb(argv: list[str], expected: str) -> None:
    assert verb(argv) == expected
