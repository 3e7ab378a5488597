"""Data in and results out on the real clusters and the real S3 store: inputs from one key, a
prefix and a claim's directory are read back by the job; outputs land in S3 and in a claim's
directory byte for byte, with their modes never wider than 0644; the S3 keys reach no command
the cluster's sshd recorded and no file of the attempt's directory. The store is on loopback:
the hook server allows it (``HPCBRIDGE_S3_ENDPOINTS``); an endpoint that leads inward without
that is refused, by the hooks or by the mover itself."""

from __future__ import annotations

import copy
import hashlib
import stat
from pathlib import Path
from typing import Any

import pytest
from minio import Minio

from hooks.core.wire.mover_pods import PEAK_MEMORY
from tests.driver import Driver
from tests.integration.conftest import NAMESPACE, Cluster, ObjectStore, start
from tests.integration.kubelet import run_mover

SCRIPT = """#!/bin/bash
set -e
mkdir -p results
cat data/params.json data/raw/a.txt data/raw/sub/b.txt data/prepared/x.txt > results/all.h5
head -c 3000000 /dev/urandom > results/big.h5
echo '{"ok": true}' > summary.json
"""


def client(store: ObjectStore) -> Minio:
    return Minio(store.endpoint.removeprefix("http://"), access_key=store.access_key,
                 secret_key=store.secret_key, secure=False, region="us-east-1")


def bucket(s3: Minio, name: str = "hpcbridge-data") -> str:
    """One of the tests' shared buckets (each bucket claims volumes of the store)."""
    if not s3.bucket_exists(name):
        s3.make_bucket(name)
    return name


def put(s3: Minio, bucket_name: str, key: str, data: bytes) -> None:
    import io
    s3.put_object(bucket_name, key, io.BytesIO(data), len(data))


def drive(driver: Driver, name: str, claims: dict[str, Path], *, until: set[str],
          rounds: int = 120) -> dict[str, Any]:
    """Sync, running each mover Pod once it is there, until the phase is in ``until``."""
    import time
    for _ in range(rounds):
        driver.sync(NAMESPACE, name)
        for pod in driver.pods_of(NAMESPACE, name):
            component = pod["metadata"]["labels"]["app.kubernetes.io/component"]
            if component in ("inputs", "outputs") and pod["status"]["phase"] != "Succeeded":
                run_mover(driver, pod, claims)
        obj = driver.get(NAMESPACE, name)
        if (obj.get("status") or {}).get("phase") in until:
            return obj
        time.sleep(1)
    raise AssertionError(f"{name}: {driver.get(NAMESPACE, name).get('status')}")


def test_inputs_and_outputs_move_byte_for_byte(
    driver: Driver, cluster: Cluster, object_store: ObjectStore, name: str, tmp_path: Path,
) -> None:
    s3 = client(object_store)
    data_bucket, results_bucket = bucket(s3), bucket(s3, "hpcbridge-results")
    put(s3, data_bucket, f"{name}/params.json", b"params\n")
    put(s3, data_bucket, f"{name}/raw/a.txt", b"a\n")
    put(s3, data_bucket, f"{name}/raw/sub/b.txt", b"b\n")
    prepared, results = tmp_path / "prepared", tmp_path / "results"
    (prepared / "run-42").mkdir(parents=True)
    (prepared / "run-42" / "x.txt").write_bytes(b"x\n")
    results.mkdir()
    driver.apply_secret(object_store.secret(f"{name}-s3"))
    commands_before = len(cluster.commands())
    batchjob = start(driver, cluster, name, SCRIPT, storage={"s3": {
        "endpoint": object_store.endpoint, "secretRef": {"name": f"{name}-s3"}}},
        inputs=[
            {"s3": {"bucket": data_bucket, "key": f"{name}/params.json"},
             "path": "data/params.json"},
            {"s3": {"bucket": data_bucket, "prefix": f"{name}/raw/"}, "path": "data/raw/"},
            {"persistentVolumeClaim": {"claimName": "prepared", "subPath": "run-42"},
             "path": "data/prepared/"}],
        outputs=[
            {"path": "results/*.h5", "s3": {"bucket": results_bucket, "prefix": f"{name}/"}},
            {"path": "summary.json",
             "persistentVolumeClaim": {"claimName": "results", "subPath": "run-42"}}])
    obj = drive(driver, name, {"prepared": prepared, "results": results},
                until={"Succeeded", "Failed"})
    status = obj["status"]
    assert status["phase"] == "Succeeded", status
    assert status["inputs"]["phase"] == "Done" and status["inputs"]["files"] == 4
    assert status["outputs"]["phase"] == "Done" and status["outputs"]["files"] == 3
    kinds = {c["type"]: c["status"] for c in status["conditions"]}
    assert kinds["InputsReady"] == kinds["OutputsCollected"] == kinds["Complete"] == "True"
    attempt = cluster.remote_root(batchjob) / "attempt-1"
    got = s3.get_object(results_bucket, f"{name}/results/all.h5").read()
    assert got == (attempt / "results/all.h5").read_bytes() == b"params\na\nb\nx\n"
    big = s3.get_object(results_bucket, f"{name}/results/big.h5").read()
    assert hashlib.sha256(big).digest() == hashlib.sha256(
        (attempt / "results/big.h5").read_bytes()).digest()
    assert (results / "run-42/summary.json").read_bytes() == (
        attempt / "summary.json").read_bytes()
    secrets = (object_store.secret_key, object_store.access_key)
    recorded = "\n".join(cluster.commands()[commands_before:])
    assert not any(s in recorded for s in secrets)
    root = cluster.remote_root(batchjob)
    for path in root.rglob("*"):
        if path.is_file():
            assert not any(s.encode() in path.read_bytes() for s in secrets), path
    driver.finalize(NAMESPACE, name)


