"""BatchClusters on both real test clusters, through the bastion in front of them: a BatchJob
that names one runs with a Secret holding no known_hosts, with the BatchCluster's defaults
where it leaves fields out and its own values where it sets them; each refusal submits nothing;
a wrong knownHosts fails closed before any credential reaches the login node."""

from __future__ import annotations

import base64
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.driver import Driver, serving
from tests.integration.conftest import (
    NAMESPACE,
    STATUS_TTL,
    Bastion,
    Cluster,
    ObjectStore,
    clusters_with_key,
    condor,
    jobs_named,
    read_from,
)
from tests.integration.test_data import bucket, client, drive, put

LABEL = "hpc.example.org/test-site"
HELLO = '#!/bin/sh\necho "site $(hostname)"\n'


def namespace(labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": NAMESPACE, "labels": labels}}


def batchcluster(cluster: Cluster, bastion: Bastion, name: str, **spec: Any) -> dict[str, Any]:
    """A BatchCluster for ``cluster`` by a name only the bastion resolves, through it; its
    knownHosts list the login node (hashed) and the bastion."""
    route = bastion.route(cluster.backend)
    return {
        "apiVersion": "hpcbridge.io/v1alpha1", "kind": "BatchCluster",
        "metadata": {"name": name},
        "spec": {
            "backend": cluster.backend, "host": route.name, "port": route.port,
            "jump": [{"host": bastion.host, "port": bastion.port}],
            "knownHosts": f"{route.known_hosts_hashed.strip()}\n{bastion.known_hosts.strip()}\n",
            "namespaceSelector": {"matchLabels": {LABEL: "enabled"}},
            "defaults": {"resources": {"timeLimit": "7m", "memory": "100Mi", "cpus": 1}},
            "limits": {"maxCpus": 2, "maxTimeLimit": "1h"},
            **spec,
        },
    }


def prepare(driver: Driver, cluster: Cluster, bastion: Bastion, name: str, *,
            labels: dict[str, str] | None = None, **site: Any) -> None:
    """The Namespace, the BatchCluster ``name`` and the logins, none with a known_hosts."""
    driver.apply_cluster_scoped(namespace({LABEL: "enabled"} if labels is None else labels))
    driver.apply_cluster_scoped(batchcluster(cluster, bastion, name, **site))
    driver.apply_secret(cluster.secret(f"{name}-login", known_hosts=None))
    bastion_login = bastion.secret(f"{name}-bastion")
    del bastion_login["data"]["known_hosts"]
    driver.apply_secret(bastion_login)


def named(name: str, script: str = HELLO, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "hpcbridge.io/v1alpha1", "kind": "BatchJob",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"cluster": {"name": name, "secretRef": {"name": f"{name}-login"},
                             "jumpSecretRef": {"name": f"{name}-bastion"}},
                 "script": script, **spec},
    }


def submitted(cluster: Cluster, batchjob: dict[str, Any]) -> list[str]:
    """The jobs of the BatchJob's first attempt the scheduler knows."""
    key = f"{batchjob['metadata']['uid']}-1"
    if cluster.backend == "slurm":
        return jobs_named(f"hpcb-{key}")
    return clusters_with_key(cluster, key)


def requested(cluster: Cluster, job: str) -> tuple[int | None, int, int]:
    """(time limit in minutes, memory in MiB, cpus) as the scheduler took them (SLURM's
    ``scontrol show job``; HTCondor's job ad, whose time limit is an expression)."""
    if cluster.backend == "slurm":
        shown = subprocess.run(["scontrol", "show", "job", job], capture_output=True,
                               text=True, check=True).stdout
        found = {key: re.search(pattern, shown) for key, pattern in (
            ("time", r"TimeLimit=(\d+):(\d+):\d+"), ("memory", r"MinMemoryNode=(\d+)M"),
            ("cpus", r"MinCPUsNode=(\d+)"))}
        assert all(found.values()), shown
        hours, minutes = found["time"].groups()  # type: ignore[union-attr]
        return (int(hours) * 60 + int(minutes), int(found["memory"].group(1)),  # type: ignore[union-attr]
                int(found["cpus"].group(1)))  # type: ignore[union-attr]
    ad = condor(cluster, "condor_history", job, "-limit", "1", "-af", "RequestMemory",
                "RequestCpus").split()
    return None, int(ad[0]), int(ad[1])


