"""BatchJobs on the real HTCondor test pool, driven through the hooks as Metacontroller would.

The scenarios SLURM shares are in test_batchjobs.py; these are the ones written for HTCondor.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.driver import Driver
from tests.integration.conftest import NAMESPACE, Cluster, condor, start

pytestmark = pytest.mark.htcondor


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


def test_submit_options_reach_the_job_ad(driver: Driver, htcondor: Cluster, name: str) -> None:
    options: dict[str, Any] = {"+ProjectName": '"demo"', "request_disk": "1024"}
    obj = start(driver, htcondor, name, "#!/bin/sh\ntrue\n",
                htcondor={"submitOptions": options})
    status = driver.run_to_phase(NAMESPACE, name, "Succeeded", timeout=120)["status"]
    job = status["jobIDs"][0].split(".")[0]
    ad = condor(htcondor, "condor_history", job, "-af", "ProjectName", "JobBatchName")
    assert ad.split() == ["demo", f"{NAMESPACE}/{obj['metadata']['name']}"]
