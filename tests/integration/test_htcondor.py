"""BatchJobs on the real HTCondor test pool, driven through the hooks as Metacontroller would.

The scenarios SLURM shares are in test_batchjobs.py; these are the ones written for HTCondor.
Also here: what the submit options a security review found would have done on the pool, shown
with condor_submit itself (the description the hooks write, had they let the option through),
next to the hooks now refusing each of them as InvalidSpec.
"""

from __future__ import annotations

import shlex
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hooks.core.values.job import ClusterRef, JobRequest, Resources, Spec
from hooks.schedulers.htcondor.description import submit_description, time_limit_expression
from hooks.schedulers.htcondor.rules import HTCondorOptions
from tests.driver import Driver
from tests.integration.conftest import (
    NAMESPACE,
    Cluster,
    clusters_with_key,
    condition,
    condor,
    start,
)

pytestmark = pytest.mark.htcondor


def test_queue_with_one_proc_removed(driver: Driver, htcondor: Cluster, name: str) -> None:
    start(driver, htcondor, name, "#!/bin/sh\nsleep 15\necho done\n", htcondor={"queue": 4})
    obj = driver.run_until(NAMESPACE, name, lambda o: len(o["status"]["jobIDs"]) == 4)
    condor(htcondor, "condor_rm", obj["status"]["jobIDs"][2])
    obj = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed", "Cancelled", timeout=120)
    status = obj["status"]
    assert (status["phase"], status["reason"]) == ("Cancelled", "CancelledOnCluster")
    assert condition(obj, "Failed")["status"] == "True"
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


# --- Submit options hpcbridge owns: what they would have done, and that they are refused ---

ECHO = "#!/bin/sh\necho hello-from-the-job\n"


def unchecked_description(key: str, options: dict[str, str], *, queue: int = 1,
                          time_limit: int | None = None) -> str:
    """The submit description the hooks write for ``options`` as they are, unchecked: what a
    BatchJob with these submitOptions submitted before the rules refused them."""
    spec = Spec(backend="htcondor", cluster=ClusterRef("127.0.0.1", 22, "login", False),
                script=ECHO, resources=Resources(time_limit_seconds=time_limit),
                options=HTCondorOptions(queue=queue, submit_options=tuple(options.items())))
    uid, attempt = key.rsplit("-", 1)
    return submit_description(JobRequest(NAMESPACE, "review", uid, int(attempt), spec, 120))


class Scratch:
    """Directories under the test user's home on the pool, removed (with any job left
    behind) at the end."""

    def __init__(self, pool: Cluster) -> None:
        self.pool = pool
        self.name = f"hpcb-review-{uuid.uuid4().hex[:8]}"
        self.key = f"{uuid.uuid4()}-1"

    def local(self, sub: str = "") -> Path:
        """A directory of this scratch as this machine sees it (the pool's chroot)."""
        return Path(self.pool.rootfs) / "home" / self.pool.user / self.name / sub

    def remote(self, sub: str = "") -> str:
        return f"/home/{self.pool.user}/{self.name}/{sub}".rstrip("/")

    def submit(self, description: str, script: str = ECHO, *, dry_run: bool = False) -> str:
        """condor_submit in a fresh attempt directory holding ``script``: its terse answer (or
        the dry run's job ad) and its errors, then ``rc=<status>``."""
        submit = "condor_submit -dry-run - submit.sub" if dry_run else (
            "condor_submit -terse < submit.sub")
        return self.pool.as_user(
            f"mkdir -p {self.remote('attempt')} {self.remote('elsewhere')} && "
            f"cd {self.remote('attempt')} && printf %s {shlex.quote(script)} > script && "
            f"chmod 700 script && printf %s {shlex.quote(description)} > submit.sub && "
            f"{submit} 2>&1; echo rc=$?")

    def wait_done(self, cluster: str) -> None:
        """Until the jobs of ``cluster`` have left the queue."""
        deadline = time.monotonic() + 120
        while condor(self.pool, "condor_q", cluster, "-af", "JobStatus").strip():
            assert time.monotonic() < deadline, f"{cluster} is still in the queue"
            time.sleep(1)

    def clean(self) -> None:
        constraint = shlex.quote(f'HpcbridgeKey == "{self.key}"')
        self.pool.as_user(f"condor_rm -constraint {constraint} >/dev/null 2>&1; "
                          f"rm -rf {self.remote()}")


@pytest.fixture
def scratch(htcondor: Cluster) -> Iterator[Scratch]:
    made = Scratch(htcondor)
    yield made
    made.clean()


