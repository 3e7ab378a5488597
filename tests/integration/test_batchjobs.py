"""BatchJobs on both real test clusters: the scenarios that mean the same on SLURM and HTCondor.

Each test runs once per backend (the ``cluster`` fixture), driven through the hooks as
Metacontroller would. What differs between the schedulers — how they list an attempt's jobs and
say one was cancelled, the shape of a job id, the options they reserve, the shortest time limit
they enforce — is the per-backend data in ``SCHEDULERS``. Scenarios only one scheduler has are in
test_slurm.py and test_htcondor.py.
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest
import requests

from tests.driver import Driver
from tests.integration.conftest import (
    HELLO,
    NAMESPACE,
    Cluster,
    clusters_with_key,
    condition,
    condor,
    jobs_named,
    start,
)

ACTIVE = frozenset({"", "PENDING", "RUNNING", "COMPLETING", "REQUEUED", "SUSPENDED"})
"""What sacct may still say of a job that has ended, until slurmdbd has its final record."""


def sacct_state(job_id: str) -> str:
    """SLURM's accounted state of an ended job, its first word (``CANCELLED`` of ``CANCELLED by
    0``). slurmctld hands a job's records to slurmdbd in the background: until the last one
    arrives (seconds on a busy machine) sacct knows no state or the job's earlier one, so ask
    again for up to a minute."""
    state = ""
    for _ in range(60):
        out = subprocess.run(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State"],
                             capture_output=True, text=True, check=True).stdout
        state = out.split("\n")[0].split(" ")[0]
        if state not in ACTIVE:
            return state
        time.sleep(1)
    return state


def slurm_jobs(slurm: Cluster, key: str) -> list[str]:
    return jobs_named(f"hpcb-{key}")


def slurm_state(slurm: Cluster, job: str) -> str:
    return sacct_state(job)


def condor_state(pool: Cluster, job: str) -> str:
    return condor(pool, "condor_q", job, "-af", "JobStatus").strip()


@dataclass(frozen=True)
class Scheduler:
    """What the shared scenarios need to know of one scheduler."""

    task_id: str
    """The shape of the task id in ``status.jobIDs`` of a plain job (a regular expression)."""
    options: str
    """The field of ``spec.<backend>`` holding options passed on to the scheduler."""
    reserved: Mapping[str, Any]
    """Values of that field that must be rejected as InvalidSpec, by test id."""
    time_limit: str
    """A ``spec.resources.timeLimit`` the scheduler enforces within a few minutes."""
    jobs: Callable[[Cluster, str], list[str]]
    """The scheduler's jobs (SLURM job ids, HTCondor cluster ids) of an attempt key, queued or
    done."""
    state: Callable[[Cluster, str], str]
    """The scheduler's state of a job, by the id ``job`` gives."""
    cancelled: frozenset[str]
    """The states ``state`` gives for a job cancelled (removed) on the scheduler."""

    def job(self, task: str) -> str:
        """The job of a plain job's task, checking its shape: ``4242`` of ``4242``, ``15`` of
        ``15.0``."""
        assert re.fullmatch(self.task_id, task), task
        return task.split(".")[0]


