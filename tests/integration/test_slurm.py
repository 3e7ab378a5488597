"""BatchJobs on the real SLURM test cluster, driven through the hooks as Metacontroller would.

The scenarios HTCondor shares are in test_batchjobs.py; these are the ones written for SLURM.
"""

from __future__ import annotations

import concurrent.futures
import os
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.driver import Driver
from tests.integration.conftest import HELLO, NAMESPACE, Cluster, condition, jobs_named, start

pytestmark = pytest.mark.slurm


def squeue_state(job_id: str) -> str:
    return subprocess.run(["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T"],
                          capture_output=True, text=True, check=True).stdout.strip()


def wait_for(check: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.5)


def test_scancel_behind_our_back(driver: Driver, slurm: Cluster, name: str) -> None:
    start(driver, slurm, name, "#!/bin/sh\nsleep 600\n")
    obj = driver.run_to_phase(NAMESPACE, name, "Running")
    subprocess.run(["scancel", obj["status"]["jobIDs"][0]], check=True)
    obj = driver.run_to_phase(NAMESPACE, name, "Cancelled", "Failed", "Succeeded")
    status = obj["status"]
    assert (status["phase"], status["reason"]) == ("Cancelled", "CancelledOnCluster")
    # `kubectl wait --for=condition=Failed` is told of the cancel, as for a Kubernetes Job.
    assert (condition(obj, "Failed")["status"], condition(obj, "Failed")["reason"]) == (
        "True", "CancelledOnCluster")
    assert condition(obj, "Complete")["status"] == "False"


def test_array_with_one_failing_task(driver: Driver, slurm: Cluster, name: str) -> None:
    script = '#!/bin/sh\necho "task $SLURM_ARRAY_TASK_ID"\n[ "$SLURM_ARRAY_TASK_ID" != 2 ]\n'
    start(driver, slurm, name, script, slurm={"array": "0-3"})
    status = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed")["status"]
    assert (status["phase"], status["succeeded"], status["failed"], status["active"]) == (
        "Failed", 3, 1, 0)
    assert "exitCode" not in status
    job = status["jobIDs"][0].split("_")[0]
    assert status["jobIDs"] == [f"{job}_{i}" for i in range(4)]
    assert status["message"].startswith(f"Task {job}_2:")
    (pod,) = driver.pods_of(NAMESPACE, name)
    logs = driver.run_pod(pod)
    for task in range(4):
        assert f"==> task {job}_{task} stdout <==\ntask {task}\n" in logs.stdout


def test_skip_cancel_annotation(driver: Driver, slurm: Cluster, name: str) -> None:
    start(driver, slurm, name, "#!/bin/sh\nsleep 600\n")
    obj = driver.run_to_phase(NAMESPACE, name, "Running")
    obj["metadata"]["annotations"] = {"hpcbridge.io/skip-cancel": "true"}
    driver.delete(NAMESPACE, name)
    assert driver.sync(NAMESPACE, name)["finalized"] is True
    job = obj["status"]["jobIDs"][0]
    try:
        assert squeue_state(job) == "RUNNING"
        assert slurm.remote_root(obj).is_dir()
    finally:
        subprocess.run(["scancel", job], check=True)


def stale_guard(slurm: Cluster, obj: dict[str, Any]) -> None:
    """The guard a submission killed halfway leaves behind: the directory, no job id."""
    guard = slurm.remote_root(obj) / "attempt-1"
    slurm.as_user(f"mkdir -p '{guard}' && touch -d '5 minutes ago' '{guard}'")


def test_stale_guard_is_taken_over(driver: Driver, slurm: Cluster, name: str) -> None:
    obj = start(driver, slurm, name, "#!/bin/sh\ntrue\n")
    stale_guard(slurm, obj)
    status = driver.run_to_phase(NAMESPACE, name, "Succeeded")["status"]
    assert jobs_named(f"hpcb-{obj['metadata']['uid']}-1") == status["jobIDs"]
    assert (slurm.remote_root(obj) / "attempt-1" / "takeover.1").is_dir()


def test_stale_guard_whose_job_exists_is_not_resubmitted(
    driver: Driver, slurm: Cluster, name: str
) -> None:
    obj = start(driver, slurm, name, "#!/bin/sh\ntrue\n")
    job_name = f"hpcb-{obj['metadata']['uid']}-1"
    stale_guard(slurm, obj)
    job = slurm.as_user(f"cd /tmp && sbatch --parsable --hold --job-name={job_name}",
                        stdin="#!/bin/sh\ntrue\n").strip()
    try:
        status = driver.run_to_phase(NAMESPACE, name, "Pending")["status"]
        assert status["jobIDs"] == [job]
        driver.run_until(NAMESPACE, name, lambda o: o["status"]["reason"] == "Held")
        assert jobs_named(job_name) == [job]
    finally:
        subprocess.run(["scancel", job], check=True)


