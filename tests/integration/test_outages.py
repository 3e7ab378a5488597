"""Cluster outages: the hooks keep answering 200 with the last known phase, then recover.

These tests stop daemons of the shared test clusters, so they run alone, after the others.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.driver import Driver
from tests.integration.conftest import NAMESPACE, STATUS_TTL, Cluster, condition, start

pytestmark = pytest.mark.outage


@contextmanager
def stopped(cluster: Cluster, daemon: str) -> Iterator[None]:
    kind = "slurm" if cluster.backend == "slurm" else "condor"
    cluster.script(f"{kind}-down.sh", daemon)
    time.sleep(STATUS_TTL * 1.5)  # past the shared status the last sync may have left
    try:
        yield
    finally:
        cluster.script(f"{kind}-up.sh")


@pytest.mark.slurm
@pytest.mark.parametrize("daemon", ["sshd", "slurmctld"])
def test_slurm_outage_keeps_phase_then_recovers(
    driver: Driver, slurm: Cluster, name: str, daemon: str
) -> None:
    start(driver, slurm, name, "#!/bin/sh\nsleep 15\necho done\n")
    driver.run_to_phase(NAMESPACE, name, "Running")
    with stopped(slurm, daemon):
        answer = driver.sync(NAMESPACE, name)  # the driver gives up after the 30 s hook timeout
        obj = driver.get(NAMESPACE, name)
        assert obj["status"]["phase"] == "Running"
        assert obj["status"]["reason"] == "ClusterUnreachable"
        assert condition(obj, "ClusterReachable")["status"] == "False"
        assert answer["resyncAfterSeconds"] > 0
    obj = driver.run_to_phase(NAMESPACE, name, "Succeeded", timeout=120)
    assert condition(obj, "ClusterReachable")["status"] == "True"
    assert obj["status"]["reason"] == ""


@pytest.mark.htcondor
@pytest.mark.parametrize("daemon", ["sshd", "condor_master"])
def test_htcondor_outage_keeps_phase_then_recovers(
    driver: Driver, htcondor: Cluster, name: str, daemon: str
) -> None:
    start(driver, htcondor, name, "#!/bin/sh\nsleep 15\necho done\n")
    driver.run_to_phase(NAMESPACE, name, "Running")
    with stopped(htcondor, daemon):
        driver.sync(NAMESPACE, name)
        obj = driver.get(NAMESPACE, name)
        assert obj["status"]["phase"] == "Running"
        assert obj["status"]["reason"] == "ClusterUnreachable"
        assert condition(obj, "ClusterReachable")["status"] == "False"
    obj = driver.run_to_phase(NAMESPACE, name, "Succeeded", timeout=120)
    assert condition(obj, "ClusterReachable")["status"] == "True"