def refused_by_the_hooks(driver: Driver, pool: Cluster, name: str, options: dict[str, str],
                         **spec: Any) -> str:
    """Create a BatchJob with ``options`` and sync it: InvalidSpec naming the field, no job and
    no attempt directory on the pool. The status message."""
    obj = start(driver, pool, name, ECHO, htcondor={"submitOptions": options}, **spec)
    driver.sync(NAMESPACE, name)
    status = driver.get(NAMESPACE, name)["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "InvalidSpec"), status
    assert status["message"].startswith("spec.htcondor.submitOptions"), status["message"]
    assert not pool.remote_root(obj).exists()
    assert clusters_with_key(pool, f"{obj['metadata']['uid']}-1") == []
    message: str = status["message"]
    return message


@pytest.mark.parametrize("key", ["iwd", "job_iwd", "initial_dir", "Iwd", "+Iwd"])
def test_another_initial_directory_moved_the_output_away_and_is_refused(
    driver: Driver, htcondor: Cluster, scratch: Scratch, name: str, key: str
) -> None:
    value = scratch.remote("elsewhere")
    value = f'"{value}"' if key.startswith("+") else value
    answer = scratch.submit(unchecked_description(scratch.key, {key: value}))
    assert answer.endswith("rc=0\n"), answer
    cluster = answer.split(".")[0].strip()
    scratch.wait_done(cluster)
    # The job ran in the other directory: its output is there, none where the log Pod looks.
    assert (scratch.local("elsewhere") / f"{cluster}.0.out").read_text() == "hello-from-the-job\n"
    assert not list(scratch.local("attempt").glob("*.out"))
    assert "initialdir" in refused_by_the_hooks(driver, htcondor, name, {key: value})


@pytest.mark.parametrize("key", ["+Out", "MY.Out", "my.out"])
def test_the_out_attribute_won_over_output_and_is_refused(
    driver: Driver, htcondor: Cluster, scratch: Scratch, name: str, key: str
) -> None:
    answer = scratch.submit(unchecked_description(scratch.key, {key: '"b.out"'}))
    assert answer.endswith("rc=0\n"), answer
    cluster = answer.split(".")[0].strip()
    scratch.wait_done(cluster)
    # `output = $(Cluster).$(Process).out` came first, yet stdout went to b.out.
    assert (scratch.local("attempt") / "b.out").read_text() == "hello-from-the-job\n"
    assert not (scratch.local("attempt") / f"{cluster}.0.out").exists()
    assert "the job attribute Out" in refused_by_the_hooks(driver, htcondor, name,
                                                           {key: '"b.out"'})


@pytest.mark.parametrize(
    ("options", "attribute", "effect"),
    [
        pytest.param({"LeaveJobInQueue": "true"}, "LeaveJobInQueue", "true", id="LeaveJobInQueue"),
        pytest.param({"arguments2": '"one two"'}, "Arguments", '"one two"', id="arguments2"),
        pytest.param({"Args": "x y"}, "Args", '"x y"', id="Args"),
        pytest.param({"TransferOutputRemaps": '"1.0.out=/tmp/x"'}, "TransferOutputRemaps",
                     '"1.0.out=/tmp/x"', id="TransferOutputRemaps"),
        pytest.param({"+UserLog": '"/tmp/other.log"'}, "UserLog", '"/tmp/other.log"',
                     id="+UserLog"),
        pytest.param({"stdin": "/etc/hostname"}, "In", '"/etc/hostname"', id="stdin"),
    ],
)
def test_other_names_of_owned_commands_set_the_job_ad_and_are_refused(
    driver: Driver, htcondor: Cluster, scratch: Scratch, name: str, options: dict[str, str],
    attribute: str, effect: str
) -> None:
    ad = scratch.submit(unchecked_description(scratch.key, options), dry_run=True)
    assert ad.endswith("rc=0\n"), ad
    assert f"{attribute}={effect}" in ad.splitlines(), ad
    assert "hpcbridge manages" in refused_by_the_hooks(driver, htcondor, name, options)


def test_a_trailing_backslash_swallowed_the_queue_statement_and_is_refused(
    driver: Driver, htcondor: Cluster, scratch: Scratch, name: str
) -> None:
    options = {"+Note": '"x" \\'}
    description = unchecked_description(scratch.key, options, queue=3)
    assert description.endswith('+Note = "x" \\\nqueue 3\n')
    answer = scratch.submit(description)
    # condor_submit read `queue 3` as the rest of the +Note line: no queue statement is left.
    assert "no queue statement" in answer and not answer.endswith("rc=0\n"), answer
    assert "backslash" in refused_by_the_hooks(driver, htcondor, name, options)


HOSTILE = ["false) ? false : (false", "false)) && ((false", "false) || (true"]
"""Text meant to close the parentheses the time limit's expression put around it. The first
cancels the limit when pasted: ``?:`` binds more loosely than ``||``."""


def wait_running_longer_than(pool: Cluster, job: str, seconds: int) -> None:
    deadline = time.monotonic() + 120
    while condor(pool, "condor_q", job, "-af", f"JobStatus == 2 && time() - "
                 f"JobCurrentStartDate > {seconds}").strip() != "true":
        assert time.monotonic() < deadline, condor(pool, "condor_q", job, "-af", "JobStatus")
        time.sleep(1)


def test_a_hostile_periodic_remove_pasted_into_the_time_limit_cancelled_it(
    htcondor: Cluster, scratch: Scratch
) -> None:
    """The description before: ``periodic_remove = (<time limit>) || (<theirs>)``, which read
    ``((<time limit>) || (false)) ? false : (false)``."""
    theirs = HOSTILE[0]
    limit = time_limit_expression(5)
    description = unchecked_description(scratch.key, {}, time_limit=5).replace(
        f"periodic_remove = {limit}\n", f"periodic_remove = ({limit}) || ({theirs})\n")
    assert f"periodic_remove = ({limit}) || ({theirs})\n" in description
    answer = scratch.submit(description, "#!/bin/sh\nsleep 600\n")
    assert answer.endswith("rc=0\n"), answer
    job = f"{answer.split('.')[0].strip()}.0"
    wait_running_longer_than(htcondor, job, 5)
    # Past its limit, yet the expression the schedd evaluates says "keep it".
    assert condor(htcondor, "condor_q", job, "-af", "PeriodicRemove").strip() == "false"


@pytest.mark.parametrize("theirs", HOSTILE)
def test_a_hostile_periodic_remove_is_refused_and_unchecked_never_submits(
    driver: Driver, htcondor: Cluster, scratch: Scratch, name: str, theirs: str
) -> None:
    description = unchecked_description(scratch.key, {"periodic_remove": theirs},
                                        time_limit=5)
    assert f"+HpcbridgePeriodicRemove = {theirs}\n" in description
    answer = scratch.submit(description, "#!/bin/sh\nsleep 600\n")
    # In an attribute of its own the text must parse alone, and it does not: no job at all.
    assert "Parse error in expression" in answer and not answer.endswith("rc=0\n"), answer
    assert clusters_with_key(htcondor, scratch.key) == []
    message = refused_by_the_hooks(driver, htcondor, name, {"periodic_remove": theirs},
                                   resources={"timeLimit": "15s"})
    assert "parenthesis" in message


def test_the_time_limit_still_removes_a_job_with_a_periodic_remove_of_its_own(
    driver: Driver, htcondor: Cluster, name: str
) -> None:
    theirs = "NumJobStarts > 100 && (JobStatus == 2)"
    obj = start(driver, htcondor, name, "#!/bin/sh\nsleep 600\n",
                resources={"timeLimit": "15s"}, htcondor={"submitOptions": {
                    "periodic_remove": theirs}})
    done = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed", "Cancelled", timeout=300,
                               max_sleep=5)
    assert (done["status"]["phase"], done["status"]["reason"]) == ("Failed", "Timeout")
    [cluster] = clusters_with_key(htcondor, f"{obj['metadata']['uid']}-1")
    ad = condor(htcondor, "condor_history", cluster, "-limit", "1", "-af:r",
                "HpcbridgePeriodicRemove", "PeriodicRemove")
    assert ad.startswith(f"{theirs} (JobStatus == 2 && time() - JobCurrentStartDate > 15"), ad
    assert ad.strip().endswith("|| MY.HpcbridgePeriodicRemove"), ad


@pytest.mark.parametrize("time_limit", [None, "10m"], ids=["alone", "beside-a-time-limit"])
def test_a_removal_by_the_users_own_periodic_remove_is_no_timeout(
    driver: Driver, htcondor: Cluster, name: str, time_limit: str | None
) -> None:
    # Beside a time limit, RemoveReason quotes the whole expression, the time limit's marker
    # included: the user's own removal read as Timeout.
    theirs = "JobStatus == 2 && time() - JobCurrentStartDate > 2"
    resources = {"timeLimit": time_limit} if time_limit else {}
    start(driver, htcondor, name, "#!/bin/sh\nsleep 600\n", resources=resources,
          htcondor={"submitOptions": {"periodic_remove": theirs}})
    status = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed", "Cancelled",
                                 timeout=300, max_sleep=5)["status"]
    assert (status["phase"], status["reason"]) == ("Cancelled", "CancelledOnCluster"), status
    assert "by its own periodic_remove" in status["message"]