def test_spec_change_after_success_runs_attempt_two(
    driver: Driver, slurm: Cluster, name: str
) -> None:
    start(driver, slurm, name, "#!/bin/sh\necho one\n")
    driver.run_to_phase(NAMESPACE, name, "Succeeded")
    (first_pod,) = driver.pods_of(NAMESPACE, name)
    driver.update_spec(NAMESPACE, name, lambda spec: spec.update(script="#!/bin/sh\necho two\n"))
    obj = driver.run_until(NAMESPACE, name, lambda o: o["status"]["attempt"] == 2)
    obj = driver.run_to_phase(NAMESPACE, name, "Succeeded")
    status = obj["status"]
    assert (status["attempt"], status["attemptGeneration"]) == (2, 2)
    driver.run_until(NAMESPACE, name, lambda _: bool(driver.pods_of(NAMESPACE, name)))
    (pod,) = driver.pods_of(NAMESPACE, name)
    assert pod["metadata"]["uid"] != first_pod["metadata"]["uid"]
    assert pod["metadata"]["labels"]["hpcbridge.io/attempt"] == "2"
    assert driver.run_pod(pod).stdout.endswith("two\n")


def test_spec_change_while_running_waits(driver: Driver, slurm: Cluster, name: str) -> None:
    start(driver, slurm, name, "#!/bin/sh\nsleep 8\necho one\n")
    driver.run_to_phase(NAMESPACE, name, "Running")
    driver.update_spec(NAMESPACE, name, lambda spec: spec.update(script="#!/bin/sh\necho two\n"))
    driver.sync(NAMESPACE, name)
    status = driver.get(NAMESPACE, name)["status"]
    assert (status["phase"], status["attempt"]) == ("Running", 1)
    assert "waits" in status["message"]
    driver.run_until(NAMESPACE, name, lambda o: o["status"]["attempt"] == 2, timeout=60)
    assert driver.run_to_phase(NAMESPACE, name, "Succeeded")["status"]["attempt"] == 2


def new_keypair() -> tuple[str, str]:
    """A fresh ed25519 key pair: (private key, public key line)."""
    script = "d=$(mktemp -d) && ssh-keygen -q -t ed25519 -N '' -f $d/k && cat $d/k $d/k.pub"
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True).stdout
    private, _, public = out.partition("-----END OPENSSH PRIVATE KEY-----\n")
    return private + "-----END OPENSSH PRIVATE KEY-----\n", public


def other_host_key(slurm: Cluster) -> str:
    kind, key = new_keypair()[1].split()[:2]
    return f"[{slurm.host}]:{slurm.port} {kind} {key}\n"


SECRET_PROBLEMS = [
    pytest.param("key", {"known_hosts": "HOSTKEY"}, "HostKeyMismatch", id="wrong-host-key"),
    pytest.param("key", {"known_hosts": "# nothing for this host\n"}, "HostKeyMismatch",
                 id="unknown-host"),
    pytest.param("key", {"ssh-privatekey": "OTHERKEY"}, "AuthenticationFailed", id="wrong-key"),
    pytest.param("password", {"password": "not-the-password"}, "AuthenticationFailed",
                 id="wrong-password"),
    pytest.param("key", {"username": None}, "InvalidSecret", id="no-username"),
    pytest.param("key", {"ssh-privatekey": "not a key"}, "InvalidSecret", id="garbage-key"),
    pytest.param("key", None, "SecretNotFound", id="missing-secret"),
]


@pytest.mark.parametrize(("auth", "override", "reason"), SECRET_PROBLEMS)
def test_secret_problems_then_fixed(
    driver: Driver, slurm: Cluster, name: str, auth: str, override: dict[str, Any] | None,
    reason: str,
) -> None:
    obj = driver.create(slurm.batchjob(name, "#!/bin/sh\ntrue\n", f"{name}-login"))
    if override is not None:
        values = {k: {"HOSTKEY": other_host_key(slurm), "OTHERKEY": new_keypair()[0]}.get(v, v)
                  if v else v for k, v in override.items()}
        driver.apply_secret(slurm.secret(f"{name}-login", auth=auth, **values))
    driver.sync(NAMESPACE, name)
    status = driver.get(NAMESPACE, name)["status"]
    assert (status["phase"], status["reason"]) == ("Pending", reason)
    assert status["jobIDs"] == []
    assert "Traceback" not in status["message"]
    assert not slurm.remote_root(obj).exists()
    driver.apply_secret(slurm.secret(f"{name}-login", auth=auth))
    assert driver.run_to_phase(NAMESPACE, name, "Succeeded")["status"]["reason"] == ""


