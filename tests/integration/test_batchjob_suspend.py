"""spec.suspend on both real test clusters: a BatchJob suspended before submission is held once
submitted and released on resume, also while the shared status still shows the queue from
before the hold; a running job is not stopped."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.driver import Driver
from tests.integration.conftest import (
    NAMESPACE,
    STATUS_TTL,
    Cluster,
    clusters_with_key,
    condition,
    condor,
    hook_server_with,
    jobs_named,
    start,
)

WAITING = {
    # Options that keep a job waiting in the queue without taking the node from other tests.
    "slurm": {"slurm": {"extraArgs": ["--begin=now+3600"]}},
    "htcondor": {"htcondor": {"submitOptions": {"requirements": "(MY.HpcbridgeGate =?= True)"}}},
}


def queue_view(cluster: Cluster, job: str) -> str:
    """The job as the scheduler shows it: state and reason (SLURM), JobStatus and HoldReason."""
    if cluster.backend == "slurm":
        return subprocess.run(["squeue", "-h", "-j", job, "-o", "%T %r"],
                              capture_output=True, text=True, check=True).stdout.strip()
    return condor(cluster, "condor_q", job, "-af", "JobStatus", "HoldReason").strip()


def let_run(cluster: Cluster, job: str) -> None:
    if cluster.backend == "slurm":
        subprocess.run(["scontrol", "update", f"jobid={job}", "StartTime=now"], check=True)
    else:
        condor(cluster, "condor_qedit", job, "HpcbridgeGate", "True")


def suspend(driver: Driver, name: str, value: bool) -> None:
    driver.update_spec(NAMESPACE, name, lambda spec: spec.update(suspend=value))


def assert_held(cluster: Cluster, job: str) -> None:
    held = queue_view(cluster, job)
    assert ("JobHeldUser" in held if cluster.backend == "slurm"
            else held.startswith("5 via condor_hold")), held


def assert_released_and_runs(driver: Driver, cluster: Cluster, name: str, job: str,
                             status: dict[str, Any]) -> None:
    """The sync that answered ``status`` released the job: it is not held and runs to its end
    once the scheduler lets it start."""
    assert status["reason"] != "Suspended" and "released" in status["message"], status
    released = queue_view(cluster, job)
    assert "JobHeldUser" not in released and not released.startswith("5"), released
    let_run(cluster, job)
    status = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed")["status"]
    assert (status["phase"], status["attempt"]) == ("Succeeded", 1), status
    assert condition(driver.get(NAMESPACE, name), "Suspended")["status"] == "False"


def test_suspend_before_submission_then_hold_and_release(
    driver: Driver, cluster: Cluster, name: str
) -> None:
    start(driver, cluster, name, "#!/bin/sh\necho resumed\n", suspend=True,
          **WAITING[cluster.backend])
    status = driver.sync(NAMESPACE, name)["status"]
    assert (status["phase"], status["reason"], status["jobIDs"]) == ("Pending", "Suspended", [])
    assert condition(driver.get(NAMESPACE, name), "Suspended")["status"] == "True"
    key = f"{driver.get(NAMESPACE, name)['metadata']['uid']}-1"
    assert not (jobs_named(f"hpcb-{key}") if cluster.backend == "slurm"
                else clusters_with_key(cluster, key))

    suspend(driver, name, False)
    status = driver.sync(NAMESPACE, name)["status"]
    job = status["jobIDs"][0].split(".")[0].split("_")[0]
    assert status["reason"] != "Suspended" and status["attempt"] == 1, status
    suspend(driver, name, True)
    time.sleep(STATUS_TTL)
    status = driver.sync(NAMESPACE, name)["status"]
    assert (status["phase"], status["reason"]) == ("Pending", "Suspended"), status
    assert_held(cluster, job)
    time.sleep(STATUS_TTL)
    status = driver.sync(NAMESPACE, name)["status"]
    assert status["reason"] == "Suspended", status

    suspend(driver, name, False)
    time.sleep(STATUS_TTL)
    assert_released_and_runs(driver, cluster, name, job, driver.sync(NAMESPACE, name)["status"])


STALE_TTL = 20.0
"""A status cache lifetime that lets the queue a sync sees predate the hold a sync before it
sent, as on a busy hook server."""


@pytest.fixture(scope="module")
def stale_status_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with hook_server_with(tmp_path_factory, status_ttl=STALE_TTL) as url:
        yield url


def test_suspend_released_before_the_shared_status_shows_the_hold(
    stale_status_server: str, cluster: Cluster, name: str
) -> None:
    driver = Driver(stale_status_server)
    start(driver, cluster, name, "#!/bin/sh\necho resumed\n", **WAITING[cluster.backend])
    job = driver.sync(NAMESPACE, name)["status"]["jobIDs"][0].split(".")[0].split("_")[0]
    # The shared status sees the job waiting, not held; every sync below is answered from it.
    seen = time.monotonic()
    assert driver.sync(NAMESPACE, name)["status"]["phase"] == "Pending"
    suspend(driver, name, True)
    status = driver.sync(NAMESPACE, name)["status"]
    assert (status["phase"], status["reason"]) == ("Pending", "Suspended"), status
    assert_held(cluster, job)
    suspend(driver, name, False)
    status = driver.sync(NAMESPACE, name)["status"]
    assert time.monotonic() - seen < STALE_TTL * 0.6, "the shared status may have been refreshed"
    assert_released_and_runs(driver, cluster, name, job, status)


GATED = """#!/bin/sh
# Runs until the test creates the file 'finish' in the attempt directory (5 minutes at most).
i=0
while [ ! -e finish ] && [ "$i" -lt 300 ]; do sleep 1; i=$((i + 1)); done
echo finished
"""


def test_suspend_does_not_stop_a_running_job(driver: Driver, cluster: Cluster,
                                             name: str) -> None:
    batchjob = start(driver, cluster, name, GATED)
    driver.run_to_phase(NAMESPACE, name, "Running")
    driver.update_spec(NAMESPACE, name, lambda spec: spec.update(suspend=True))
    status = driver.sync(NAMESPACE, name)["status"]
    assert status["phase"] == "Running" and "cannot be suspended" in status["message"], status
    (cluster.remote_root(batchjob) / "attempt-1" / "finish").touch()
    status = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed")["status"]
    assert (status["phase"], status["attempt"]) == ("Succeeded", 1), status
