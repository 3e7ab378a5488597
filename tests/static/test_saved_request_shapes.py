"""examples/requests/: each saved hook request has the shape Metacontroller sends for its
controller and hook version, with a parent the CRD accepts."""

from __future__ import annotations

import json

import pytest

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
    bare name (same-namespace objects), v2 by namespace/name."""
    body = json.loads((REQUESTS / file_name).read_text())
    for section in ("children", "attachments", "related"):
        for group in body.get(section, {}).values():
            for key, obj in group.items():
                name, namespace = obj["metadata"]["name"], obj["metadata"]["namespace"]
                assert key == (name if version == "v1" else f"{namespace}/{name}")