def test_a_missing_object_waits_then_proceeds(
    driver: Driver, cluster: Cluster, object_store: ObjectStore, name: str,
) -> None:
    s3 = client(object_store)
    data_bucket = bucket(s3)
    driver.apply_secret(object_store.secret(f"{name}-s3"))
    start(driver, cluster, name, "#!/bin/bash\ncat later.txt\n",
          storage={"s3": {"endpoint": object_store.endpoint,
                          "secretRef": {"name": f"{name}-s3"}}},
          inputs=[{"s3": {"bucket": data_bucket, "key": f"{name}/later.txt"},
                   "path": "later.txt"}])
    for _ in range(3):
        obj = drive(driver, name, {}, until={"Pending"})
    assert obj["status"]["reason"] == "InputNotFound", obj["status"]
    assert f"s3://{data_bucket}/{name}/later.txt" in obj["status"]["message"]
    put(s3, data_bucket, f"{name}/later.txt", b"now\n")
    obj = drive(driver, name, {}, until={"Succeeded", "Failed"})
    assert obj["status"]["phase"] == "Succeeded", obj["status"]
    driver.finalize(NAMESPACE, name)


def test_wrong_keys_are_storage_access_denied(
    driver: Driver, cluster: Cluster, object_store: ObjectStore, name: str,
) -> None:
    driver.apply_secret(object_store.secret(f"{name}-s3", AWS_SECRET_ACCESS_KEY="wrong"))
    start(driver, cluster, name, "#!/bin/bash\ntrue\n",
          storage={"s3": {"endpoint": object_store.endpoint,
                          "secretRef": {"name": f"{name}-s3"}}},
          inputs=[{"s3": {"bucket": "anything", "key": "k"}, "path": "k"}])
    for _ in range(2):
        obj = drive(driver, name, {}, until={"Pending"})
    assert obj["status"]["reason"] == "StorageAccessDenied", obj["status"]
    assert not obj["status"].get("jobIDs")
    driver.finalize(NAMESPACE, name)


@pytest.mark.parametrize("when", ["OnFailure", "OnSuccess"])
def test_when_is_honoured_for_a_failing_job(
    driver: Driver, cluster: Cluster, name: str, tmp_path: Path, when: str,
) -> None:
    start(driver, cluster, name, "#!/bin/bash\necho partial > partial.txt\nexit 3\n",
          outputs=[{"path": "partial.txt", "when": when,
                    "persistentVolumeClaim": {"claimName": "results"}}])
    obj = drive(driver, name, {"results": tmp_path}, until={"Failed", "Succeeded"})
    status = obj["status"]
    assert status["phase"] == "Failed" and status["reason"] == "NonZeroExitCode", status
    if when == "OnFailure":
        assert (tmp_path / "partial.txt").read_text() == "partial\n"
        assert status["outputs"]["phase"] == "Done"
    else:
        assert not (tmp_path / "partial.txt").exists() and "outputs" not in status
    driver.finalize(NAMESPACE, name)