SCHEDULERS = {
    "slurm": Scheduler(
        task_id=r"[0-9]+", options="extraArgs", time_limit="1m",
        jobs=slurm_jobs, state=slurm_state, cancelled=frozenset({"CANCELLED"}),
        reserved={
            "job-name": ["--job-name=x"],
            "short-J": ["-J", "x"],
            "abbreviated-output": ["--out=/tmp/x"],
            "wrap": ["--wrap=id"],
            "chdir": ["--chdir=/"],
            # Not a submission: --wait held the submission until the job ended.
            "wait": ["--wait"],
            "test-only": ["--test-only"],
            "bundled-W": ["-vW"],
            # An option that takes a value, without one: sbatch would take the script's name.
            "bare-p": ["-p"],
            "bare-partition": ["--partition"],
            "bare-account": ["--account"],
            "bare-abbreviated": ["--part"],
            "bare-behind-a-flag": ["-Hp"],
            "bare-dash": ["-"],
        },
    ),
    "htcondor": Scheduler(
        task_id=r"[0-9]+\.0", options="submitOptions", time_limit="15s",
        jobs=clusters_with_key, state=condor_state,
        cancelled=frozenset({"", "3"}),  # left the queue, or still in it as Removed (3)
        reserved={
            "queue": {"queue": "100"},
            "executable": {"executable": "/bin/sh"},
            "newline-in-value": {"request_disk": "1\nqueue 5"},
            "newline-in-key": {"+Project\nqueue": '"x"'},
            "key-attribute": {"+HpcbridgeKey": '"other"'},
            "universe-any-case": {"Universe": "local"},
            # condor_submit's other names for owned commands, and their job attributes:
            "iwd": {"iwd": "/tmp"},
            "job_iwd": {"job_iwd": "/tmp"},
            "initial_dir": {"initial_dir": "/tmp"},
            "LeaveJobInQueue": {"LeaveJobInQueue": "true"},
            "arguments2": {"arguments2": '"a b"'},
            "stdout": {"stdout": "/tmp/x"},
            "out-attribute": {"+Out": '"b.out"'},
            "my-iwd-attribute": {"MY.Iwd": '"/tmp"'},
            "trailing-backslash": {"+Note": '"x" \\'},
            "tab": {"+Note": '"a\tb"'},
            "periodic-remove-conditional": {"periodic_remove": "false) ? false : (false"},
            "periodic-remove-or-true": {"periodic_remove": "false) || (true"},
            "periodic-remove-and-false": {"periodic_remove": "false)) && ((false"},
            "periodic-remove-macro": {"periodic_remove": "$(x)", "x": "false"},
        },
    ),
}

@pytest.fixture
def scheduler(cluster: Cluster) -> Scheduler:
    return SCHEDULERS[cluster.backend]


def key_of(obj: dict[str, Any], attempt: int = 1) -> str:
    return f"{obj['metadata']['uid']}-{attempt}"


def post_syncs(driver: Driver, body: dict[str, Any], count: int) -> list[requests.Response]:
    """``count`` identical sync requests at once, as retries racing each other would send."""
    if count == 0:
        return []
    with concurrent.futures.ThreadPoolExecutor(count) as pool:
        return list(pool.map(
            lambda _: requests.post(f"{driver.url}/sync", json=body, timeout=30), range(count)))


@pytest.mark.parametrize("auth", ["key", "password"])
def test_succeeds_and_log_pod_prints_output(
    driver: Driver, cluster: Cluster, scheduler: Scheduler, name: str, auth: str
) -> None:
    start(driver, cluster, name, HELLO, auth=auth)
    obj = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed")
    status = obj["status"]
    assert (status["phase"], status["reason"], status["exitCode"], status["backend"]) == (
        "Succeeded", "", 0, cluster.backend)
    assert condition(obj, "Complete")["status"] == "True"
    assert condition(obj, "ClusterReachable")["status"] == "True"
    assert status["completionTime"] >= status["startTime"] >= status["submitTime"]
    (task,) = status["jobIDs"]
    assert re.fullmatch(scheduler.task_id, task), task
    (pod,) = driver.pods_of(NAMESPACE, name)
    assert pod["metadata"]["name"] == status["logsPod"] == f"{name}-logs"
    logs = driver.run_pod(pod)
    assert logs.returncode == 0, logs.stderr
    assert logs.stdout == (f"==> task {task} stdout <==\nhello from {os.uname().nodename}\n"
                           f"==> task {task} stderr <==\nto-stderr\n")


@pytest.mark.parametrize("auth", ["key", "password"])
def test_exit_code_fails_the_job(driver: Driver, cluster: Cluster, name: str, auth: str) -> None:
    start(driver, cluster, name, "#!/bin/sh\nexit 3\n", auth=auth)
    status = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed")["status"]
    assert (status["phase"], status["reason"], status["exitCode"]) == (
        "Failed", "NonZeroExitCode", 3)
    assert "code 3" in status["message"]