@pytest.fixture
def driver(hook_server: str) -> Driver:
    """Metacontroller with hook version v2, the only one that hands a BatchJob cluster-scoped
    objects."""
    return Driver(hook_server, hook_version="v2")


def test_a_batchjob_runs_through_its_batchclusters_bastion_with_its_defaults(
        driver: Driver, cluster: Cluster, bastion: Bastion, name: str, hook_server: str) -> None:
    route = bastion.route(cluster.backend)
    prepare(driver, cluster, bastion, name)
    mark = bastion.log_size()
    batchjob = driver.create(named(name, resources={"timeLimit": "9m"}))
    status = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed")["status"]
    assert status["phase"] == "Succeeded", status
    assert (route.name, route.port) in bastion.forwarded(since=mark)
    assert status["cluster"]["name"] == name and status["cluster"]["host"] == route.name
    assert status["cluster"]["knownHosts"].startswith(route.known_hosts_hashed.strip())
    assert "known_hosts" not in driver.secrets[(NAMESPACE, f"{name}-login")]["data"]
    (job,) = submitted(cluster, batchjob)
    minutes, memory, cpus = requested(cluster, job)
    assert (memory, cpus) == (100, 1)  # the BatchCluster's defaults
    if cluster.backend == "slurm":
        assert minutes == 9  # the BatchJob's own timeLimit wins over the default 7m
    (pod,) = driver.pods_of(NAMESPACE, name)
    args = pod["spec"]["containers"][0]["args"]
    assert f"--batchcluster={name}" in args
    assert "site " in driver.run_pod(pod).stdout
    metrics = requests.get(f"{hook_server}/metrics", timeout=10).text
    assert f'hpcbridge_ssh_connects_total{{cluster="{name}",outcome="ok"}}' in metrics
    driver.finalize(NAMESPACE, name)


def test_the_batchjobs_own_values_win_over_the_defaults(
        driver: Driver, cluster: Cluster, bastion: Bastion, name: str) -> None:
    prepare(driver, cluster, bastion, name)
    batchjob = driver.create(named(name, resources={"memory": "150Mi", "cpus": 2}))
    status = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed")["status"]
    assert status["phase"] == "Succeeded", status
    (job,) = submitted(cluster, batchjob)
    minutes, memory, cpus = requested(cluster, job)
    assert (memory, cpus) == (150, 2)
    if cluster.backend == "slurm":
        assert minutes == 7  # the default, which the BatchJob leaves out
    driver.finalize(NAMESPACE, name)


@pytest.mark.parametrize(
    ("change", "phase", "reason", "words"),
    [
        pytest.param("no-batchcluster", "Pending", "BatchClusterNotFound", "was not handed over",
                     id="not-found"),
        pytest.param("no-label", "Pending", "ClusterNotAllowed", "does not select",
                     id="not-allowed"),
        pytest.param("too-many-cpus", "Failed", "InvalidSpec", "limits.maxCpus", id="limit"),
        pytest.param("own-port", "Failed", "InvalidSpec", "spec.cluster.port", id="own-port"),
        pytest.param("other-backend", "Failed", "InvalidSpec", "spec.backend", id="backend"),
    ],
)
def test_each_refusal_submits_nothing(driver: Driver, cluster: Cluster, bastion: Bastion,
                                      name: str, change: str, phase: str, reason: str,
                                      words: str) -> None:
    prepare(driver, cluster, bastion, name, labels={} if change == "no-label" else None)
    if change == "no-batchcluster":
        driver.batchclusters.clear()
    spec: dict[str, Any] = {
        "too-many-cpus": {"resources": {"cpus": 3}},
        "other-backend": {"backend": "htcondor" if cluster.backend == "slurm" else "slurm"},
    }.get(change, {})
    batchjob = named(name, **spec)
    if change == "own-port":
        batchjob["spec"]["cluster"]["port"] = 2
    created = driver.create(batchjob)
    for _ in range(2):
        status = driver.sync(NAMESPACE, name)["status"]
    assert (status["phase"], status["reason"]) == (phase, reason), status
    assert words in status["message"], status
    assert submitted(cluster, created) == []
    assert not cluster.remote_root(created).exists()
    if change == "no-label":  # a label added later lets it proceed
        driver.apply_cluster_scoped(namespace({LABEL: "enabled"}))
        status = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed")["status"]
        assert status["phase"] == "Succeeded", status
    driver.finalize(NAMESPACE, name)