def test_a_mover_killed_mid_copy_and_run_again_leaves_the_same_objects(
    driver: Driver, cluster: Cluster, object_store: ObjectStore, name: str, tmp_path: Path,
) -> None:
    s3 = client(object_store)
    results_bucket = bucket(s3, "hpcbridge-results")
    driver.apply_secret(object_store.secret(f"{name}-s3"))
    batchjob = start(driver, cluster, name,
                     "#!/bin/bash\nhead -c 300000000 /dev/urandom > big.bin\n",
                     storage={"s3": {"endpoint": object_store.endpoint,
                                     "secretRef": {"name": f"{name}-s3"}}},
                     outputs=[{"path": "big.bin", "s3": {"bucket": results_bucket,
                                                         "prefix": f"{name}/"}},
                              {"path": "big.bin",
                               "persistentVolumeClaim": {"claimName": "results"}}])
    obj = driver.run_until(NAMESPACE, name, lambda o: (o.get("status") or {}).get(
        "reason") == "CollectingOutputs", timeout=300)
    del obj
    (pod,) = [p for p in driver.pods_of(NAMESPACE, name)
              if p["metadata"]["name"] == f"{name}-outputs"]
    assert run_mover(driver, pod, {"results": tmp_path}, kill_after=2.0).code != 0
    assert not (tmp_path / "big.bin").exists()
    obj = drive(driver, name, {"results": tmp_path}, until={"Succeeded", "Failed"})
    assert obj["status"]["phase"] == "Succeeded", obj["status"]
    source = (cluster.remote_root(batchjob) / "attempt-1" / "big.bin").read_bytes()
    assert s3.get_object(results_bucket, f"{name}/big.bin").read() == source
    assert (tmp_path / "big.bin").read_bytes() == source
    assert [p.name for p in tmp_path.iterdir()] == ["big.bin"]
    driver.finalize(NAMESPACE, name)


def test_a_movers_memory_does_not_grow_with_the_size(
    driver: Driver, cluster: Cluster, object_store: ObjectStore, name: str, tmp_path: Path,
) -> None:
    """Outputs of 64 MiB and of 512 MiB, each to S3 and to a claim by a run of its own: the
    larger run's peak RSS is the smaller one's, within 16 MiB, and within the movers' bound."""
    s3 = client(object_store)
    results_bucket = bucket(s3, "hpcbridge-results")
    driver.apply_secret(object_store.secret(f"{name}-s3"))
    start(driver, cluster, name, "#!/bin/bash\nhead -c 64M /dev/urandom > m64.bin\n"
          "head -c 512M /dev/urandom > m512.bin\n",
          storage={"s3": {"endpoint": object_store.endpoint, "secretRef": {"name": f"{name}-s3"}}},
          outputs=[{"path": "m*.bin", "s3": {"bucket": results_bucket, "prefix": f"{name}/"}},
                   {"path": "m*.bin", "persistentVolumeClaim": {"claimName": "results"}}])
    driver.run_until(NAMESPACE, name, lambda o: (o.get("status") or {}).get(
        "reason") == "CollectingOutputs", timeout=300)
    (pod,) = [p for p in driver.pods_of(NAMESPACE, name)
              if p["metadata"]["name"] == f"{name}-outputs"]
    peaks = {}
    for size in (64, 512):
        one = copy.deepcopy(pod)
        (container,) = one["spec"]["containers"]
        container["args"] = [a.replace("m*.bin", f"m{size}.bin") for a in container["args"]]
        ran = run_mover(driver, one, {"results": tmp_path})
        assert ran.code == 0
        assert (tmp_path / f"m{size}.bin").stat().st_size == size * 2**20
        peaks[size] = ran.peak_rss
    try:
        assert 0 < peaks[512] <= peaks[64] + 16 * 2**20, peaks
        assert peaks[512] <= PEAK_MEMORY, peaks
    finally:
        for size in (64, 512):
            s3.remove_object(results_bucket, f"{name}/m{size}.bin")
        driver.finalize(NAMESPACE, name)


def test_collected_files_keep_their_mode_never_wider_than_0644(
    driver: Driver, cluster: Cluster, name: str, tmp_path: Path,
) -> None:
    """A secret the job leaves readable by its user alone stays so in the claim; nothing lands
    executable, group- or world-writable, set-id or sticky."""
    script = """#!/bin/bash
set -e
mkdir -p out
echo secret > out/secret.key && chmod 600 out/secret.key
echo group > out/group.txt && chmod 640 out/group.txt
printf '#!/bin/sh\\ntrue\\n' > out/tool.sh && chmod 755 out/tool.sh
echo setuid > out/setuid && chmod 4755 out/setuid
echo shared > out/shared && chmod 2775 out/shared
echo open > out/open && chmod 777 out/open
"""
    batchjob = start(driver, cluster, name, script, outputs=[
        {"path": "out/*", "persistentVolumeClaim": {"claimName": "results", "subPath": "run"}}])
    status = drive(driver, name, {"results": tmp_path}, until={"Succeeded", "Failed"})["status"]
    assert status["phase"] == "Succeeded" and status["outputs"]["files"] == 6, status
    attempt = cluster.remote_root(batchjob) / "attempt-1" / "out"
    expected = {"secret.key": (0o600, 0o600), "group.txt": (0o640, 0o640),
                "tool.sh": (0o755, 0o644), "setuid": (0o4755, 0o644),
                "shared": (0o2775, 0o644), "open": (0o777, 0o644)}
    for file_name, (source, landed) in expected.items():
        assert stat.S_IMODE((attempt / file_name).stat().st_mode) == source, file_name
        mode = (tmp_path / "run/out" / file_name).stat().st_mode
        assert stat.S_IMODE(mode) == landed, (file_name, oct(mode))
        assert not mode & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX)
    driver.finalize(NAMESPACE, name)


