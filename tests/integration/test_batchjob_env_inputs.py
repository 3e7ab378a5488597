"""Environment variables and input files from Secrets and ConfigMaps on both real test clusters:
they reach the job in its work directory and nowhere else, and a missing ConfigMap waits with
its name, then runs.

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
    Cluster,
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