def test_time_limit(driver: Driver, cluster: Cluster, scheduler: Scheduler, name: str) -> None:
    start(driver, cluster, name, "#!/bin/sh\nsleep 600\n",
          resources={"timeLimit": scheduler.time_limit})
    obj = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed", "Cancelled", timeout=300,
                              max_sleep=5)
    assert (obj["status"]["phase"], obj["status"]["reason"]) == ("Failed", "Timeout")
    assert condition(obj, "Failed")["status"] == "True"


def test_delete_while_running_cancels_and_cleans_up(
    driver: Driver, cluster: Cluster, scheduler: Scheduler, name: str
) -> None:
    start(driver, cluster, name, "#!/bin/sh\nsleep 600\n")
    obj = driver.run_to_phase(NAMESPACE, name, "Running")
    (task,) = obj["status"]["jobIDs"]
    job = scheduler.job(task)
    root = cluster.remote_root(obj)
    assert root.is_dir()
    driver.delete(NAMESPACE, name)
    first = driver.sync(NAMESPACE, name)
    assert first["finalized"] is False
    assert first["status"]["reason"] == "Deleted"
    driver.run_until(NAMESPACE, name, lambda _: False, timeout=120)
    assert (NAMESPACE, name) not in driver.batchjobs
    assert scheduler.state(cluster, job) in scheduler.cancelled
    assert not root.exists()


def test_parallel_syncs_submit_once(
    driver: Driver, cluster: Cluster, scheduler: Scheduler, name: str
) -> None:
    obj = start(driver, cluster, name, "#!/bin/sh\nsleep 2\n")
    answers = post_syncs(driver, driver.request(NAMESPACE, name), 10)
    assert all(a.status_code == 200 for a in answers)
    said = [(a.json()["status"]["reason"], a.json()["status"]["message"]) for a in answers]
    assert {reason for reason, _ in said} <= {"", "Submitting"}, said
    jobs = {tuple(a.json()["status"]["jobIDs"]) for a in answers} - {()}
    assert len(jobs) == 1, said
    (task,) = next(iter(jobs))
    assert scheduler.jobs(cluster, key_of(obj)) == [scheduler.job(task)]
    status = driver.run_to_phase(NAMESPACE, name, "Succeeded", timeout=120)["status"]
    assert status["jobIDs"] == [task]
    assert scheduler.jobs(cluster, key_of(obj)) == [scheduler.job(task)]


@pytest.mark.parametrize("racing", [0, 10], ids=["then-one-by-one", "then-10-at-once"])
def test_retry_after_client_timeout_submits_once(
    driver: Driver, cluster: Cluster, scheduler: Scheduler, name: str, racing: int
) -> None:
    obj = start(driver, cluster, name, "#!/bin/sh\nsleep 2\n")
    body = driver.request(NAMESPACE, name)
    with pytest.raises(requests.Timeout):
        requests.post(f"{driver.url}/sync", json=body, timeout=0.01)
    answers = post_syncs(driver, body, racing)
    assert all(a.status_code == 200 for a in answers)
    status = driver.run_to_phase(NAMESPACE, name, "Succeeded", timeout=120)["status"]
    (task,) = status["jobIDs"]
    assert scheduler.jobs(cluster, key_of(obj)) == [scheduler.job(task)]


RESERVED = [
    pytest.param(backend, value, marks=getattr(pytest.mark, backend), id=f"{backend}-{label}")
    for backend, scheduler in SCHEDULERS.items() for label, value in scheduler.reserved.items()
]


@pytest.mark.parametrize(("cluster", "value"), RESERVED, indirect=["cluster"])
def test_reserved_options_are_invalid(
    driver: Driver, cluster: Cluster, scheduler: Scheduler, name: str, value: Any
) -> None:
    field = f"spec.{cluster.backend}.{scheduler.options}"
    spec: dict[str, Any] = {cluster.backend: {scheduler.options: value}}
    obj = start(driver, cluster, name, "#!/bin/sh\ntrue\n", **spec)
    driver.sync(NAMESPACE, name)
    status = driver.get(NAMESPACE, name)["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "InvalidSpec")
    assert field in status["message"]
    assert not cluster.remote_root(obj).exists()
    assert scheduler.jobs(cluster, key_of(obj)) == []