@pytest.mark.parametrize(("endpoint", "said"), [
    ("http://169.254.169.254", "the link-local address 169.254.169.254"),
    ("http://0x7f000001:9000", "the resolver reads it as 127.0.0.1"),
    ("http://kubernetes.default.svc", "the cluster-internal name 'kubernetes.default.svc'")])
def test_an_inward_endpoint_is_refused_and_nothing_is_fetched(
    driver: Driver, cluster: Cluster, object_store: ObjectStore, name: str, endpoint: str,
    said: str,
) -> None:
    """The cloud metadata service, loopback in another spelling, a Service of the cluster:
    ``InvalidSpec`` naming the field, no mover Pod, nothing on the cluster."""
    driver.apply_secret(object_store.secret(f"{name}-s3"))
    batchjob = start(driver, cluster, name, "#!/bin/bash\ncat creds\n",
                     storage={"s3": {"endpoint": endpoint, "secretRef": {"name": f"{name}-s3"}}},
                     inputs=[{"s3": {"bucket": "latest", "key": "meta-data/iam"},
                              "path": "creds"}])
    status = driver.sync(NAMESPACE, name)["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "InvalidSpec"), status
    assert status["message"].startswith("spec.storage.s3.endpoint"), status
    assert said in status["message"], status
    assert driver.pods_of(NAMESPACE, name) == [] and not status.get("jobIDs")
    assert not cluster.remote_root(batchjob).exists()
    driver.finalize(NAMESPACE, name)


def test_a_store_name_that_resolves_to_loopback_is_refused_by_the_mover(
    driver: Driver, cluster: Cluster, object_store: ObjectStore, name: str,
) -> None:
    """A name the hooks accepted that resolves to 127.0.0.1 when the mover runs (a record that
    points inward, or DNS rebinding): the mover checks the address it is connected to, refuses
    it before any request, and the BatchJob waits with ``StorageAccessDenied``, naming the
    endpoint and the address; nothing is staged, nothing submitted. ``localhost`` stands for
    such a name (it resolves to 127.0.0.1 on every machine; the hooks refuse it by name), put
    into the inputs mover's args as such an answer would be met, without the allowance the
    hooks give the listed store."""
    s3 = client(object_store)
    data_bucket = bucket(s3)
    put(s3, data_bucket, f"{name}/params.json", b"params\n")
    driver.apply_secret(object_store.secret(f"{name}-s3"))
    batchjob = start(driver, cluster, name, "#!/bin/bash\ncat params.json\n",
                     storage={"s3": {"endpoint": object_store.endpoint,
                                     "secretRef": {"name": f"{name}-s3"}}},
                     inputs=[{"s3": {"bucket": data_bucket, "key": f"{name}/params.json"},
                              "path": "params.json"}])
    driver.sync(NAMESPACE, name)
    (pod,) = [p for p in driver.pods_of(NAMESPACE, name)
              if p["metadata"]["name"] == f"{name}-inputs"]
    (container,) = pod["spec"]["containers"]
    assert f"--endpoint={object_store.endpoint}" in container["args"]
    assert "--endpoint-allowed" in container["args"]  # the hooks allow the listed store
    port = object_store.endpoint.rpartition(":")[2]
    inward = f"http://localhost:{port}"
    rebound = copy.deepcopy(pod)
    rebound["spec"]["containers"][0]["args"] = [
        f"--endpoint={inward}" if a.startswith("--endpoint=") else a
        for a in container["args"] if a != "--endpoint-allowed"]
    assert run_mover(driver, rebound, {}).code != 0
    pod["status"] = rebound["status"]
    status = driver.sync(NAMESPACE, name)["status"]
    assert (status["phase"], status["reason"]) == ("Pending", "StorageAccessDenied"), status
    assert inward in status["message"] and "127.0.0.1" in status["message"], status
    assert "Traceback" not in status["message"]
    assert not status.get("jobIDs")
    staged = [p for p in cluster.remote_root(batchjob).rglob("*") if p.is_file()]
    assert staged == [], staged
    driver.finalize(NAMESPACE, name)
