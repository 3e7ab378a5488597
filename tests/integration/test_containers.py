"""Containers on both real test clusters, with rootless Podman and Charliecloud as the cluster's
user, from the real registries on loopback (one public, one behind a login): an image's own
entrypoint, a command with arguments and the BatchJob's script inside the image, a private image
without and then with its Secret, two BatchJobs racing for one uncached image (one pull),
``Always`` against a re-pushed tag, a job that fails inside its container, ``Never`` with
nothing cached. The registry's password reaches no command the cluster's sshd recorded and is
gone from the attempt's files after the pull."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.driver import Driver
from tests.integration.conftest import NAMESPACE, REPO, Cluster, read_env, unavailable

LABEL = "hpc.example.org/containers"
REGISTRY_STATE = "/var/tmp/hpcbridge-registry"


@dataclass(frozen=True)
class Registry:
    """The registries of tests/clusters/registry-up.sh and their images."""

    public: str
    private: str
    user: str
    password: str = field(repr=False)
    images: dict[str, str] = field(default_factory=dict)

    def push(self, reference: str, *args: str) -> str:
        """Push a fresh image to ``reference``; its manifest digest."""
        done = subprocess.run(["bash", str(REPO / "tests/clusters/registry-push.sh"),
                               reference, *args], capture_output=True, text=True, check=True,
                              timeout=120)
        return done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="session")
def registry() -> Registry:
    state = Path(os.environ.get("HPCBRIDGE_REGISTRY_STATE", REGISTRY_STATE))
    if not (state / "env").exists():
        unavailable(f"the test registry is not up (no {state}/env): run make test as root, or "
                    "tests/clusters/registry-up.sh and runtimes-up.sh")
    env = read_env(state / "env")
    images = {key: value for key, value in env.items() if key.startswith("IMAGE_")}
    return Registry(env["REGISTRY"], env["PRIVATE_REGISTRY"], env["REGISTRY_USER"],
                    env["REGISTRY_PASSWORD"], images)


@pytest.fixture
def driver(hook_server: str) -> Driver:
    """Metacontroller with hook version v2, which hands a BatchJob its BatchCluster."""
    return Driver(hook_server, hook_version="v2")


@pytest.fixture(params=["podman", "charliecloud"])
def runtime(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def cache(cluster: Cluster) -> str:
    return f"{cluster.scratch}/images"


def site(driver: Driver, cluster: Cluster, registry: Registry, name: str) -> None:
    """The Namespace, a BatchCluster ``name`` for ``cluster`` offering both runtimes from the
    test registries, and the login."""
    driver.apply_cluster_scoped({"apiVersion": "v1", "kind": "Namespace",
                                 "metadata": {"name": NAMESPACE, "labels": {LABEL: "on"}}})
    driver.apply_cluster_scoped({
        "apiVersion": "hpcbridge.io/v1alpha1", "kind": "BatchCluster",
        "metadata": {"name": name},
        "spec": {
            "backend": cluster.backend, "host": cluster.host, "port": cluster.port,
            "knownHosts": cluster.known_hosts,
            "namespaceSelector": {"matchLabels": {LABEL: "on"}},
            "defaults": {"resources": {"timeLimit": "10m", "memory": "200Mi", "cpus": 1}},
            "containers": {"runtimes": ["podman", "charliecloud"], "imageCache": cache(cluster),
                           "allowedRegistries": [registry.public, registry.private],
                           "allowedHostPaths": [cluster.scratch]},
        },
    })
    driver.apply_secret(cluster.secret(f"{name}-login", known_hosts=None))


def batchjob(name: str, container: dict[str, Any], *, on: str = "", **spec: Any
             ) -> dict[str, Any]:
    """A BatchJob ``name`` running ``container`` through the BatchCluster ``on`` (default: the
    one of its own name), with that BatchCluster's login."""
    site_name = on or name
    return {"apiVersion": "hpcbridge.io/v1alpha1", "kind": "BatchJob",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"cluster": {"name": site_name, "secretRef": {"name": f"{site_name}-login"}},
                     "container": container, **spec}}


