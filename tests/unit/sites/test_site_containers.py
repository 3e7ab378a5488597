"""A BatchCluster's ``spec.containers`` applied to a BatchJob's ``spec.container``: the runtime,
the cache and the flags the site decides, and the refusals, each naming the field and the
BatchCluster, before anything reaches the cluster."""

from __future__ import annotations

from typing import Any

import pytest

from hooks.core.values.reasons import Reason
from tests.unit.conftest import raw_spec
from tests.unit.sites.test_batchcluster import named, routed, site_with

CONTAINERS = {
    "runtimes": ["apptainer", "podman"], "default": "apptainer",
    "imageCache": "/scratch/hpcbridge/images",
    "allowedRegistries": ["registry.example.org"],
    "allowedHostPaths": ["/scratch", "/software"],
    "runtimeArgs": {"apptainer": ["--containall", "--cleanenv"]},
}
SITE = site_with(containers=CONTAINERS)


def with_container(**fields: Any) -> dict[str, Any]:
    return named(container={"image": "registry.example.org/lab/sim:2.1", **fields})


def test_the_site_decides_the_runtime_the_cache_and_the_flags() -> None:
    container = routed(with_container(), SITE).spec.container
    assert container.runtime == "apptainer"
    assert container.image_cache == "/scratch/hpcbridge/images"
    assert container.runtime_args == ("--containall", "--cleanenv")
    assert container.allowed_registries == ("registry.example.org",)
    podman = routed(with_container(runtime="podman"), SITE).spec.container
    assert (podman.runtime, podman.runtime_args) == ("podman", ())


def test_mounts_below_allowed_host_paths_are_kept() -> None:
    spec = routed(with_container(mounts=[{"hostPath": "/scratch/lab", "mountPath": "/data"}]),
                  SITE).spec
    assert spec.container.mounts[0].host_path == "/scratch/lab"


@pytest.mark.parametrize("fields, site, words", [
    ({"runtime": "charliecloud"}, SITE, ["spec.container.runtime", "hpc-a", "apptainer, podman"]),
    ({"image": "docker.io/library/python:3"}, SITE,
     ["spec.container.image's registry docker.io", "hpc-a"]),
    ({"mounts": [{"hostPath": "/etc", "mountPath": "/etc"}]}, SITE,
     ["spec.container.mounts[0].hostPath /etc", "hpc-a"]),
    ({"mounts": [{"hostPath": "/scratchy", "mountPath": "/s"}]}, SITE,
     ["spec.container.mounts[0].hostPath"]),
    ({"image": "/etc/shadow"}, SITE, ["spec.container.image /etc/shadow", "hpc-a"]),
    ({"image": "oras://registry.example.org/lab/sif:1", "runtime": "podman"}, SITE,
     ["oras://", "podman cannot pull"]),
    ({}, site_with(containers={**CONTAINERS, "allowedRegistries": []}),
     ["none, only image files"]),
    ({}, SITE | {}, []),
])
def test_what_the_site_does_not_allow_is_invalid(fields: dict[str, Any], site: dict[str, Any],
                                                words: list[str]) -> None:
    parsed = routed(with_container(**fields), site)
    if not words:
        assert parsed.spec is not None
        return
    assert parsed.spec is None and parsed.reason is Reason.INVALID_SPEC
    for word in words:
        assert word in parsed.error, parsed.error


def test_a_site_without_runtimes_refuses_a_container_naming_itself() -> None:
    parsed = routed(with_container())
    assert parsed.spec is None
    assert parsed.error.startswith("spec.container is set, but BatchCluster hpc-a offers no")


@pytest.mark.parametrize("containers, field", [
    ({"runtimes": []}, "spec.containers.runtimes"),
    ({"runtimes": ["docker"], "imageCache": "/c"}, "spec.containers.runtimes"),
    ({"runtimes": [["podman"]], "imageCache": "/c"}, "spec.containers.runtimes"),
    ({"runtimes": [{}], "imageCache": "/c"}, "spec.containers.runtimes"),
    ({"runtimes": ["podman"]}, "spec.containers.imageCache"),
    ({"runtimes": ["podman"], "default": "apptainer", "imageCache": "/c"},
     "spec.containers.default"),
    ({"runtimes": ["podman"], "imageCache": "/c", "allowedRegistries": ["a b"]},
     "spec.containers.allowedRegistries"),
    ({"runtimes": ["podman"], "imageCache": "/c", "allowedHostPaths": ["rel"]},
     "spec.containers.allowedHostPaths[]"),
    ({"runtimes": ["podman"], "imageCache": "/c", "runtimeArgs": {"podman": ["x"]}},
     "spec.containers.runtimeArgs.podman"),
    ({"runtimes": ["podman"], "imageCache": "/c", "runtimeArgs": {"apptainer": ["--x"]}},
     "spec.containers.runtimeArgs.apptainer"),
])
def test_an_invalid_containers_block_makes_the_batchcluster_invalid(
        containers: dict[str, Any], field: str) -> None:
    parsed = routed(with_container(), site_with(containers=containers))
    assert parsed.reason is Reason.INVALID_BATCH_CLUSTER
    assert field in parsed.error, parsed.error


def test_a_route_of_its_own_runs_apptainer_from_its_work_dir() -> None:
    raw = raw_spec(container={"image": "ghcr.io/org/tool:1"})
    container = routed(raw, None).spec.container
    assert (container.runtime, container.image_cache) == ("apptainer", ".hpcbridge/images")
    refused = routed(raw_spec(container={"image": "ghcr.io/org/tool:1",
                                         "mounts": [{"hostPath": "/s", "mountPath": "/s"}]}),
                     None)
    assert refused.spec is None and "none" in refused.error
