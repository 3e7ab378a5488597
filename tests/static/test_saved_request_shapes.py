"""examples/requests/: each saved hook request has the shape Metacontroller sends for its
controller and hook version, with a parent the CRD accepts and the related objects the hooks'
customize answer asks for."""

from __future__ import annotations

import json

import pytest

from hooks.app import create_app
from hooks.settings import Settings
from tests.static.admission import batchjob_violations
from tests.static.kube import (
    CONTROLLER_FILES,
    EXAMPLES,
    REPO,
    controller_schema,
    load_all,
    schema_violations,
)

REQUESTS = EXAMPLES / "requests"
COMPOSITE_KEYS = ["controller", "parent", "children", "related", "finalizing"]
DECORATOR_KEYS = ["controller", "object", "attachments", "related", "finalizing"]
REQUEST_SHAPES = {  # file: (controller kind, top-level keys in wire order, hook version)
    "customize.json": ("CompositeController", ["controller", "parent"], "v1"),
    "sync-first.json": ("CompositeController", COMPOSITE_KEYS, "v1"),
    "sync-running.json": ("CompositeController", COMPOSITE_KEYS, "v1"),
    "sync-v2.json": ("CompositeController", COMPOSITE_KEYS, "v2"),
    "sync-batchcluster.json": ("CompositeController", COMPOSITE_KEYS, "v2"),
    "finalize.json": ("CompositeController", COMPOSITE_KEYS, "v1"),
    "decorator-sync.json": ("DecoratorController", DECORATOR_KEYS, "v1"),
}


def test_every_saved_request_is_checked() -> None:
    assert sorted(path.name for path in REQUESTS.iterdir()) == sorted(REQUEST_SHAPES)


@pytest.mark.parametrize(
    ("file_name", "kind", "keys", "version"),
    [pytest.param(name, *shape, id=name) for name, shape in REQUEST_SHAPES.items()],
)
def test_saved_request(file_name: str, kind: str, keys: list[str], version: str) -> None:
    body = json.loads((REQUESTS / file_name).read_text())
    assert list(body) == keys
    parent = body.get("parent") or body["object"]
    assert batchjob_violations(parent) == []
    assert body.get("finalizing", False) == ("deletionTimestamp" in parent["metadata"])

    controller = body["controller"]
    assert controller["kind"] == kind
    assert schema_violations(controller, controller_schema(kind)) == []
    (manifest,) = load_all(REPO / "metacontroller" / CONTROLLER_FILES[kind])
    for hook in manifest["spec"]["hooks"].values():
        hook["version"] = version
    assert controller["metadata"]["name"] == manifest["metadata"]["name"]
    assert controller["spec"] == manifest["spec"]


@pytest.mark.parametrize(
    ("file_name", "version"),
    [pytest.param(name, version, id=name) for name, (_, _, version) in REQUEST_SHAPES.items()],
)
def test_saved_request_object_keys(file_name: str, version: str) -> None:
    """Children, attachments and related objects are keyed as the hook version says: v1 by
    bare name (same-namespace objects only), v2 by namespace/name, and a cluster-scoped one
    (a BatchCluster, a Namespace) by its name."""
    body = json.loads((REQUESTS / file_name).read_text())
    for section in ("children", "attachments", "related"):
        for group in body.get(section, {}).values():
            for key, obj in group.items():
                name, namespace = obj["metadata"]["name"], obj["metadata"].get("namespace")
                assert namespace is not None or version == "v2", key
                assert key == (name if version == "v1" or namespace is None
                               else f"{namespace}/{name}")


RESOURCE_GROUPS = {  # customize's resource: the group its objects come under in ``related``
    ("v1", "secrets"): "Secret.v1",
    ("v1", "configmaps"): "ConfigMap.v1",
    ("v1", "namespaces"): "Namespace.v1",
    ("hpcbridge.io/v1alpha1", "batchclusters"): "BatchCluster.hpcbridge.io/v1alpha1",
}


@pytest.mark.parametrize(
    ("file_name", "version"),
    [pytest.param(name, version, id=name) for name, (_, keys, version) in REQUEST_SHAPES.items()
     if "related" in keys],
)
def test_saved_request_relates_what_customize_asks_for(file_name: str, version: str) -> None:
    """``related`` holds exactly the objects the hooks' customize answer names for the parent,
    as Metacontroller hands them over: grouped by kind, keyed as the hook version says, and
    the cluster-scoped ones (a BatchCluster and the BatchJob's Namespace) in v2 only."""
    body = json.loads((REQUESTS / file_name).read_text())
    parent = body.get("parent") or body["object"]
    client = create_app(Settings(log_image="hpcbridge:test")).test_client()
    rules = client.post("/customize", json={"controller": body["controller"],
                                           "parent": parent}).get_json()["relatedResources"]
    asked = {
        (RESOURCE_GROUPS[rule["apiVersion"], rule["resource"]],
         f"{rule['namespace']}/{name}" if "namespace" in rule and version == "v2" else name)
        for rule in rules for name in rule["names"]
        if "namespace" in rule or version == "v2"
    }
    related = {(group, key) for group, objects in body["related"].items() for key in objects}
    assert related == asked


def test_the_batchcluster_request_is_the_examples() -> None:
    """sync-batchcluster.json is the first sync of examples/sites/hello-site-slurm.yaml on the
    example BatchCluster, from a Namespace its selector selects (as the README's Quickstart
    labels it)."""
    body = json.loads((REQUESTS / "sync-batchcluster.json").read_text())
    (batchjob,) = load_all(EXAMPLES / "sites/hello-site-slurm.yaml")
    (site,) = load_all(EXAMPLES / "sites/batchcluster-slurm.yaml")
    parent, related = body["parent"], body["related"]
    assert parent["metadata"]["name"] == batchjob["metadata"]["name"]
    assert parent["spec"]["cluster"] == batchjob["spec"]["cluster"]
    handed = related["BatchCluster.hpcbridge.io/v1alpha1"][site["metadata"]["name"]]
    assert {**handed["spec"], "jump": site["spec"]["jump"]} == site["spec"]
    labels = related["Namespace.v1"][parent["metadata"]["namespace"]]["metadata"]["labels"]
    assert site["spec"]["namespaceSelector"]["matchLabels"].items() <= labels.items()