def output(driver: Driver, name: str) -> str:
    """What the log Pod prints (after a sync, which has it follow the current attempt)."""
    driver.sync(NAMESPACE, name)
    (pod,) = [p for p in driver.pods_of(NAMESPACE, name)
              if p["metadata"]["labels"]["app.kubernetes.io/component"] == "logs"]
    done = driver.run_pod(pod)
    return done.stdout


def finished(driver: Driver, name: str) -> dict[str, Any]:
    obj = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed", timeout=300)
    status: dict[str, Any] = obj["status"]
    return status


def pull_logs(root: Path) -> str:
    """What the pulls of a BatchJob's attempts printed."""
    return "".join(log.read_text() for log in sorted(root.glob("image-*/pull.log")))


def test_an_image_runs_its_own_entrypoint(driver: Driver, cluster: Cluster, registry: Registry,
                                          runtime: str, name: str) -> None:
    site(driver, cluster, registry, name)
    obj = driver.create(batchjob(name, {"image": registry.images["IMAGE_HELLO"],
                                        "runtime": runtime}))
    status = finished(driver, name)
    assert status["phase"] == "Succeeded", status
    assert status["image"] == {"reference": registry.images["IMAGE_HELLO"], "runtime": runtime,
                               "digest": registry.images["IMAGE_HELLO_DIGEST"]}
    assert "hello from the image" in output(driver, name)
    root = cluster.remote_root(obj)
    assert not list(root.glob("image-*/auth")), "the login outlived the pull"


def test_a_command_and_a_script_run_inside_the_image_with_env_and_files(
        driver: Driver, cluster: Cluster, registry: Registry, runtime: str, name: str) -> None:
    site(driver, cluster, registry, name)
    command = {"image": registry.images["IMAGE_TOOLS"], "runtime": runtime,
               "command": ["/bin/sh", "-c", 'echo "$1 $GREETING $MODE"; cat conf/in.txt > out.txt',
                           "argv0", "first arg; $(not run)"]}
    driver.apply_config_map({"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": f"{name}-in", "namespace": NAMESPACE},
                             "data": {"in.txt": "input through the image\n"}})
    obj = driver.create(batchjob(name, command, env=[{"name": "MODE", "value": "it's on"}],
                                 inputs=[{"configMap": {"name": f"{name}-in"}, "path": "conf"}]))
    status = finished(driver, name)
    assert status["phase"] == "Succeeded", status
    printed = output(driver, name)
    assert "first arg; $(not run) hi it's on" in printed, printed
    (attempt,) = cluster.remote_root(obj).glob("attempt-1")
    assert (attempt / "out.txt").read_text() == "input through the image\n"
    scripted = f"{name}-b"
    driver.create(batchjob(scripted, {"image": registry.images["IMAGE_TOOLS"],
                                      "runtime": runtime, "args": ["one", "two"]}, on=name,
                           script="#!/bin/sh\necho \"inside: $(cat /etc/hostname 2>/dev/null"
                                  " || true) args $*\"\nexit 3\n"))
    status = finished(driver, scripted)
    assert (status["phase"], status["reason"], status.get("exitCode")) == (
        "Failed", "NonZeroExitCode", 3), status
    assert "args one two" in output(driver, scripted)


