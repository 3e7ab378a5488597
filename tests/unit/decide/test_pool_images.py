"""An image that an HTCondor pool runs itself (``container_image``) through whole sync calls:
asked of the pool only once the image is ready, and only where the script would add nothing
(no mounts, no site flags); a SIF file of the site's cache then runs in a container universe
job; a BatchCluster without runtimes of its own gets its pool's, which pulls the image by
digest itself, or ends the attempt ``InvalidSpec`` naming the BatchCluster when the pool
advertises none."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from hooks.core.decide.effects import (
    PrepareImage,
    ProbeContainers,
    ResolveImage,
    Submit,
    Trouble,
)
from hooks.core.runtimes.wrapper import SCRIPT
from hooks.core.values.image import PoolContainers, Prepared, PreparedImage
from hooks.core.values.reasons import Reason
from hooks.core.wire.request import NAMESPACE_GROUP, SITE_GROUP
from tests.static.kube import REPO, load_all
from tests.unit.builders import DOWN, SUBMITTED, Loop, request
from tests.unit.decide.test_images import CONFIG, DIGEST, RESOLVED
from tests.unit.sites.test_batchcluster import NAMESPACE, SITE, named

SIF = f"/scratch/images/hpcuser/apptainer/sha256-{'ab' * 32}.sif"
READY = PreparedImage(Prepared.READY, DIGEST, SIF, CONFIG)
BOTH = PoolContainers(sif=True, docker=True)
IMAGE = "registry.example.org/lab/sim:2.1"
CONDOR_SITE: dict[str, Any] = copy.deepcopy(SITE)
CONDOR_SITE["spec"].update(backend="htcondor", defaults={"resources": {"cpus": 1}},
                           limits={"maxCpus": 64})


def direct(backend: str = "htcondor", **container: Any) -> Loop:
    """A BatchJob that names its HTCondor login node itself (Apptainer by default)."""
    body = request({"backend": backend,
                    "container": {"image": IMAGE, "args": ["--steps", "5"], **container}})
    del body["parent"]["spec"]["script"]
    body["parent"]["spec"]["cluster"]["workDir"] = "/home/u/hpcbridge"
    return Loop(body)


def on_site(**container: Any) -> Loop:
    """A BatchJob on an HTCondor BatchCluster that lists no container runtime."""
    body = request(None)
    body["parent"]["spec"] = named(container={"image": IMAGE, **container})
    del body["parent"]["spec"]["script"]
    body["related"][SITE_GROUP] = {"hpc-a": CONDOR_SITE}
    body["related"][NAMESPACE_GROUP] = {"research": NAMESPACE}
    return Loop(body)


def results(support: Any = BOTH, more: dict[type, Any] | None = None) -> dict[type, Any]:
    return {ResolveImage: RESOLVED, PrepareImage: READY, ProbeContainers: support, **SUBMITTED,
            **(more or {})}


def test_a_cached_sif_runs_with_the_pools_own_runtime_where_it_advertises_one() -> None:
    run = direct().sync(results())
    assert run.kinds == ["ResolveImage", "PrepareImage", "ProbeContainers", "Submit", "Track"]
    job = run.action(Submit).job
    assert job.pool_image == SIF
    script = job.spec.script
    assert "apptainer" not in script and script.endswith("exec /bin/echo --steps 5\n")
    assert run.status["image"] == {"reference": IMAGE, "runtime": "apptainer", "digest": DIGEST}


def test_a_pool_without_sif_support_gets_the_script_that_runs_the_runtime() -> None:
    run = direct().sync(results(PoolContainers(docker=True)))
    job = run.action(Submit).job
    assert job.pool_image == "" and "apptainer run" in job.spec.script


@pytest.mark.parametrize("backend, container", [
    ("slurm", {}),
    ("htcondor", {"runtime": "podman"}),
    ("htcondor", {"image": "/home/u/hpcbridge/images/sim.sif"}),
])
def test_the_pool_is_not_asked_where_it_could_not_run_the_image(
        backend: str, container: dict[str, Any]) -> None:
    run = direct(backend, **container).sync(results())
    assert "ProbeContainers" not in run.kinds
    assert run.action(Submit).job.pool_image == ""


def test_without_a_known_program_the_script_runs_the_image() -> None:
    unknown = PreparedImage(Prepared.READY, DIGEST, SIF, None)
    run = direct().sync(results(more={PrepareImage: unknown}))
    assert "ProbeContainers" not in run.kinds


def test_the_batchjobs_script_runs_inside_the_image_beside_the_pools_program() -> None:
    loop = direct()
    loop.body["parent"]["spec"]["script"] = "#!/bin/sh\necho inside\n"
    job = loop.sync(results()).action(Submit).job
    assert {item.path for item in job.inputs} == {SCRIPT}
    assert f'"$d/{SCRIPT}"' in job.spec.script and job.pool_image == SIF


def test_a_pool_that_cannot_be_asked_keeps_the_attempt_waiting_unsent() -> None:
    run = direct().sync(results(DOWN))
    assert "Submit" not in run.kinds
    assert (run.status["phase"], run.status["reason"]) == ("Pending", "ClusterUnreachable")


def test_a_site_without_runtimes_runs_a_public_image_pulled_by_the_pool_by_digest() -> None:
    run = on_site().sync(results())
    assert run.kinds == ["ProbeContainers", "ResolveImage", "Submit", "Track"]
    assert run.action(ResolveImage).credentials is None
    job = run.action(Submit).job
    assert job.pool_image == f"docker://registry.example.org/lab/sim@{DIGEST}"
    assert run.status["image"] == {"reference": IMAGE, "runtime": "htcondor", "digest": DIGEST}


def test_a_site_without_runtimes_whose_pool_advertises_none_refuses_naming_it() -> None:
    run = on_site().sync(results(PoolContainers(sif=True)))
    assert run.kinds == ["ProbeContainers"]
    assert (run.status["phase"], run.status["reason"]) == ("Failed", "InvalidSpec")
    assert run.status["message"].startswith("spec.container cannot run on BatchCluster hpc-a")
    assert "HasDockerURL" in run.status["message"]


def test_a_registry_that_refuses_the_pools_image_backs_off() -> None:
    refused = Trouble(Reason.IMAGE_PULL_BACKOFF, "Registry registry.example.org: not found.")
    run = on_site().sync(results(more={ResolveImage: refused}))
    assert (run.status["reason"], run.kinds) == ("ImagePullBackOff", ["ProbeContainers",
                                                                        "ResolveImage"])


@pytest.mark.parametrize("container, words", [
    ({"runtime": "apptainer"}, "spec.container.runtime 'apptainer' is not offered"),
    ({"image": "oras://registry.example.org/lab/sif:1"}, "must be a docker:// reference"),
    ({"imagePullSecrets": [{"name": "regcred"}]}, "imagePullSecrets cannot be used"),
    ({"imagePullPolicy": "Never"}, "imagePullPolicy Never needs an image cache"),
    ({"mounts": [{"hostPath": "/scratch", "mountPath": "/s"}]}, "mounts cannot be bound"),
])
def test_what_the_pools_own_runtime_cannot_do_is_invalid_before_anything_is_asked(
        container: dict[str, Any], words: str) -> None:
    run = on_site(**container).sync(results())
    assert run.kinds == []
    assert (run.status["phase"], run.status["reason"]) == ("Failed", "InvalidSpec")
    assert words in run.status["message"] and "BatchCluster hpc-a" in run.status["message"]


def test_a_slurm_site_without_runtimes_still_refuses_every_container() -> None:
    loop = on_site()
    loop.body["related"][SITE_GROUP] = {"hpc-a": SITE}
    run = loop.sync(results())
    assert run.kinds == [] and run.status["reason"] == "InvalidSpec"
    assert "offers no container runtime" in run.status["message"]


def test_the_examples_batchjob_runs_with_its_pools_own_runtime() -> None:
    site, batchjob = load_all(REPO / "examples/sites/container-pool-htcondor.yaml")
    body = request(None)
    body["parent"]["spec"] = batchjob["spec"]
    body["related"][SITE_GROUP] = {site["metadata"]["name"]: site}
    body["related"][NAMESPACE_GROUP] = {"research": {
        **NAMESPACE, "metadata": {"name": "research",
                                  "labels": {"hpc.example.org/htc-c": "enabled"}}}}
    body["related"]["Secret.v1"]["htc-login"] = body["related"]["Secret.v1"]["login"]
    job = Loop(body).sync(results()).action(Submit).job
    assert job.pool_image == f"docker://docker.io/ncbi/blast@{DIGEST}"
    assert job.spec.script.endswith("exec blastn -version\n")
