"""A BatchJob reaching the login node through the SSH bastion on both real test clusters: the
job and its log Pod take the route, and a stopped bastion is unreachable, named, then
recovers."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.driver import Driver
from tests.integration.conftest import (
    NAMESPACE,
    STATUS_TTL,
    Bastion,
    Cluster,
    condition,
)


def bastion_batchjob(driver: Driver, cluster: Cluster, bastion: Bastion, name: str,
                     script: str) -> dict[str, Any]:
    """A BatchJob reaching ``cluster`` by a name only the bastion resolves, through it; the
    login node's known_hosts names it so, hashed."""
    route = bastion.route(cluster.backend)
    driver.apply_secret(cluster.secret(f"{name}-login", known_hosts=route.known_hosts_hashed))
    driver.apply_secret(bastion.secret(f"{name}-bastion"))
    batchjob = cluster.batchjob(name, script, f"{name}-login")
    batchjob["spec"]["cluster"].update(
        host=route.name, port=route.port,
        jump=[{"host": bastion.host, "port": bastion.port,
               "secretRef": {"name": f"{name}-bastion"}}])
    return driver.create(batchjob)


def test_through_the_bastion(driver: Driver, cluster: Cluster, bastion: Bastion,
                             name: str) -> None:
    route = bastion.route(cluster.backend)
    mark = bastion.log_size()
    bastion_batchjob(driver, cluster, bastion, name, "#!/bin/sh\necho \"via $(hostname)\"\n")
    status = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed")["status"]
    assert status["phase"] == "Succeeded", status
    assert status["cluster"]["host"] == route.name
    assert status["cluster"]["jump"][0]["secretRef"]["name"] == f"{name}-bastion"
    assert (route.name, route.port) in bastion.forwarded(since=mark)
    (pod,) = driver.pods_of(NAMESPACE, name)
    args = pod["spec"]["containers"][0]["args"]
    assert any(arg.startswith(f"--jump={bastion.host},{bastion.port},") for arg in args), args
    mark = bastion.log_size()
    logs = driver.run_pod(pod)
    assert "via " in logs.stdout, logs.stderr
    assert (route.name, route.port) in bastion.forwarded(since=mark)
    driver.finalize(NAMESPACE, name)


@pytest.mark.outage
def test_a_stopped_bastion_is_unreachable_naming_it_then_recovers(
    driver: Driver, slurm: Cluster, bastion: Bastion, name: str
) -> None:
    bastion_batchjob(driver, slurm, bastion, name, "#!/bin/sh\nsleep 20\necho survived\n")
    driver.run_to_phase(NAMESPACE, name, "Running")
    bastion.stop()
    try:
        time.sleep(STATUS_TTL)
        obj = driver.run_until(
            NAMESPACE, name,
            lambda o: condition(o, "ClusterReachable")["status"] == "False", timeout=60)
        reach = condition(obj, "ClusterReachable")
        assert f"jump host {bastion.host}" in reach["message"], reach
        assert obj["status"]["phase"] == "Running"
    finally:
        bastion.start()
    status = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed", timeout=120)["status"]
    assert status["phase"] == "Succeeded", status
    assert condition(driver.get(NAMESPACE, name), "ClusterReachable")["status"] == "True"
