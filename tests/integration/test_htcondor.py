"""BatchJobs on the real HTCondor test pool, driven through the hooks as Metacontroller would."""

from __future__ import annotations

import concurrent.futures
import shlex
from typing import Any

import pytest
import requests

from tests.driver import Driver
from tests.integration.conftest import NAMESPACE, Cluster, condition, start

pytestmark = pytest.mark.htcondor


def condor(pool: Cluster, *argv: str) -> str:
    return pool.as_user(shlex.join(argv))


def clusters_with_key(pool: Cluster, key: str) -> list[str]:
    """Every cluster the pool knows by that HpcbridgeKey, in the queue or in the history."""
    constraint = f'HpcbridgeKey == "{key}"'
    queued = condor(pool, "condor_q", "-constraint", constraint, "-af", "ClusterId").split()
    done = condor(pool, "condor_history", "-constraint", constraint, "-af", "ClusterId").split()
    return sorted(set(queued + done))


def test_succeeds_and_log_pod_prints_output(driver: Driver, htcondor: Cluster, name: str) -> None:
    start(driver, htcondor, name, "#!/bin/sh\necho hello from condor\necho oops >&2\n")
    obj = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed")
    status = obj["status"]
    assert (status["phase"], status["exitCode"], status["backend"]) == ("Succeeded", 0,
                                                                       "htcondor")
    assert condition(obj, "Complete")["status"] == "True"
    (pod,) = driver.pods_of(NAMESPACE, name)
    logs = driver.run_pod(pod)
    assert logs.returncode == 0, logs.stderr
    task = status["jobIDs"][0]
    assert logs.stdout == (f"==> task {task} stdout <==\nhello from condor\n"
                           f"==> task {task} stderr <==\noops\n")


@pytest.mark.parametrize("auth", ["key", "password"])
def test_exit_code_fails_the_job(driver: Driver, htcondor: Cluster, name: str,
                                 auth: str) -> None:
    start(driver, htcondor, name, "#!/bin/sh\nexit 3\n", auth=auth)
    status = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed")["status"]
    assert (status["phase"], status["reason"], status["exitCode"]) == (
        "Failed", "NonZeroExitCode", 3)


def test_queue_with_one_proc_removed(driver: Driver, htcondor: Cluster, name: str) -> None:
    start(driver, htcondor, name, "#!/bin/sh\nsleep 15\necho done\n", htcondor={"queue": 4})
    obj = driver.run_until(NAMESPACE, name, lambda o: len(o["status"]["jobIDs"]) == 4)
    condor(htcondor, "condor_rm", obj["status"]["jobIDs"][2])
    status = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed", "Cancelled",
                                 timeout=120)["status"]
    assert (status["phase"], status["reason"]) == ("Cancelled", "CancelledOnCluster")
    assert (status["succeeded"], status["cancelled"], status["failed"]) == (3, 1, 0)
    assert "exitCode" not in status


def test_held_then_released(driver: Driver, htcondor: Cluster, name: str) -> None:
    start(driver, htcondor, name, "#!/bin/sh\nsleep 5\necho finished\n")
    obj = driver.run_until(NAMESPACE, name, lambda o: bool(o["status"]["jobIDs"]))
    job = obj["status"]["jobIDs"][0].split(".")[0]
    condor(htcondor, "condor_hold", job)
    status = driver.run_until(NAMESPACE, name,
                              lambda o: o["status"]["reason"] == "Held")["status"]
    assert status["phase"] == "Pending"
    assert "condor_hold" in status["message"]
    condor(htcondor, "condor_release", job)
    assert driver.run_to_phase(NAMESPACE, name, "Succeeded", timeout=120)["status"][
        "exitCode"] == 0


def test_time_limit_removes_the_job(driver: Driver, htcondor: Cluster, name: str) -> None:
    start(driver, htcondor, name, "#!/bin/sh\nsleep 300\n", resources={"timeLimit": "15s"})
    status = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed", "Cancelled",
                                 timeout=180)["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "Timeout")


def test_delete_while_running_removes_and_confirms(
    driver: Driver, htcondor: Cluster, name: str
) -> None:
    start(driver, htcondor, name, "#!/bin/sh\nsleep 300\n")
    obj = driver.run_to_phase(NAMESPACE, name, "Running")
    job = obj["status"]["jobIDs"][0].split(".")[0]
    root = htcondor.remote_root(obj)
    assert root.is_dir()
    driver.delete(NAMESPACE, name)
    assert driver.sync(NAMESPACE, name)["finalized"] is False
    driver.run_until(NAMESPACE, name, lambda _: False, timeout=120)
    assert (NAMESPACE, name) not in driver.batchjobs
    assert condor(htcondor, "condor_q", job, "-af", "JobStatus").strip() in ("", "3")
    assert not root.exists()


def test_parallel_and_retried_syncs_submit_once(
    driver: Driver, htcondor: Cluster, name: str
) -> None:
    obj = start(driver, htcondor, name, "#!/bin/sh\nsleep 2\n")
    body = driver.request(NAMESPACE, name)
    with pytest.raises(requests.Timeout):
        requests.post(f"{driver.url}/sync", json=body, timeout=0.01)
    with concurrent.futures.ThreadPoolExecutor(10) as pool:
        answers = list(pool.map(
            lambda _: requests.post(f"{driver.url}/sync", json=body, timeout=30), range(10)))
    assert all(a.status_code == 200 for a in answers)
    status = driver.run_to_phase(NAMESPACE, name, "Succeeded", timeout=120)["status"]
    key = f"{obj['metadata']['uid']}-1"
    assert clusters_with_key(htcondor, key) == [status["jobIDs"][0].split(".")[0]]


@pytest.mark.parametrize("options", [
    pytest.param({"queue": "100"}, id="queue"),
    pytest.param({"executable": "/bin/sh"}, id="executable"),
    pytest.param({"request_disk": "1\nqueue 5"}, id="newline-in-value"),
    pytest.param({"+Project\nqueue": '"x"'}, id="newline-in-key"),
    pytest.param({"+HpcbridgeKey": '"other"'}, id="key-attribute"),
    pytest.param({"Universe": "local"}, id="universe-any-case"),
])
def test_reserved_or_smuggling_submit_options_are_invalid(
    driver: Driver, htcondor: Cluster, name: str, options: dict[str, str]
) -> None:
    obj = start(driver, htcondor, name, "#!/bin/sh\ntrue\n",
                htcondor={"submitOptions": options})
    driver.sync(NAMESPACE, name)
    status = driver.get(NAMESPACE, name)["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "InvalidSpec")
    assert "spec.htcondor.submitOptions" in status["message"]
    assert not htcondor.remote_root(obj).exists()
    assert clusters_with_key(htcondor, f"{obj['metadata']['uid']}-1") == []


def test_submit_options_reach_the_job_ad(driver: Driver, htcondor: Cluster, name: str) -> None:
    options: dict[str, Any] = {"+ProjectName": '"demo"', "request_disk": "1024"}
    obj = start(driver, htcondor, name, "#!/bin/sh\ntrue\n",
                htcondor={"submitOptions": options})
    status = driver.run_to_phase(NAMESPACE, name, "Succeeded", timeout=120)["status"]
    job = status["jobIDs"][0].split(".")[0]
    ad = condor(htcondor, "condor_history", job, "-af", "ProjectName", "JobBatchName")
    assert ad.split() == ["demo", f"{NAMESPACE}/{obj['metadata']['name']}"]
