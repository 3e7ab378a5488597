"""What a BatchJob used, on the real SLURM cluster and HTCondor pool: status.usage, read once
from sacct or condor_history when the attempt ends, and summed over an array's tasks."""

from __future__ import annotations

import subprocess

from tests.driver import Driver
from tests.integration.conftest import NAMESPACE, Cluster, condor, start

MIB = 1 << 20
HOLD_200_MIB_FOR_40_S = (
    "#!/bin/sh\n"
    "exec python3 -c 'import time; b = bytearray(200 << 20); "
    'b[::4096] = b"\\x01" * (len(b) // 4096); time.sleep(40)\'\n'
)


def node_of(cluster: Cluster) -> str:
    """The test node's name as the scheduler records where a job ran."""
    if cluster.backend == "slurm":
        return subprocess.run(["sinfo", "-h", "-p", "debug", "-o", "%N"], capture_output=True,
                              text=True, check=True).stdout.strip()
    return condor(cluster, "condor_status", "-af", "Name").split()[0].rpartition("@")[2]


def test_usage_of_a_job_holding_200_mib_for_40_s(
    driver: Driver, cluster: Cluster, name: str
) -> None:
    start(driver, cluster, name, HOLD_200_MIB_FOR_40_S, resources={"memory": "1Gi"})
    status = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed", timeout=240)["status"]
    assert status["phase"] == "Succeeded", status
    usage = status["usage"]
    assert abs(usage["maxRSSBytes"] - 200 * MIB) <= 0.2 * 200 * MIB, usage
    assert usage["elapsedSeconds"] >= 40, usage
    assert usage["nodes"] == [node_of(cluster)]
    assert usage["queueSeconds"] >= 0 and usage["cpuSeconds"] >= 0
    assert 0 <= usage["cpuEfficiency"] <= 1
    assert abs(usage["memoryEfficiency"] - 0.2) <= 0.05, usage
    # Carried from the previous status: a sync of the ended BatchJob renders it again as it was.
    driver.sync(NAMESPACE, name)
    assert driver.get(NAMESPACE, name)["status"]["usage"] == usage


def test_an_arrays_usage_is_summed_over_its_tasks(
    driver: Driver, cluster: Cluster, name: str
) -> None:
    several = {"slurm": {"array": "0-2"}, "htcondor": {"queue": 3}}[cluster.backend]
    start(driver, cluster, name, "#!/bin/sh\nsleep 3\n", **{cluster.backend: several})
    status = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed", timeout=180)["status"]
    assert (status["phase"], status["succeeded"]) == ("Succeeded", 3), status
    assert "usage" in status, status
    usage = status["usage"]
    assert usage["elapsedSeconds"] >= 3, usage
    assert usage["nodes"] == [node_of(cluster)]
    assert usage["queueSeconds"] >= 0 and usage["cpuSeconds"] >= 0
    # Each task ran shorter than one of SLURM's 30 s samples: no resident set was recorded.
    assert cluster.backend != "slurm" or "maxRSSBytes" not in usage
