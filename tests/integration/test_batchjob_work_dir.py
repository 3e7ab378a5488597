"""A work directory outside the home on both real test clusters, used as named."""

from __future__ import annotations

from tests.driver import Driver
from tests.integration.conftest import (
    NAMESPACE,
    Cluster,
    start,
)


def test_a_work_dir_with_percent_signs_is_used_as_named(
    driver: Driver, cluster: Cluster, name: str
) -> None:
    # sbatch expands "%" in --output/--error, the directory's included: ~/out-%j became
    # ~/out-281, which did not exist, and the job died.
    work_dir = f"{cluster.scratch}/out-%j-100%"
    batchjob = start(driver, cluster, name, "#!/bin/sh\necho in-place\n")
    batchjob["spec"]["cluster"]["workDir"] = work_dir
    status = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed")["status"]
    assert status["phase"] == "Succeeded", status
    attempt = f"{work_dir}/{NAMESPACE}/{name}/{batchjob['metadata']['uid']}/attempt-1"
    (pod,) = driver.pods_of(NAMESPACE, name)
    assert "in-place\n" in driver.run_pod(pod).stdout
    assert [p.name for p in cluster.on_host(attempt).glob("*.out")], "no output in the attempt"
    driver.finalize(NAMESPACE, name)
    assert not cluster.on_host(attempt).parent.exists()