def wrong_key_line(host_field: str) -> str:
    """A well-formed ed25519 known_hosts line whose key no test server has."""
    blob = b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20" + bytes(range(32))
    return f"{host_field} ssh-ed25519 {base64.b64encode(blob).decode()}"


def fresh_key(directory: Path) -> tuple[str, str]:
    """A key pair no sshd authorises: its private key and its fingerprint (``SHA256:…``), which
    sshd logs for any key a client offers, so that this test's credential can be told from the
    logins of the other tests that share the login node."""
    path = directory / "fresh"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    shown = subprocess.run(["ssh-keygen", "-l", "-f", f"{path}.pub"], capture_output=True,
                           text=True, check=True).stdout
    return path.read_text(), shown.split()[1]


def test_a_wrong_known_hosts_fails_closed_before_any_credential_is_sent(
        driver: Driver, cluster: Cluster, bastion: Bastion, name: str, tmp_path: Path) -> None:
    route = bastion.route(cluster.backend)
    wrong = f"{wrong_key_line(f'[{route.name}]:{route.port}')}\n{bastion.known_hosts.strip()}\n"
    prepare(driver, cluster, bastion, name, knownHosts=wrong)
    key, fingerprint = fresh_key(tmp_path)
    driver.apply_secret(cluster.secret(f"{name}-login", known_hosts=None, **{
        "ssh-privatekey": key}))
    since = cluster.ssh_log.stat().st_size
    created = driver.create(named(name))
    uid = created["metadata"]["uid"]
    status = driver.sync(NAMESPACE, name)["status"]
    assert (status["phase"], status["reason"]) == ("Pending", "HostKeyMismatch"), status
    assert f"knownHosts of BatchCluster {name}" in status["message"], status
    assert fingerprint not in read_from(cluster.ssh_log, since)
    assert not [command for command in cluster.commands() if uid in command]
    assert submitted(cluster, created) == []
    # The platform team fixes the BatchCluster: its current knownHosts count at once, and the
    # same credential now reaches the login node, which logs it (what the check above looks
    # for) and refuses it.
    driver.apply_cluster_scoped(batchcluster(cluster, bastion, name))
    status = driver.sync(NAMESPACE, name)["status"]
    assert (status["phase"], status["reason"]) == ("Pending", "AuthenticationFailed"), status
    assert fingerprint in read_from(cluster.ssh_log, since)
    driver.apply_secret(cluster.secret(f"{name}-login", known_hosts=None))
    status = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed")["status"]
    assert status["phase"] == "Succeeded", status
    driver.finalize(NAMESPACE, name)


def test_deleting_the_batchcluster_strands_no_running_job_and_keeps_its_log_pod(
        driver: Driver, cluster: Cluster, bastion: Bastion, name: str) -> None:
    """The job finishes where it ran (``status.cluster``), and its log Pod goes there too and
    prints its output, with the host keys the attempt was submitted with."""
    prepare(driver, cluster, bastion, name)
    driver.create(named(name, "#!/bin/sh\nsleep 8\necho done\n"))
    status = driver.run_to_phase(NAMESPACE, name, "Running", "Succeeded", "Failed")["status"]
    assert status["phase"] in ("Running", "Succeeded"), status
    driver.batchclusters.clear()
    status = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed")["status"]
    assert status["phase"] == "Succeeded", status
    assert status["logsPod"] == f"{name}-logs", status
    (pod,) = driver.pods_of(NAMESPACE, name)
    logs = driver.run_pod(pod)
    assert logs.returncode == 0, logs.stderr
    assert logs.stdout.endswith("stdout <==\ndone\n"), logs.stdout
    driver.sync(NAMESPACE, name)
    assert [p["metadata"]["name"] for p in driver.pods_of(NAMESPACE, name)] == [f"{name}-logs"]
    driver.finalize(NAMESPACE, name)