def test_a_private_image_waits_for_its_secret_which_never_reaches_a_command_line(
        driver: Driver, cluster: Cluster, registry: Registry, name: str) -> None:
    site(driver, cluster, registry, name)
    reference = f"{registry.private}/lab/secret:{uuid.uuid4().hex[:8]}"
    registry.push(reference, "--entrypoint", '["/bin/echo", "hello from the private image"]')
    before = len(cluster.commands())
    obj = driver.create(batchjob(name, {"image": reference,
                                        "runtime": "podman",
                                        "imagePullSecrets": [{"name": f"{name}-reg"}]}))
    waiting = driver.run_to_phase(NAMESPACE, name, "Pending", timeout=60)["status"]
    assert waiting["reason"] == "SecretNotFound", waiting
    wrong = {"auths": {registry.private: {"username": registry.user, "password": "wrong"}}}
    driver.apply_secret(pull_secret(f"{name}-reg", wrong))
    driver.run_until(NAMESPACE, name, lambda o: o["status"].get("reason") == "ImagePullBackOff",
                     timeout=60)
    message = driver.get(NAMESPACE, name)["status"]["message"]
    assert "refused the credentials" in message and "tried again in" in message, message
    right = {"auths": {registry.private: {"auth": base64.b64encode(
        f"{registry.user}:{registry.password}".encode()).decode()}}}
    driver.apply_secret(pull_secret(f"{name}-reg", right))
    status = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed", timeout=300)["status"]
    assert status["phase"] == "Succeeded", status
    assert "hello from the private image" in output(driver, name)
    recorded = "\n".join(cluster.commands()[before:])
    encoded = base64.b64encode(f"{registry.user}:{registry.password}".encode()).decode()
    assert registry.password not in recorded and encoded not in recorded
    for path in cluster.remote_root(obj).rglob("*"):
        if path.is_file():
            text = path.read_bytes()
            assert registry.password.encode() not in text and encoded.encode() not in text, path


def pull_secret(name: str, config: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "data": {".dockerconfigjson": base64.b64encode(json.dumps(config).encode()).decode()}}


def test_two_batchjobs_racing_for_one_uncached_image_pull_it_once(
        driver: Driver, cluster: Cluster, registry: Registry, runtime: str, name: str) -> None:
    site(driver, cluster, registry, name)
    reference = f"{registry.public}/lab/race:{uuid.uuid4().hex[:8]}"
    digest = registry.push(reference, "--entrypoint", '["/bin/echo", "raced"]')
    second = f"{name}-b"
    first_obj = driver.create(batchjob(name, {"image": reference, "runtime": runtime}))
    second_obj = driver.create(batchjob(second, {"image": reference, "runtime": runtime},
                                        on=name))
    driver.sync(NAMESPACE, name)
    driver.sync(NAMESPACE, second)
    for each in (name, second):
        status = finished(driver, each)
        assert status["phase"] == "Succeeded" and status["image"]["digest"] == digest, status
        assert "raced" in output(driver, each)
    logs = pull_logs(cluster.remote_root(first_obj)) + pull_logs(
        cluster.remote_root(second_obj))
    assert logs.count("hpcbridge: pulling") == 1, logs


def test_always_follows_a_re_pushed_tag_and_never_uses_the_cache_alone(
        driver: Driver, cluster: Cluster, registry: Registry, name: str) -> None:
    site(driver, cluster, registry, name)
    reference = f"{registry.public}/lab/moving:{uuid.uuid4().hex[:8]}"
    never = f"{name}-c"
    driver.create(batchjob(never, {"image": reference, "runtime": "podman",
                                   "imagePullPolicy": "Never"}, on=name))
    status = finished(driver, never)
    assert (status["phase"], status["reason"]) == ("Failed", "ErrImageNeverPull"), status
    first = registry.push(reference, "--entrypoint", '["/bin/echo", "first"]')
    driver.create(batchjob(name, {"image": reference, "runtime": "podman",
                                  "imagePullPolicy": "Always"}))
    status = finished(driver, name)
    assert status["image"]["digest"] == first and "first" in output(driver, name)
    second = registry.push(reference, "--entrypoint", '["/bin/echo", "second"]')
    assert second != first
    driver.update_spec(NAMESPACE, name, lambda spec: spec.update(backoffLimit=1))
    driver.run_until(NAMESPACE, name, lambda o: o["status"].get("attempt") == 2 and o[
        "status"]["phase"] in ("Succeeded", "Failed"), timeout=300)
    status = driver.get(NAMESPACE, name)["status"]
    assert status["phase"] == "Succeeded" and status["image"]["digest"] == second, status
    assert "second" in output(driver, name)


@pytest.fixture(autouse=True)
def _clean(driver: Driver) -> Iterator[None]:
    yield
    for namespace, each in list(driver.batchjobs):
        driver.finalize(namespace, each)
