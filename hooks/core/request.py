"""Metacontroller requests: the one place that knows the wire shapes.

CompositeController hooks send ``parent``/``children``; DecoratorController hooks send
``object``/``attachments``. Hook version v1 keys children and related objects by bare name,
v2 by ``namespace/name``. Both arrive here and leave as one ``HookRequest``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

POD_GROUP = "Pod.v1"
SECRET_GROUP = "Secret.v1"


class BadHookRequest(ValueError):
    """The body is not a Metacontroller request; answered with a JSON 400."""


@dataclass(frozen=True, slots=True)
class HookRequest:
    shape: Literal["composite", "decorator"]
    parent: Mapping[str, Any]
    pods: Mapping[str, Mapping[str, Any]]
    secrets: Mapping[str, Mapping[str, Any]]
    finalizing: bool

    @property
    def metadata(self) -> Mapping[str, Any]:
        metadata: Mapping[str, Any] = self.parent["metadata"]
        return metadata

    @property
    def name(self) -> str:
        return str(self.metadata["name"])

    @property
    def namespace(self) -> str:
        return str(self.metadata["namespace"])

    @property
    def uid(self) -> str:
        return str(self.metadata["uid"])

    @property
    def generation(self) -> int:
        return int(self.metadata.get("generation") or 1)


def parse_sync(body: object) -> HookRequest:
    """Parse a sync or finalize request of either controller shape. Pure: no I/O."""
    if not isinstance(body, dict):
        raise BadHookRequest("the request body must be a JSON object")
    shape: Literal["composite", "decorator"] = "decorator" if "object" in body else "composite"
    parent = _parent(body, "object" if shape == "decorator" else "parent")
    namespace = str(parent["metadata"]["namespace"])
    children = body.get("attachments" if shape == "decorator" else "children") or {}
    related = body.get("related") or {}
    finalizing = body.get("finalizing", False)
    if not isinstance(finalizing, bool):
        raise BadHookRequest("'finalizing' must be true or false")
    return HookRequest(
        shape=shape,
        parent=parent,
        pods=_group(children, POD_GROUP, namespace),
        secrets=_group(related, SECRET_GROUP, namespace),
        finalizing=finalizing,
    )


def parse_customize(body: object) -> Mapping[str, Any]:
    """The parent of a customize request. Pure: no I/O."""
    if not isinstance(body, dict):
        raise BadHookRequest("the request body must be a JSON object")
    return _parent(body, "parent")


def _parent(body: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    parent = body.get(key)
    if not isinstance(parent, dict):
        raise BadHookRequest(f"the request has no '{key}' object")
    metadata = parent.get("metadata")
    if not isinstance(metadata, dict):
        raise BadHookRequest(f"'{key}' has no metadata")
    for field in ("name", "namespace", "uid"):
        if not isinstance(metadata.get(field), str) or not metadata[field]:
            raise BadHookRequest(f"'{key}.metadata.{field}' is missing")
    generation = metadata.get("generation", 1)
    if isinstance(generation, bool) or not isinstance(generation, int):
        raise BadHookRequest(f"'{key}.metadata.generation' must be an integer")
    for field in ("spec", "status"):
        if parent.get(field) is not None and not isinstance(parent[field], dict):
            raise BadHookRequest(f"'{key}.{field}' must be an object")
    return parent


def _group(
    objects: object, group: str, namespace: str
) -> Mapping[str, Mapping[str, Any]]:
    """Objects of one group keyed by bare name, whatever the hook version's key form."""
    if not isinstance(objects, dict):
        raise BadHookRequest("children and related must be objects keyed by group")
    members = objects.get(group) or {}
    if not isinstance(members, dict):
        raise BadHookRequest(f"'{group}' must be an object keyed by name")
    found: dict[str, Mapping[str, Any]] = {}
    for key, obj in members.items():
        if not isinstance(obj, dict):
            raise BadHookRequest(f"'{group}[{key}]' must be an object")
        obj_namespace, _, name = str(key).rpartition("/")
        if obj_namespace and obj_namespace != namespace:
            continue
        found[name] = obj
    return found
