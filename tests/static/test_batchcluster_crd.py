"""crds/batchcluster.yaml: cluster-scoped, its printer columns, every field described; the
example site and the BatchJob that names it are what the API server admits, the site vouching
for every host key of its route; the BatchJob CRD's rules for spec.cluster.name; the roles give
every user view and nobody else write."""

from __future__ import annotations

from typing import Any

import pytest

from tests.static.admission import MINIMAL_SPEC, batchjob_violations, cel_violations, crd_schema
from tests.static.kube import REPO, Object, load_all, schema_violations, to_jsonschema

EXAMPLE = REPO / "examples/sites/batchcluster-slurm.yaml"
EXAMPLE_BATCHJOB = REPO / "examples/sites/hello-site-slurm.yaml"


def batchcluster_crd() -> Object:
    (crd,) = load_all(REPO / "crds/batchcluster.yaml")
    return crd


def test_scope_names_and_printer_columns() -> None:
    crd = batchcluster_crd()
    assert crd["spec"]["scope"] == "Cluster"
    assert crd["spec"]["names"]["kind"] == "BatchCluster"
    (version,) = crd["spec"]["versions"]
    assert [(c["name"], c["jsonPath"]) for c in version["additionalPrinterColumns"]] == [
        ("BACKEND", ".spec.backend"), ("HOST", ".spec.host"),
        ("AGE", ".metadata.creationTimestamp")]


def test_every_field_has_a_description() -> None:
    def missing(schema: Object, path: str) -> list[str]:
        found = [] if path == "metadata" or schema.get("description") else [path]
        for name, sub in schema.get("properties", {}).items():
            found += missing(sub, f"{path}.{name}".lstrip("."))
        if isinstance(schema.get("items"), dict):
            for name, sub in schema["items"].get("properties", {}).items():
                found += missing(sub, f"{path}[].{name}")
        return found

    assert missing(crd_schema(batchcluster_crd()), "") == []


def test_the_example_is_admitted() -> None:
    """The example site, and the example BatchJob beside it that names it."""
    (site,) = load_all(EXAMPLE)
    assert schema_violations(site, to_jsonschema(crd_schema(batchcluster_crd()))) == []
    assert "namespace" not in site["metadata"]
    (batchjob,) = load_all(EXAMPLE_BATCHJOB)
    assert batchjob_violations(batchjob) == []
    assert batchjob["spec"]["cluster"]["name"] == site["metadata"]["name"]


def test_the_example_site_lists_the_host_key_of_every_hop() -> None:
    """Its knownHosts name the login node and each jump host (``[host]:port`` off port 22):
    the example BatchJob's Secret needs no known_hosts of its own."""
    (site,) = load_all(EXAMPLE)
    listed = {name for line in site["spec"]["knownHosts"].splitlines()
              for name in line.split()[0].split(",")}
    for hop in [*site["spec"]["jump"], site["spec"]]:
        port = hop.get("port", 22)
        assert (hop["host"] if port == 22 else f"[{hop['host']}]:{port}") in listed


@pytest.mark.parametrize(
    ("cluster", "message"),
    [
        pytest.param({"name": "a", "host": "h"}, "exactly one of name", id="both"),
        pytest.param({}, "exactly one of name", id="neither"),
        pytest.param({"name": "a", "port": 22}, "come from the BatchCluster", id="port"),
        pytest.param({"host": "h", "jumpSecretRef": {"name": "j"}}, "jumpSecretRef",
                     id="jump-secret-without-name"),
    ],
)
def test_cluster_name_rules(cluster: dict[str, Any], message: str) -> None:
    spec = {**MINIMAL_SPEC, "cluster": {"secretRef": {"name": "s"}, **cluster}}
    assert any(message in failed for failed in cel_violations(spec))


def test_backend_may_be_left_out_with_a_name_only() -> None:
    named = {"cluster": {"name": "a", "secretRef": {"name": "s"}}, "script": "#!/bin/sh\n"}
    assert cel_violations(named) == []
    direct = {"cluster": {"host": "h", "secretRef": {"name": "s"}}, "script": "#!/bin/sh\n"}
    assert any("spec.backend is required" in m for m in cel_violations(direct))


def test_every_user_views_batchclusters_and_no_default_role_writes_them() -> None:
    view, edit = load_all(REPO / "crds/batchcluster-roles.yaml")
    assert view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    assert view["rules"][0]["verbs"] == ["get", "list", "watch"]
    assert not any(key.startswith("rbac.authorization.k8s.io/aggregate")
                   for key in edit["metadata"]["labels"])
