"""``spec.dependsOn`` on the real SLURM cluster and HTCondor pool, driven as Metacontroller
drives the hooks (a dependency's change syncs its dependents, here by the test): a chain of
three across both backends passing data through the real S3 store; the Failed and Finished
conditions; a dependency that fails, one deleted while waited for, one created after its
dependent; a cycle; a finished dependency edited (its rerun waited for); and a hundred
BatchJobs waiting on one, whose waiting syncs run nothing on the cluster."""

from __future__ import annotations

import time
from typing import Any

import pytest
import requests

from tests.driver import Driver
from tests.integration.conftest import NAMESPACE, Cluster, ObjectStore, jobs_named
from tests.integration.test_data import bucket, client, drive, put

QUICK = "#!/bin/sh\necho step\n"


def submitted(driver: Driver, name: str) -> bool:
    return bool((driver.get(NAMESPACE, name).get("status") or {}).get("jobIDs"))


def status_of(driver: Driver, name: str) -> dict[str, Any]:
    status: dict[str, Any] = driver.get(NAMESPACE, name).get("status") or {}
    return status


def create(driver: Driver, cluster: Cluster, name: str, script: str = QUICK,
           **spec: Any) -> None:
    driver.apply_secret(cluster.secret(f"{name}-login"))
    driver.create(cluster.batchjob(name, script, f"{name}-login", **spec))


@pytest.mark.slurm
@pytest.mark.htcondor
def test_a_chain_of_three_across_both_backends_passes_its_data_through_s3(
        driver: Driver, slurm: Cluster, htcondor: Cluster, object_store: ObjectStore,
        name: str) -> None:
    s3 = client(object_store)
    data, results = bucket(s3), bucket(s3, "hpcbridge-results")
    put(s3, data, f"{name}/in.txt", b"3\n")
    driver.apply_secret(object_store.secret(f"{name}-s3"))
    storage = {"s3": {"endpoint": object_store.endpoint, "secretRef": {"name": f"{name}-s3"}}}
    # Created last first: the steps may come in any order.
    create(driver, slurm, f"{name}-c", "#!/bin/sh\nexpr \"$(cat b.txt)\" + 1 > c.txt\n",
           dependsOn=[{"name": f"{name}-b"}], storage=storage,
           inputs=[{"s3": {"bucket": results, "key": f"{name}/b/b.txt"}, "path": "b.txt"}],
           outputs=[{"path": "c.txt", "s3": {"bucket": results, "prefix": f"{name}/c/"}}])
    create(driver, htcondor, f"{name}-b", "#!/bin/sh\nexpr \"$(cat a.txt)\" \\* 2 > b.txt\n",
           dependsOn=[{"name": f"{name}-a"}], storage=storage,
           inputs=[{"s3": {"bucket": results, "key": f"{name}/a/a.txt"}, "path": "a.txt"}],
           outputs=[{"path": "b.txt", "s3": {"bucket": results, "prefix": f"{name}/b/"}}])
    driver.sync(NAMESPACE, f"{name}-c")
    driver.sync(NAMESPACE, f"{name}-b")
    for step in ("b", "c"):
        status = status_of(driver, f"{name}-{step}")
        assert (status["phase"], status["reason"]) == ("Pending", "WaitingForDependency")
        assert not driver.pods_of(NAMESPACE, f"{name}-{step}"), "no input staged while waiting"
    create(driver, slurm, f"{name}-a", "#!/bin/sh\nexpr \"$(cat in.txt)\" + 4 > a.txt\n",
           storage=storage,
           inputs=[{"s3": {"bucket": data, "key": f"{name}/in.txt"}, "path": "in.txt"}],
           outputs=[{"path": "a.txt", "s3": {"bucket": results, "prefix": f"{name}/a/"}}])
    for step in ("a", "b", "c"):
        obj = drive(driver, f"{name}-{step}", {}, until={"Succeeded", "Failed"})
        assert obj["status"]["phase"] == "Succeeded", obj["status"]
    assert s3.get_object(results, f"{name}/c/c.txt").read() == b"15\n"  # (3 + 4) * 2 + 1
    (seen,) = status_of(driver, f"{name}-c")["dependencies"]
    assert (seen["name"], seen["phase"], seen["met"]) == (f"{name}-b", "Succeeded", True)
    for step in ("a", "b", "c"):
        driver.finalize(NAMESPACE, f"{name}-{step}")


@pytest.mark.parametrize(("condition", "runs"), [("Succeeded", False), ("Failed", True),
                                                  ("Finished", True)])
def test_a_failed_dependency_by_condition(driver: Driver, cluster: Cluster, name: str,
                                          condition: str, runs: bool) -> None:
    create(driver, cluster, f"{name}-dep", "#!/bin/sh\nexit 3\n")
    create(driver, cluster, name, dependsOn=[{"name": f"{name}-dep", "condition": condition}])
    driver.sync(NAMESPACE, name)
    assert status_of(driver, name)["reason"] == "WaitingForDependency"
    assert driver.run_to_phase(NAMESPACE, f"{name}-dep", "Failed", "Succeeded")[
        "status"]["phase"] == "Failed"
    status = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed")["status"]
    if runs:
        assert (status["phase"], status["reason"]) == ("Succeeded", ""), status
    else:
        assert (status["phase"], status["reason"]) == ("Failed", "DependencyFailed"), status
        assert f"Dependency {name}-dep ended Failed" in status["message"]
        assert "jobIDs" not in status or not status["jobIDs"]
        if cluster.backend == "slurm":
            uid = driver.get(NAMESPACE, name)["metadata"]["uid"]
            assert jobs_named(f"hpcb-{uid}-1") == []
    for each in (name, f"{name}-dep"):
        driver.finalize(NAMESPACE, each)


