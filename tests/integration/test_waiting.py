"""Why a BatchJob waits, on the real SLURM cluster and HTCondor pool: the typed reason, the
scheduler's own word (schedulerReason) and the Scheduled condition.

Each test makes what it waits on itself (a held job, a partition of its own, a blocker in a QOS
of one job per user), so that the tests run side by side with the rest of the suite.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.driver import Driver
from tests.integration.conftest import (
    NAMESPACE,
    STATUS_TTL,
    Cluster,
    condition,
    condor,
    read_env,
    start,
)
from tests.integration.test_slurm import wait_for

SLEEP = "#!/bin/sh\nsleep 300\n"


def waits_with(driver: Driver, name: str, reason: str, *words: str) -> dict[str, Any]:
    """Sync until the BatchJob waits with ``reason`` and one of the scheduler's ``words``."""
    driver.run_until(
        NAMESPACE, name,
        lambda obj: (obj.get("status") or {}).get("schedulerReason") in words
        and obj["status"]["reason"] == reason, timeout=90)
    obj = driver.get(NAMESPACE, name)
    status = obj["status"]
    assert status["phase"] == "Pending"
    scheduled = condition(obj, "Scheduled")
    assert (scheduled["status"], scheduled["reason"]) == ("False", reason or "Queued")
    assert scheduled["message"] == status["message"]
    assert "usage" not in status
    return status


def node() -> str:
    return subprocess.run(["sinfo", "-h", "-p", "debug", "-o", "%N"], capture_output=True,
                          text=True, check=True).stdout.strip()


@contextmanager
def partition(**limits: str) -> Iterator[str]:
    """A partition of the test node, made for one test and deleted after it (with its jobs)."""
    name = f"hpcb{uuid.uuid4().hex[:8]}"
    settings = [f"{key}={value}" for key, value in limits.items()]
    subprocess.run(["scontrol", "create", f"PartitionName={name}", f"Nodes={node()}",
                    "State=UP", *settings], check=True)
    try:
        yield name
    finally:
        subprocess.run(["scancel", f"--partition={name}"], check=False)
        subprocess.run(["scontrol", "delete", f"PartitionName={name}"], check=False)


def sbatch(slurm: Cluster, *options: str) -> str:
    """A job of the test user's own, outside hpcbridge."""
    return slurm.as_user(f"cd /tmp && sbatch --parsable --output=/dev/null {' '.join(options)} "
                         "--wrap='sleep 300'").strip()


def running(job: str) -> bool:
    state = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True,
                           text=True, check=False).stdout.strip()
    return state == "RUNNING"


@pytest.mark.slurm
def test_slurm_waiting_for_dependency(driver: Driver, slurm: Cluster, name: str) -> None:
    held = sbatch(slurm, "--hold")
    try:
        start(driver, slurm, name, SLEEP,
              slurm={"extraArgs": [f"--dependency=afterok:{held}"]})
        status = waits_with(driver, name, "WaitingForDependency", "Dependency")
        assert status["message"] == ("SLURM starts it once the jobs it depends on have ended as "
                                     "it asks (Dependency).")
        driver.finalize(NAMESPACE, name)
    finally:
        subprocess.run(["scancel", held], check=False)


@pytest.mark.slurm
def test_slurm_waiting_for_start_time(driver: Driver, slurm: Cluster, name: str) -> None:
    start(driver, slurm, name, SLEEP, slurm={"extraArgs": ["--begin=now+3600"]})
    waits_with(driver, name, "WaitingForStartTime", "BeginTime")
    driver.finalize(NAMESPACE, name)


@pytest.mark.slurm
def test_slurm_time_limit_above_the_partitions_is_unschedulable(
    driver: Driver, slurm: Cluster, name: str
) -> None:
    with partition(MaxTime="1") as short:
        start(driver, slurm, name, SLEEP, resources={"timeLimit": "10m"},
              slurm={"partition": short})
        status = waits_with(driver, name, "Unschedulable", "PartitionTimeLimit")
        assert status["message"].startswith(
            f"SLURM will not start it as submitted: its time limit is longer than partition "
            f"{short} allows;")
        # Not an end: the site may lift the limit, and the job then starts.
        subprocess.run(["scontrol", "update", f"PartitionName={short}", "MaxTime=INFINITE"],
                       check=True)
        obj = driver.run_to_phase(NAMESPACE, name, "Running")
        assert condition(obj, "Scheduled")["status"] == "True"
        assert "schedulerReason" not in obj["status"]
        driver.finalize(NAMESPACE, name)


