"""Site features on both real test clusters: a bastion in front of the login node, SSH user
certificates, a work directory outside the home, environment variables and input files from
Secrets and ConfigMaps, suspend, and activeDeadlineSeconds.

The secret values are unique per test and looked for afterwards wherever they must not be: in
every command line sshd was asked to run (the test sshd's ForceCommand records them all), in
``ps`` samples taken while the submission ran, in sshd's log, in the hook server's log and in
the BatchJob's status.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.driver import Driver, serving
from tests.integration.conftest import (
    NAMESPACE,
    STATUS_TTL,
    Bastion,
    Cluster,
    clusters_with_key,
    condition,
    condor,
    hook_server_with,
    jobs_named,
    read_from,
    secret,
    start,
)

ENV_SCRIPT = """#!/bin/sh
echo "pwd=$(pwd)"
echo "LITERAL=$LITERAL"
echo "FROM_SECRET=$FROM_SECRET"
echo "FROM_CONFIGMAP=$FROM_CONFIGMAP"
echo "MULTILINE=$MULTILINE"
echo "HOME_SET=${HOME:+yes}"
echo "OPTIONAL=${OPTIONAL-unset}"
cat conf/params.txt; echo
cat license.dat; echo
stat -c '%a %n' license.dat conf/params.txt
if [ -e hpcbridge-env ]; then stat -c '%a %n' hpcbridge-env; else echo "no env file"; fi
"""


@pytest.fixture(scope="module")
def logged_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A hook server of its own, whose log the secrets test reads."""
    log = tmp_path_factory.mktemp("site-hooks") / "gunicorn.log"
    with serving(log, HPCBRIDGE_LOG_IMAGE="hpcbridge:test",
                 HPCBRIDGE_STATUS_TTL=str(STATUS_TTL), HPCBRIDGE_LOG_FORMAT="json",
                 HPCBRIDGE_LOG_LEVEL="debug") as url:
        yield url, log