def test_script_runs_exactly_as_written(driver: Driver, slurm: Cluster, name: str) -> None:
    tricky = "echo '$HOME `id` $(whoami) ; | & > <' \"a\\\"b\" 'it'\\''s' \\\\ %% %j %x"
    start(driver, slurm, name, f"#!/bin/bash\n{tricky}\n")
    obj = driver.run_to_phase(NAMESPACE, name, "Succeeded")
    (pod,) = driver.pods_of(NAMESPACE, name)
    expected = subprocess.run(["bash", "-c", tricky], capture_output=True, text=True).stdout
    assert driver.run_pod(pod).stdout.split("<==\n", 1)[1].startswith(expected)
    assert obj["status"]["exitCode"] == 0


def test_extra_args_reach_sbatch_literally(driver: Driver, slurm: Cluster, name: str,
                                           tmp_path: Any) -> None:
    canary = f"/tmp/hpcbridge-canary-{name}"
    value = f"$(touch {canary}-a);touch {canary}-b`touch {canary}-c`"
    start(driver, slurm, name, '#!/bin/sh\nprintf "%s\\n" "$HPCB_CANARY"\n',
          slurm={"extraArgs": [f"--export=ALL,HPCB_CANARY={value}"]})
    driver.run_to_phase(NAMESPACE, name, "Succeeded")
    (pod,) = driver.pods_of(NAMESPACE, name)
    assert f"{value}\n" in driver.run_pod(pod).stdout
    for suffix in "abc":
        assert not os.path.exists(f"{canary}-{suffix}")


def test_job_that_left_squeue_resolves_through_sacct(
    driver: Driver, slurm: Cluster, name: str
) -> None:
    start(driver, slurm, name, "#!/bin/sh\nexit 4\n")
    obj = driver.run_until(NAMESPACE, name, lambda o: bool(o["status"]["jobIDs"]))
    job = obj["status"]["jobIDs"][0]

    def purged() -> bool:
        known = subprocess.run(["squeue", "-h", "-t", "all", "-j", job],
                               capture_output=True, text=True)
        return known.returncode != 0 or not known.stdout.strip()

    wait_for(purged, timeout=180)
    driver.sync(NAMESPACE, name)
    status = driver.get(NAMESPACE, name)["status"]
    assert (status["phase"], status["reason"], status["exitCode"]) == (
        "Failed", "NonZeroExitCode", 4)


@pytest.mark.parametrize(("shape", "version"), [
    pytest.param("composite", "v2", id="composite-v2"),
    pytest.param("decorator", "v1", id="decorator-v1"),
    pytest.param("decorator", "v2", id="decorator-v2"),
])
def test_other_controller_shapes_and_hook_versions(
    hook_server: str, slurm: Cluster, name: str, shape: str, version: str
) -> None:
    driver = Driver(hook_server, shape=shape, hook_version=version)
    start(driver, slurm, name, HELLO)
    obj = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed")
    assert (obj["status"]["phase"], obj["status"]["exitCode"]) == ("Succeeded", 0)
    assert obj["status"]["observedGeneration"] == 1
    driver.run_until(NAMESPACE, name, lambda _: bool(driver.pods_of(NAMESPACE, name)))
    (pod,) = driver.pods_of(NAMESPACE, name)
    assert "hello from" in driver.run_pod(pod).stdout
    driver.finalize(NAMESPACE, name)
    assert (NAMESPACE, name) not in driver.batchjobs


def test_follow_streams_output_while_the_job_runs(
    driver: Driver, slurm: Cluster, name: str
) -> None:
    script = "#!/bin/sh\necho started\nsleep 8\necho finished\n"
    start(driver, slurm, name, script, logs={"pod": True, "follow": True})
    obj = driver.run_until(NAMESPACE, name, lambda o: o["status"]["phase"] == "Running"
                           and bool(driver.pods_of(NAMESPACE, name)))
    assert obj["status"]["logsPod"] == f"{name}-logs"
    (pod,) = driver.pods_of(NAMESPACE, name)
    with concurrent.futures.ThreadPoolExecutor(1) as kubelet:
        logs = kubelet.submit(driver.run_pod, pod)
        driver.run_to_phase(NAMESPACE, name, "Succeeded")
        output = logs.result(timeout=120)
    assert output.returncode == 0, output.stderr
    assert output.stdout.endswith("started\nfinished\n")
    (same,) = driver.pods_of(NAMESPACE, name)
    assert same["metadata"]["uid"] == pod["metadata"]["uid"]  # not recreated at the end