@pytest.mark.slurm
def test_slurm_queued_behind_a_job_holding_the_cpus(
    driver: Driver, slurm: Cluster, name: str
) -> None:
    """Ordinary queueing: the partition's one CPU is taken, SLURM waits for Resources (or,
    on a busy test machine where its scheduling pass has not looked at the job again yet,
    still says Priority: ordinary queueing too, with its own sentence)."""
    with partition(MaxCPUsPerNode="1") as one_cpu:
        blocker = sbatch(slurm, f"--partition={one_cpu}")
        wait_for(lambda: running(blocker), timeout=120)
        start(driver, slurm, name, SLEEP, slurm={"partition": one_cpu})
        status = waits_with(driver, name, "", "Resources", "Priority")
        assert status["message"] == {
            "Resources": "SLURM queues it until the resources it asks for are free (Resources).",
            "Priority": "SLURM queues it behind jobs of higher priority (Priority).",
        }[status["schedulerReason"]]
        driver.finalize(NAMESPACE, name)


@pytest.mark.slurm
def test_slurm_qos_limit_reached(driver: Driver, slurm: Cluster, name: str) -> None:
    qos = read_env(slurm.state / "env")["HPCBRIDGE_SLURM_ONE_JOB_QOS"]
    blocker = sbatch(slurm, f"--qos={qos}")
    try:
        wait_for(lambda: running(blocker), timeout=120)
        start(driver, slurm, name, SLEEP, slurm={"qos": qos})
        status = waits_with(driver, name, "LimitReached", "QOSMaxJobsPerUserLimit")
        assert "spec.slurm.qos" in status["message"]
        driver.finalize(NAMESPACE, name)
    finally:
        subprocess.run(["scancel", blocker], check=False)


@pytest.mark.htcondor
def test_htcondor_asking_more_than_any_slot_has_is_unschedulable(
    driver: Driver, htcondor: Cluster, name: str
) -> None:
    start(driver, htcondor, name, SLEEP, resources={"cpus": 512})
    status = waits_with(driver, name, "Unschedulable", "no match found")
    assert status["message"].startswith(
        "HTCondor will not start it as submitted: no machine of the pool meets its "
        "requirement TARGET.Cpus >= RequestCpus (RequestCpus = 512),"), status["message"]
    driver.finalize(NAMESPACE, name)


@pytest.mark.htcondor
def test_htcondor_requirements_no_machine_meets_are_unschedulable(
    driver: Driver, htcondor: Cluster, name: str
) -> None:
    """Requests that fit, a requirement of the user's that no machine meets: HTCondor's
    analysis of the whole Requirements names the clause."""
    start(driver, htcondor, name, SLEEP,
          htcondor={"submitOptions": {"requirements": "(Memory > 100000000)"}})
    status = waits_with(driver, name, "Unschedulable", "no match found")
    assert status["message"].startswith(
        "HTCondor will not start it as submitted: no machine of the pool meets its "
        "requirement Memory > 100000000,"), status["message"]
    driver.finalize(NAMESPACE, name)


@pytest.mark.htcondor
def test_htcondor_idle_behind_others_is_ordinary_queueing(
    driver: Driver, htcondor: Cluster, name: str
) -> None:
    """A job asking for every CPU of the pool, and requiring them, while one runs: the
    partitionable slot could run it once free (its totals meet the Requirements), so it waits
    as ordinary queueing, never Unschedulable."""
    cpus = int(condor(htcondor, "condor_status", "-af", "TotalSlotCpus").split()[0])
    blocker = htcondor.as_user(
        "cd /tmp && printf 'executable = /bin/sleep\\narguments = 300\\nqueue\\n' | "
        "condor_submit -terse").split(".")[0]
    try:
        wait_for(lambda: condor(htcondor, "condor_q", blocker, "-af", "JobStatus").strip() == "2",
                 timeout=120)
        start(driver, htcondor, name, SLEEP, resources={"cpus": cpus},
              htcondor={"submitOptions": {"requirements": f"(TARGET.Cpus >= {cpus})"}})
        status = waits_with(driver, name, "", "no match found")
        assert status["message"] == (
            "HTCondor queues it until a machine that matches is free (no match found).")
        # It stays so over the negotiation cycles that follow (the pool negotiates every
        # second or so), each judged again.
        for _ in range(3):
            time.sleep(2 * STATUS_TTL)
            driver.sync(NAMESPACE, name)
            assert driver.get(NAMESPACE, name)["status"]["reason"] == ""
        driver.finalize(NAMESPACE, name)
    finally:
        condor(htcondor, "condor_rm", blocker)
