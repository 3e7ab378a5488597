"""Kubernetes objects as the static tests read them: YAML files loaded, structural schemas as
JSON Schema, the repository's schemas/ of the Metacontroller kinds, kustomize-style field paths
and objects picked out of a rendered install by kind and name."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jsonschema
import yaml

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
CONTROLLER_SCHEMAS = Path(__file__).parent / "schemas/metacontroller-controllers.yaml"
METACONTROLLER_KINDS = {"CompositeController", "DecoratorController"}
CONTROLLER_FILES = {
    "CompositeController": "compositecontroller.yaml",
    "DecoratorController": "decoratorcontroller.yaml",
}
Object = dict[str, Any]
Render = Callable[[Path], tuple[Object, ...]]  # the conftest's render fixture


def load_all(path: Path) -> list[Object]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def without_markers(schema: Object, int_or_string: Callable[[Object], Object]) -> Object:
    """A Kubernetes structural schema without its ``x-kubernetes-*`` keys: ``int_or_string``
    rewrites each ``x-kubernetes-int-or-string`` one, and objects with declared properties admit
    no other key, as the API server's pruning and strict field validation do."""
    out = {key: value for key, value in schema.items() if not key.startswith("x-kubernetes-")}
    if schema.get("x-kubernetes-int-or-string"):
        out = int_or_string(out)
    if "properties" in schema:
        out["properties"] = {name: without_markers(sub, int_or_string)
                             for name, sub in schema["properties"].items()}
        out.setdefault("additionalProperties", False)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            out[key] = without_markers(schema[key], int_or_string)
    return out


def to_jsonschema(schema: Object) -> Object:
    """A Kubernetes structural schema as plain JSON Schema: an int-or-string is a type union."""
    return without_markers(schema, lambda out: {**out, "type": ["integer", "string"]})


STRING_KEYS = ("pattern", "format", "minLength", "maxLength")


def one_of_integer_or_string(schema: Object) -> Object:
    """OpenAPI 3.0's int-or-string: ``oneOf`` an integer or a string with the string rules."""
    string = {key: schema[key] for key in STRING_KEYS if key in schema}
    rest = {key: value for key, value in schema.items() if key not in string}
    return {**rest, "oneOf": [{"type": "integer"}, {"type": "string", **string}]}


def to_openapi(schema: Object) -> Object:
    """A Kubernetes structural schema as an OpenAPI 3.0 schema (docs/hooks-openapi.yaml's)."""
    return without_markers(schema, one_of_integer_or_string)


@functools.cache
def controller_schema(kind: str) -> Object:
    """The repository's JSON Schema of the controller fields hpcbridge uses (schemas/)."""
    (schemas,) = load_all(CONTROLLER_SCHEMAS)
    return {"$schema": schemas["$schema"], "$defs": schemas["$defs"], **schemas[kind]}


def schema_violations(instance: Object, schema: Object) -> list[str]:
    """Dotted paths of the fields a JSON schema rejects ("" for the root)."""
    validator = jsonschema.Draft202012Validator(schema)
    return sorted(
        ".".join(str(part) for part in error.absolute_path)
        for error in validator.iter_errors(instance)
    )


def locate(obj: Any, field_path: str) -> tuple[Any, str]:
    """The parent of a kustomize-style field path (``containers.[name=hooks].image``) and the
    last key."""
    *parents, last = field_path.split(".")
    for segment in parents:
        if segment.startswith("["):
            key, _, value = segment[1:-1].partition("=")
            obj = next(item for item in obj if item[key] == value)
        else:
            obj = obj[segment]
    return obj, last


def field(obj: Object, field_path: str) -> Any:
    parent, last = locate(obj, field_path)
    return parent.get(last)


def merge(base: Object, change: Object) -> Object:
    """``base`` with ``change`` merged in, nested objects key by key."""
    for key, value in change.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge(base[key], value)
        else:
            base[key] = value
    return base


def select(docs: Sequence[Object], selector: Object) -> Object:
    (doc,) = (
        doc
        for doc in docs
        if doc["kind"] == selector["kind"] and doc["metadata"]["name"] == selector["name"]
    )
    return doc