@pytest.fixture(scope="module")
def named_only_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log: Path = tmp_path_factory.mktemp("named-only") / "gunicorn.log"
    with serving(log, HPCBRIDGE_LOG_IMAGE="hpcbridge:test",
                 HPCBRIDGE_STATUS_TTL=str(STATUS_TTL), HPCBRIDGE_DIRECT_CLUSTERS="false") as url:
        yield url
    assert "Traceback" not in log.read_text()


def test_without_direct_clusters_a_host_is_refused_and_a_batchcluster_runs(
        named_only_server: str, slurm: Cluster, bastion: Bastion, name: str) -> None:
    driver = Driver(named_only_server, hook_version="v2")
    driver.apply_secret(slurm.secret(f"{name}-direct"))
    direct = driver.create(slurm.batchjob(f"{name}-direct", HELLO, f"{name}-direct"))
    status = driver.sync(NAMESPACE, f"{name}-direct")["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "InvalidSpec"), status
    assert "HPCBRIDGE_DIRECT_CLUSTERS=false" in status["message"]
    assert jobs_named(f"hpcb-{direct['metadata']['uid']}-1") == []
    prepare(driver, slurm, bastion, name)
    driver.create(named(name))
    status = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed")["status"]
    assert status["phase"] == "Succeeded", status
    driver.finalize(NAMESPACE, name)
    driver.finalize(NAMESPACE, f"{name}-direct")


def test_data_moves_over_a_batchclusters_route(
        named_only_server: str, cluster: Cluster, bastion: Bastion, object_store: ObjectStore,
        name: str) -> None:
    """The mover Pods take the BatchCluster's route and trust its knownHosts, as the log Pod
    does: the login Secret holds no known_hosts. The store, on loopback, is allowed by the
    BatchCluster's spec.storage.allowedEndpoints alone (this hook server has no
    HPCBRIDGE_S3_ENDPOINTS): refused until the BatchCluster lists it."""
    driver = Driver(named_only_server, hook_version="v2")
    prepare(driver, cluster, bastion, name)
    storage = {"s3": {"endpoint": object_store.endpoint, "secretRef": {"name": f"{name}-s3"}}}
    refused = named(name, storage=storage,
                    inputs=[{"s3": {"bucket": "hpcbridge-data", "key": "k"}, "path": "k"}])
    refused["metadata"]["name"] = f"{name}-refused"
    driver.create(refused)
    status = driver.sync(NAMESPACE, f"{name}-refused")["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "InvalidSpec"), status
    assert "spec.storage.s3.endpoint" in status["message"]
    assert "spec.storage.allowedEndpoints" in status["message"]
    assert driver.pods_of(NAMESPACE, f"{name}-refused") == []
    driver.finalize(NAMESPACE, f"{name}-refused")
    prepare(driver, cluster, bastion, name,
            storage={"allowedEndpoints": ["https://other.example:9000", object_store.endpoint]})
    s3 = client(object_store)
    data_bucket, results_bucket = bucket(s3), bucket(s3, "hpcbridge-results")
    put(s3, data_bucket, f"{name}/in.txt", b"site input\n")
    driver.apply_secret(object_store.secret(f"{name}-s3"))
    driver.create(named(
        name, "#!/bin/sh\nmkdir -p out\ncat in.txt > out/copy.txt\n", storage=storage,
        inputs=[{"s3": {"bucket": data_bucket, "key": f"{name}/in.txt"}, "path": "in.txt"}],
        outputs=[{"path": "out/copy.txt",
                  "s3": {"bucket": results_bucket, "prefix": f"{name}/"}}]))
    status = drive(driver, name, {}, until={"Succeeded", "Failed"})["status"]
    assert status["phase"] == "Succeeded", status
    assert s3.get_object(results_bucket, f"{name}/out/copy.txt").read() == b"site input\n"
    driver.finalize(NAMESPACE, name)
