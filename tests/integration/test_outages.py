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


OUTAGES = [
    pytest.param("slurm", "sshd", marks=pytest.mark.slurm, id="slurm-sshd"),
    pytest.param("slurm", "slurmctld", marks=pytest.mark.slurm, id="slurm-slurmctld"),
    pytest.param("htcondor", "sshd", marks=pytest.mark.htcondor, id="htcondor-sshd"),
    pytest.param("htcondor", "condor_master", marks=pytest.mark.htcondor, id="htcondor-schedd"),
]


@pytest.mark.parametrize(("backend", "daemon"), OUTAGES)
def test_outage_keeps_phase_then_recovers(
    driver: Driver, name: str, backend: str, daemon: str, request: pytest.FixtureRequest
) -> None:
    cluster: Cluster = request.getfixturevalue(backend)
    start(driver, cluster, name, "#!/bin/sh\nsleep 15\necho done\n")
    driver.run_to_phase(NAMESPACE, name, "Running")
    with stopped(cluster, daemon):
        answer = driver.sync(NAMESPACE, name)  # the driver gives up after the 30 s hook timeout
        obj = driver.get(NAMESPACE, name)
        assert obj["status"]["phase"] == "Running"
        assert obj["status"]["reason"] == "ClusterUnreachable"
        assert condition(obj, "ClusterReachable")["status"] == "False"
        assert answer["resyncAfterSeconds"] > 0
    obj = driver.run_to_phase(NAMESPACE, name, "Succeeded", timeout=120)
    assert condition(obj, "ClusterReachable")["status"] == "True"
    assert obj["status"]["reason"] == ""