def test_cluster_change_while_running_waits_for_the_end(
    driver: Driver, slurm: Cluster, name: str
) -> None:
    start(driver, slurm, name, "#!/bin/sh\nsleep 6\necho done\n")
    driver.run_to_phase(NAMESPACE, name, "Running")
    # Nothing listens on 127.0.0.2: the hooks must keep following the attempt where it runs.
    driver.update_spec(NAMESPACE, name, lambda spec: spec["cluster"].update(host="127.0.0.2"))
    status = driver.run_until(NAMESPACE, name,
                              lambda o: o["status"]["attempt"] == 2, timeout=90)["status"]
    assert status["cluster"]["host"] == "127.0.0.2"
    assert (status["phase"], status["reason"]) == ("Pending", "ClusterUnreachable")
    (pod,) = driver.pods_of(NAMESPACE, name)  # attempt 1's logs stay readable
    assert pod["metadata"]["labels"]["hpcbridge.io/attempt"] == "1"
    assert driver.run_pod(pod).stdout.endswith("done\n")


@pytest.mark.parametrize(
    ("option", "effect"),
    [
        pytest.param("-p", "invalid partition specified: script", id="p"),
        pytest.param("--account", "from-stdin", id="account"),
    ],
)
def test_a_value_option_left_bare_took_the_script_and_is_refused(
    driver: Driver, slurm: Cluster, name: str, option: str, effect: str
) -> None:
    """sbatch as the hooks run it, with ``option`` last in extraArgs: it took the script's
    name as its value and read a batch script from stdin instead (the script file says
    ``from-the-file``)."""
    job_name = f"hpcb-review-{uuid.uuid4().hex[:8]}"
    where = f"/tmp/{job_name}"
    output = Path(where) / "out"
    try:
        answer = slurm.as_user(
            f'mkdir {where} && cd {where} && printf "#!/bin/sh\\necho from-the-file\\n" > '
            f"script && sbatch --parsable --job-name={job_name} --output={output} {option} "
            "script 2>&1; echo rc=$?", stdin="#!/bin/sh\necho from-stdin\n")
        if option == "-p":
            assert effect in answer and answer.endswith("rc=1\n"), answer
            assert jobs_named(job_name) == []
        else:
            assert answer.endswith("rc=0\n"), answer
            wait_for(lambda: output.exists() and output.read_text() != "")
            assert output.read_text() == f"{effect}\n"
    finally:
        slurm.as_user(f"rm -rf {where}")
    obj = start(driver, slurm, name, "#!/bin/sh\ntrue\n", slurm={"extraArgs": [option]})
    driver.sync(NAMESPACE, name)
    status = driver.get(NAMESPACE, name)["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "InvalidSpec")
    assert status["message"].startswith("spec.slurm.extraArgs") and "takes a value" in status[
        "message"]
    assert not slurm.remote_root(obj).exists()
    assert jobs_named(f"hpcb-{obj['metadata']['uid']}-1") == []


@pytest.mark.parametrize("directive", ["--chdir=/tmp", "-D /tmp", "--array 0-1", "--wait"])
def test_a_directive_setting_a_refused_option_is_invalid(
    driver: Driver, slurm: Cluster, name: str, directive: str
) -> None:
    # "#SBATCH --chdir=/elsewhere" moved the output away from the log Pod, and the BatchJob
    # reported Succeeded.
    obj = start(driver, slurm, name, f"#!/bin/sh\n\n#SBATCH --time=5\n#SBATCH {directive}\ntrue\n")
    driver.sync(NAMESPACE, name)
    status = driver.get(NAMESPACE, name)["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "InvalidSpec")
    assert status["message"].startswith(f"spec.script line 4 ('#SBATCH {directive}') sets ")
    assert not slurm.remote_root(obj).exists()
    assert jobs_named(f"hpcb-{obj['metadata']['uid']}-1") == []


def test_directives_sbatch_does_not_read_leave_the_job_where_it_belongs(
    driver: Driver, slurm: Cluster, name: str
) -> None:
    # sbatch stops reading directives at the first command, and reads #BSUB/#PBS lines unless
    # told not to: "#BSUB -cwd /tmp" moved a job to /tmp.
    obj = start(driver, slurm, name,
                "#!/bin/sh\n#BSUB -cwd /tmp\n#PBS -t 0-1\npwd\n#SBATCH --chdir=/tmp\n")
    status = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed")["status"]
    assert status["phase"] == "Succeeded", status
    assert len(status["jobIDs"]) == 1
    (pod,) = driver.pods_of(NAMESPACE, name)
    attempt = f"{slurm.remote_root(obj)}/attempt-1"
    assert f"{attempt}\n" in driver.run_pod(pod).stdout
