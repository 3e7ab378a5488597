"""spec.activeDeadlineSeconds on both real test clusters: the job past it is cancelled on the
scheduler and the BatchJob fails with DeadlineExceeded."""

from __future__ import annotations

import subprocess
import time

from tests.driver import Driver
from tests.integration.conftest import (
    NAMESPACE,
    Cluster,
    clusters_with_key,
    condition,
    condor,
    jobs_named,
    start,
)


def test_active_deadline_cancels_the_job(driver: Driver, cluster: Cluster, name: str) -> None:
    start(driver, cluster, name, "#!/bin/sh\nsleep 600\n", activeDeadlineSeconds=3)
    first = driver.sync(NAMESPACE, name)["status"]
    assert first["jobIDs"], first
    status = driver.run_to_phase(NAMESPACE, name, "Failed", "Succeeded", "Cancelled")["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "DeadlineExceeded"), status
    assert condition(driver.get(NAMESPACE, name), "Failed")["status"] == "True"
    assert "activeDeadlineSeconds (3 s)" in status["message"]
    key = f"{driver.get(NAMESPACE, name)['metadata']['uid']}-1"

    def gone() -> bool:
        if cluster.backend == "slurm":
            (job,) = jobs_named(f"hpcb-{key}")
            state = subprocess.run(["sacct", "-n", "-X", "-P", "-j", job, "-o", "State"],
                                   capture_output=True, text=True, check=True).stdout
            return state.startswith("CANCELLED")
        (job,) = clusters_with_key(cluster, key)
        return condor(cluster, "condor_q", job, "-af", "JobStatus").strip() in ("", "3")

    deadline = time.monotonic() + 60
    while not gone():
        assert time.monotonic() < deadline, "the job is still on the scheduler"
        time.sleep(1)
