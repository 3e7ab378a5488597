"""An image HTCondor runs itself (``container_image``), against the real test pool.

The pool's execute nodes advertise no container runtime (no Apptainer or Docker can be
installed on the test machines), so what can be shown on it is shown: the hooks ask the real
``condor_status`` and read its answer as "none"; a BatchJob with ``container`` on an HTCondor
BatchCluster that lists no runtime of its own then ends ``Failed``/``InvalidSpec`` naming the
BatchCluster, with nothing submitted; and the container universe descriptions the hooks write
for a pool that does advertise one are accepted by the pool's own ``condor_submit``, which
requires of the execute node exactly what the hooks asked the pool for (``HasSIF``,
``HasDockerURL``)."""

from __future__ import annotations

import shlex
import uuid
from dataclasses import replace

import pytest

from hooks.core.values.image import PoolContainers
from hooks.schedulers.htcondor import commands, parse
from hooks.schedulers.htcondor.description import submit_description
from tests.driver import Driver
from tests.integration.conftest import NAMESPACE, Cluster, clusters_with_key, condor
from tests.unit.conftest import job

pytestmark = pytest.mark.htcondor
LABEL = "hpc.example.org/pool-containers"
DIGEST = "sha256:" + "ab" * 32


@pytest.fixture
def driver(hook_server: str) -> Driver:
    """Metacontroller with hook version v2, which hands a BatchJob its BatchCluster."""
    return Driver(hook_server, hook_version="v2")


def test_the_pools_answer_is_read_as_no_runtime(htcondor: Cluster) -> None:
    printed = htcondor.as_user(shlex.join(commands.CONTAINER_SUPPORT))
    assert parse.container_support(printed) == PoolContainers()
    slots = condor(htcondor, "condor_status", "-startd", "-af", "Name").split()
    assert slots, "the pool has execute slots, none of which runs images"


def test_a_site_without_runtimes_on_a_pool_without_one_refuses_naming_the_batchcluster(
        driver: Driver, htcondor: Cluster, name: str) -> None:
    driver.apply_cluster_scoped({"apiVersion": "v1", "kind": "Namespace",
                                 "metadata": {"name": NAMESPACE, "labels": {LABEL: "on"}}})
    driver.apply_cluster_scoped({
        "apiVersion": "hpcbridge.io/v1alpha1", "kind": "BatchCluster",
        "metadata": {"name": name},
        "spec": {"backend": "htcondor", "host": htcondor.host, "port": htcondor.port,
                 "knownHosts": htcondor.known_hosts,
                 "namespaceSelector": {"matchLabels": {LABEL: "on"}}},
    })
    driver.apply_secret(htcondor.secret(f"{name}-login", known_hosts=None))
    before = len(htcondor.commands())
    obj = driver.create({
        "apiVersion": "hpcbridge.io/v1alpha1", "kind": "BatchJob",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"cluster": {"name": name, "secretRef": {"name": f"{name}-login"}},
                 "container": {"image": "registry.example.org/lab/sim:2.1"}},
    })
    status = driver.run_to_phase(NAMESPACE, name, "Failed", timeout=60)["status"]
    assert status["reason"] == "InvalidSpec", status
    assert status["message"].startswith(f"spec.container cannot run on BatchCluster {name}")
    asked = "\n".join(htcondor.commands()[before:])  # other tests' commands too
    assert "hpcbridge-condor-containers" in asked, "the pool was not asked"
    assert clusters_with_key(htcondor, f"{obj['metadata']['uid']}-1") == []


@pytest.mark.parametrize("image, needs", [
    (f"/srv/images/apptainer/{DIGEST.replace(':', '-')}.sif", "TARGET.HasSIF"),
    (f"docker://registry.example.org/lab/sim@{DIGEST}", "TARGET.HasDockerURL"),
])
def test_the_pools_condor_submit_takes_the_container_universe_description(
        htcondor: Cluster, image: str, needs: str) -> None:
    request = replace(job("htcondor", 1), pool_image=image)
    work = f"{htcondor.scratch}/pool-{uuid.uuid4().hex[:8]}"
    at = shlex.quote(work)
    ad = htcondor.as_user(
        f"mkdir -p {at} && cd {at} && printf '#!/bin/sh\\n' > script && cat > submit.sub && "
        f"condor_submit -dry-run - submit.sub && cd / && rm -r {at}",
        stdin=submit_description(request))
    attributes = dict(line.split("=", 1) for line in ad.splitlines() if "=" in line)
    assert attributes["JobUniverse"] == "5" and attributes["WantContainer"] == "true"
    assert attributes["ContainerImage"] == f'"{image}"'
    assert attributes["ShouldTransferFiles"] == '"YES"'
    assert "TARGET.HasContainer" in attributes["Requirements"]
    assert needs in attributes["Requirements"]