def config_map(name: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": NAMESPACE}, "data": data}


class PsSampler:
    """Every process's argv on this machine, sampled until stopped (the clusters' commands run
    here too)."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PsSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
            self.seen.append(out)
            time.sleep(0.02)


def test_env_and_inputs_reach_the_job_in_the_work_dir_and_nowhere_else(
    logged_server: tuple[str, Path], cluster: Cluster, name: str
) -> None:
    url, server_log = logged_server
    driver = Driver(url)
    token, lic, param = (f"{kind}-{uuid.uuid4().hex}" for kind in ("token", "lic", "param"))
    driver.apply_secret(secret(f"{name}-tokens", {"api": token, "lic": lic}))
    driver.apply_config_map(config_map(f"{name}-settings",
                                       {"mode": "fast", "params.txt": param}))
    work_dir = f"{cluster.scratch}/hpcbridge"
    log_mark = cluster.command_log.stat().st_size
    with PsSampler() as ps:
        batchjob = start(
            driver, cluster, name, ENV_SCRIPT,
            env=[{"name": "LITERAL", "value": "it's \"quoted\" $HOME"},
                 {"name": "FROM_SECRET",
                  "valueFrom": {"secretKeyRef": {"name": f"{name}-tokens", "key": "api"}}},
                 {"name": "FROM_CONFIGMAP",
                  "valueFrom": {"configMapKeyRef": {"name": f"{name}-settings",
                                                    "key": "mode"}}},
                 {"name": "MULTILINE", "value": "one\ntwo"},
                 {"name": "OPTIONAL",
                  "valueFrom": {"secretKeyRef": {"name": "absent", "key": "x",
                                                 "optional": True}}}],
            inputs=[{"configMap": {"name": f"{name}-settings"}, "path": "conf"},
                    {"secret": {"name": f"{name}-tokens"},
                     "items": [{"key": "lic", "path": "license.dat"}]}],
        )
        batchjob["spec"]["cluster"]["workDir"] = work_dir
        status = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed")["status"]
    assert status["phase"] == "Succeeded", status
    assert status["cluster"]["workDir"] == work_dir
    attempt = f"{work_dir}/{NAMESPACE}/{name}/{batchjob['metadata']['uid']}/attempt-1"
    (pod,) = driver.pods_of(NAMESPACE, name)
    assert f"--remote-dir={attempt}" in pod["spec"]["containers"][0]["args"]
    out = driver.run_pod(pod).stdout
    # sbatch passes the login environment on (HOME included) and spec.env adds to it, where
    # HTCondor's vanilla jobs start from an environment of their own, without HOME.
    home = "HOME_SET=yes" if cluster.backend == "slurm" else "HOME_SET="
    # The env file lives as long as a job needs it: SLURM's until sbatch has returned (the
    # variables are slurmctld's then), HTCondor's until the hooks see the attempt end.
    env_file = "no env file" if cluster.backend == "slurm" else "600 hpcbridge-env"
    for line in (f"pwd={attempt}", "LITERAL=it's \"quoted\" $HOME", f"FROM_SECRET={token}",
                 "FROM_CONFIGMAP=fast", "MULTILINE=one\ntwo", home,
                 "OPTIONAL=unset", param, lic, "600 license.dat", "600 conf/params.txt",
                 env_file):
        assert f"{line}\n" in out, out
    assert (cluster.on_host(attempt) / "license.dat").read_text() == lic
    assert not (cluster.on_host(attempt) / "hpcbridge-env").exists()
    assert not (cluster.on_host(cluster.scratch) / ".hpcbridge").exists()

    commands = read_from(cluster.command_log, log_mark)
    assert "hpcbridge-submit" in commands and attempt in commands
    places = {
        "a remote command line": commands,
        "a ps sample": "\n".join(ps.seen),
        "the hook server's log": server_log.read_text(),
        "the BatchJob's status": json.dumps(status),
        "sshd's log": cluster.ssh_log.read_text(errors="replace"),
    }
    for secret_value in (token, lic, param):
        for where, text in places.items():
            assert secret_value not in text, f"a secret value is in {where}"

    driver.finalize(NAMESPACE, name)
    assert not cluster.on_host(attempt).parent.exists()


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


def test_a_missing_configmap_waits_with_its_name_then_runs(
    driver: Driver, cluster: Cluster, name: str
) -> None:
    start(driver, cluster, name, "#!/bin/sh\necho \"MODE=$MODE\"\n",
          env=[{"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": f"{name}-cfg",
                                                                  "key": "mode"}}}])
    status = driver.sync(NAMESPACE, name)["status"]
    assert (status["phase"], status["reason"]) == ("Pending", "ConfigMapNotFound")
    assert f"{name}-cfg" in status["message"]
    driver.apply_config_map(config_map(f"{name}-cfg", {"mode": "slow"}))
    status = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed")["status"]
    assert status["phase"] == "Succeeded", status
    (pod,) = driver.pods_of(NAMESPACE, name)
    assert "MODE=slow\n" in driver.run_pod(pod).stdout


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


WAITING = {
    # Options that keep a job waiting in the queue without taking the node from other tests.
    "slurm": {"slurm": {"extraArgs": ["--begin=now+3600"]}},
    "htcondor": {"htcondor": {"submitOptions": {"requirements": "(MY.HpcbridgeGate =?= True)"}}},
}


def queue_view(cluster: Cluster, job: str) -> str:
    """The job as the scheduler shows it: state and reason (SLURM), JobStatus and HoldReason."""
    if cluster.backend == "slurm":
        return subprocess.run(["squeue", "-h", "-j", job, "-o", "%T %r"],
                              capture_output=True, text=True, check=True).stdout.strip()
    return condor(cluster, "condor_q", job, "-af", "JobStatus", "HoldReason").strip()


def let_run(cluster: Cluster, job: str) -> None:
    if cluster.backend == "slurm":
        subprocess.run(["scontrol", "update", f"jobid={job}", "StartTime=now"], check=True)
    else:
        condor(cluster, "condor_qedit", job, "HpcbridgeGate", "True")


def suspend(driver: Driver, name: str, value: bool) -> None:
    driver.update_spec(NAMESPACE, name, lambda spec: spec.update(suspend=value))


def assert_held(cluster: Cluster, job: str) -> None:
    held = queue_view(cluster, job)
    assert ("JobHeldUser" in held if cluster.backend == "slurm"
            else held.startswith("5 via condor_hold")), held


def assert_released_and_runs(driver: Driver, cluster: Cluster, name: str, job: str,
                             status: dict[str, Any]) -> None:
    """The sync that answered ``status`` released the job: it is not held and runs to its end
    once the scheduler lets it start."""
    assert status["reason"] != "Suspended" and "released" in status["message"], status
    released = queue_view(cluster, job)
    assert "JobHeldUser" not in released and not released.startswith("5"), released
    let_run(cluster, job)
    status = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed")["status"]
    assert (status["phase"], status["attempt"]) == ("Succeeded", 1), status
    assert condition(driver.get(NAMESPACE, name), "Suspended")["status"] == "False"


def test_suspend_before_submission_then_hold_and_release(
    driver: Driver, cluster: Cluster, name: str
) -> None:
    start(driver, cluster, name, "#!/bin/sh\necho resumed\n", suspend=True,
          **WAITING[cluster.backend])
    status = driver.sync(NAMESPACE, name)["status"]
    assert (status["phase"], status["reason"], status["jobIDs"]) == ("Pending", "Suspended", [])
    assert condition(driver.get(NAMESPACE, name), "Suspended")["status"] == "True"
    key = f"{driver.get(NAMESPACE, name)['metadata']['uid']}-1"
    assert not (jobs_named(f"hpcb-{key}") if cluster.backend == "slurm"
                else clusters_with_key(cluster, key))

    suspend(driver, name, False)
    status = driver.sync(NAMESPACE, name)["status"]
    job = status["jobIDs"][0].split(".")[0].split("_")[0]
    assert status["reason"] != "Suspended" and status["attempt"] == 1, status
    suspend(driver, name, True)
    time.sleep(STATUS_TTL)
    status = driver.sync(NAMESPACE, name)["status"]
    assert (status["phase"], status["reason"]) == ("Pending", "Suspended"), status
    assert_held(cluster, job)
    time.sleep(STATUS_TTL)
    status = driver.sync(NAMESPACE, name)["status"]
    assert status["reason"] == "Suspended", status

    suspend(driver, name, False)
    time.sleep(STATUS_TTL)
    assert_released_and_runs(driver, cluster, name, job, driver.sync(NAMESPACE, name)["status"])


STALE_TTL = 20.0
"""A status cache lifetime that lets the queue a sync sees predate the hold a sync before it
sent, as on a busy hook server."""


@pytest.fixture(scope="module")
def stale_status_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with hook_server_with(tmp_path_factory, status_ttl=STALE_TTL) as url:
        yield url


def test_suspend_released_before_the_shared_status_shows_the_hold(
    stale_status_server: str, cluster: Cluster, name: str
) -> None:
    driver = Driver(stale_status_server)
    start(driver, cluster, name, "#!/bin/sh\necho resumed\n", **WAITING[cluster.backend])
    job = driver.sync(NAMESPACE, name)["status"]["jobIDs"][0].split(".")[0].split("_")[0]
    # The shared status sees the job waiting, not held; every sync below is answered from it.
    seen = time.monotonic()
    assert driver.sync(NAMESPACE, name)["status"]["phase"] == "Pending"
    suspend(driver, name, True)
    status = driver.sync(NAMESPACE, name)["status"]
    assert (status["phase"], status["reason"]) == ("Pending", "Suspended"), status
    assert_held(cluster, job)
    suspend(driver, name, False)
    status = driver.sync(NAMESPACE, name)["status"]
    assert time.monotonic() - seen < STALE_TTL * 0.6, "the shared status may have been refreshed"
    assert_released_and_runs(driver, cluster, name, job, status)


GATED = """#!/bin/sh
# Runs until the test creates the file 'finish' in the attempt directory (5 minutes at most).
i=0
while [ ! -e finish ] && [ "$i" -lt 300 ]; do sleep 1; i=$((i + 1)); done
echo finished
"""


def test_suspend_does_not_stop_a_running_job(driver: Driver, cluster: Cluster,
                                             name: str) -> None:
    batchjob = start(driver, cluster, name, GATED)
    driver.run_to_phase(NAMESPACE, name, "Running")
    driver.update_spec(NAMESPACE, name, lambda spec: spec.update(suspend=True))
    status = driver.sync(NAMESPACE, name)["status"]
    assert status["phase"] == "Running" and "cannot be suspended" in status["message"], status
    (cluster.remote_root(batchjob) / "attempt-1" / "finish").touch()
    status = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed")["status"]
    assert (status["phase"], status["attempt"]) == ("Succeeded", 1), status


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


def certificate_secret(cluster: Cluster, name: str, certificate: Path) -> dict[str, Any]:
    return cluster.secret(name, **{"ssh-privatekey": cluster.cert_key.read_text(),
                                   "ssh-certificate": certificate.read_text()})


def test_a_certificate_signed_key_runs_and_an_expired_one_is_refused(
    driver: Driver, cluster: Cluster, name: str
) -> None:
    driver.apply_secret(certificate_secret(cluster, f"{name}-login", cluster.cert))
    driver.create(cluster.batchjob(name, "#!/bin/sh\necho signed\n", f"{name}-login"))
    status = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed")["status"]
    assert status["phase"] == "Succeeded", status
    assert f'Accepted certificate ID "{cluster.cert_id}"' in cluster.ssh_log.read_text(
        errors="replace")

    expired = f"{name}-old"
    driver.apply_secret(certificate_secret(cluster, f"{expired}-login", cluster.cert_expired))
    driver.create(cluster.batchjob(expired, "#!/bin/sh\necho never\n", f"{expired}-login"))
    status = driver.sync(NAMESPACE, expired)["status"]
    assert (status["phase"], status["reason"]) == ("Pending", "InvalidSecret"), status
    assert "2020-01-01" in status["message"] and "expired" in status["message"], status
