"""docs/hooks-openapi.yaml: valid OpenAPI, true to the saved requests, and in step with the
BatchJob CRD whose spec and status it repeats (``make openapi`` writes them from the CRD)."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from openapi_schema_validator import OAS30Validator, oas30_format_checker
from openapi_spec_validator import validate

from tests.driver import REPO
from tests.fuzz.answers import saved_names, saved_requests
from tests.static.admission import batchjob_crd, crd_schema
from tests.static.openapi import with_schemas

DOCUMENT = REPO / "docs/hooks-openapi.yaml"
COMPARED = ("type", "enum", "pattern", "format", "default", "minimum", "maximum", "minLength",
            "maxLength", "maxItems", "maxProperties", "required")
"""What the document's copy of a CRD schema must say as the CRD does (descriptions may differ)."""


@functools.cache
def document() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(DOCUMENT.read_text())
    return loaded


def violations(instance: object, name: str) -> list[str]:
    """Where ``instance`` breaks the document's schema ``name``."""
    schema = {"components": document()["components"], "$ref": f"#/components/schemas/{name}"}
    validator = OAS30Validator(schema, format_checker=oas30_format_checker)
    return sorted(f"{'.'.join(map(str, error.absolute_path))}: {error.message[:200]}"
                  for error in validator.iter_errors(instance))


def test_the_document_is_valid_openapi() -> None:
    validate(document())


def test_the_document_describes_every_hook() -> None:
    paths = document()["paths"]
    assert {path: set(operations) for path, operations in paths.items()} == {
        "/customize": {"post"}, "/sync": {"post"}, "/finalize": {"post"},
        "/healthz": {"get"}, "/metrics": {"get"},
    }
    for hook in ("/customize", "/sync", "/finalize"):
        assert set(paths[hook]["post"]["responses"]) == {"200", "400"}


@pytest.mark.parametrize("name", saved_names())
def test_the_saved_requests_are_as_documented(name: str) -> None:
    kind = "CustomizeRequest" if name == "customize" else "SyncRequest"
    assert violations(saved_requests()[name], kind) == []


def differences(crd: dict[str, Any], copy: dict[str, Any], where: str) -> Iterator[str]:
    """Where the document's copy of a CRD schema says something else than the CRD."""
    if crd.get("x-kubernetes-int-or-string"):
        branches = {branch.get("type"): branch for branch in copy.get("oneOf", [])}
        if set(branches) != {"integer", "string"}:
            yield f"{where}: the CRD takes an integer or a string"
        elif branches["string"].get("pattern") != crd.get("pattern"):
            yield f"{where}.pattern: the CRD's is {crd.get('pattern')!r}"
        return
    for key in COMPARED:
        if crd.get(key) != copy.get(key):
            yield f"{where}.{key}: the CRD's is {crd.get(key)!r}, the document's {copy.get(key)!r}"
    crd_properties, copy_properties = crd.get("properties", {}), copy.get("properties", {})
    if set(crd_properties) != set(copy_properties):
        yield f"{where}.properties: the CRD's are {sorted(crd_properties)}"
    for name in crd_properties.keys() & copy_properties.keys():
        yield from differences(crd_properties[name], copy_properties[name], f"{where}.{name}")
    for key in ("items", "additionalProperties"):
        if isinstance(crd.get(key), dict):
            yield from differences(crd[key], copy.get(key) or {}, f"{where}.{key}")


@pytest.mark.parametrize(("field", "name"), [("spec", "BatchJobSpec"),
                                             ("status", "BatchJobStatus")])
def test_the_documented_batchjob_is_the_crds(field: str, name: str) -> None:
    crd = crd_schema(batchjob_crd())["properties"][field]
    assert list(differences(crd, document()["components"]["schemas"][name], field)) == []


def test_the_documented_batchjob_is_as_make_openapi_writes_it() -> None:
    text = DOCUMENT.read_text()
    assert with_schemas(text) == text, "run make openapi"


def test_the_documented_status_rejects_what_the_api_server_drops() -> None:
    """Like the API server, the document admits no field the CRD does not declare."""
    assert violations({"phase": "Running", "surprise": 1}, "BatchJobStatus") != []
    assert violations({"phase": "Running", "attempt": 1}, "BatchJobStatus") == []
    assert violations({"script": "#!", "cluster": {"name": "a", "secretRef": {"name": "s"},
                                                   "surprise": 1}}, "BatchJobSpec") != []