@pytest.mark.slurm
def test_a_dependency_deleted_while_waited_for_fails_its_dependent(
        driver: Driver, slurm: Cluster, name: str) -> None:
    create(driver, slurm, f"{name}-dep", "#!/bin/sh\nsleep 60\n")
    create(driver, slurm, name, dependsOn=[{"name": f"{name}-dep"}])
    driver.run_to_phase(NAMESPACE, f"{name}-dep", "Pending", "Running")
    driver.sync(NAMESPACE, name)
    assert status_of(driver, name)["reason"] == "WaitingForDependency"
    driver.delete(NAMESPACE, f"{name}-dep")
    driver.finalize(NAMESPACE, f"{name}-dep")
    driver.sync(NAMESPACE, name)
    status = status_of(driver, name)
    assert (status["phase"], status["reason"], status["message"]) == (
        "Failed", "DependencyFailed", f"Dependency {name}-dep was deleted.")
    driver.finalize(NAMESPACE, name)


@pytest.mark.slurm
def test_a_dependency_created_after_its_dependent_and_a_cycle(
        driver: Driver, slurm: Cluster, name: str) -> None:
    create(driver, slurm, name, dependsOn=[{"name": f"{name}-later"}])
    driver.sync(NAMESPACE, name)
    assert "does not exist yet" in status_of(driver, name)["message"]
    create(driver, slurm, f"{name}-later")
    driver.run_to_phase(NAMESPACE, f"{name}-later", "Succeeded")
    assert driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed")[
        "status"]["phase"] == "Succeeded"
    create(driver, slurm, f"{name}-x", dependsOn=[{"name": f"{name}-y"}])
    create(driver, slurm, f"{name}-y", dependsOn=[{"name": f"{name}-x"}])
    for each in (f"{name}-x", f"{name}-y"):
        driver.sync(NAMESPACE, each)
        status = status_of(driver, each)
        assert (status["phase"], status["reason"]) == ("Failed", "InvalidSpec"), status
        assert "cycle" in status["message"]
    for each in (name, f"{name}-later", f"{name}-x", f"{name}-y"):
        driver.finalize(NAMESPACE, each)


@pytest.mark.slurm
def test_an_edited_dependency_is_waited_for_again(driver: Driver, slurm: Cluster,
                                                  name: str) -> None:
    """A dependency that reruns after an edit: a dependent not yet submitted waits for the
    new attempt's result, and records the attempt it was built from."""
    create(driver, slurm, f"{name}-dep")
    driver.run_to_phase(NAMESPACE, f"{name}-dep", "Succeeded")
    driver.update_spec(NAMESPACE, f"{name}-dep",
                       lambda spec: spec.update(script="#!/bin/sh\nsleep 3\necho again\n"))
    create(driver, slurm, name, dependsOn=[{"name": f"{name}-dep"}])
    driver.sync(NAMESPACE, name)
    assert status_of(driver, name)["reason"] == "WaitingForDependency"
    driver.run_until(NAMESPACE, f"{name}-dep",
                     lambda obj: obj["status"].get("attempt") == 2
                     and obj["status"]["phase"] == "Succeeded")
    status = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed")["status"]
    assert status["phase"] == "Succeeded", status
    (seen,) = status["dependencies"]
    assert (seen["phase"], seen["attempt"]) == ("Succeeded", 2)
    for each in (name, f"{name}-dep"):
        driver.finalize(NAMESPACE, each)


def ssh_commands(driver: Driver) -> float:
    """The remote commands the hook server has run so far, from its metrics."""
    text = requests.get(f"{driver.url}/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("hpcbridge_remote_commands_total{"))


@pytest.mark.slurm
def test_a_hundred_batchjobs_waiting_on_one_cost_the_cluster_nothing(
        driver: Driver, slurm: Cluster, name: str) -> None:
    create(driver, slurm, f"{name}-dep", "#!/bin/sh\nsleep 5\n")
    driver.run_to_phase(NAMESPACE, f"{name}-dep", "Pending", "Running")
    waiting = [f"{name}-{i}" for i in range(100)]
    driver.apply_secret(slurm.secret(f"{name}-login"))
    for each in waiting:
        driver.create(slurm.batchjob(each, QUICK, f"{name}-login",
                                     dependsOn=[{"name": f"{name}-dep"}]))
    before = ssh_commands(driver)
    started = time.monotonic()
    answers = [driver.sync(NAMESPACE, each) for each in waiting]
    seconds = time.monotonic() - started
    assert ssh_commands(driver) == before, "a waiting sync ran a command on the cluster"
    assert {status_of(driver, each)["reason"] for each in waiting} == {"WaitingForDependency"}
    assert min(answer["resyncAfterSeconds"] for answer in answers) >= 30
    print(f"100 waiting syncs in {seconds:.2f} s ({seconds * 10:.1f} ms each)")
    driver.run_to_phase(NAMESPACE, f"{name}-dep", "Succeeded")
    for each in waiting:
        driver.sync(NAMESPACE, each)
    assert all(submitted(driver, each) for each in waiting)
    for each in [*waiting, f"{name}-dep"]:
        driver.finalize(NAMESPACE, each)
