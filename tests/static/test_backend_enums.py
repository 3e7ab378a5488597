"""The schema's schedulers are the registry's: every ``backend`` enum of the CRDs and of
``docs/hooks-openapi.yaml`` lists exactly the registered schedulers, each has its own block in a
BatchJob's spec and in a BatchCluster's defaults, and a BatchCluster may limit the queues of a
scheduler that has them under the key its rules name (``SchedulerRules.queue_limit``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from hooks.schedulers.registry import REGISTRY

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = ["crds/batchjob.yaml", "crds/batchcluster.yaml", "docs/hooks-openapi.yaml"]


def backend_enums(node: Any, path: str = "") -> Iterator[tuple[str, list[str]]]:
    """Every ``backend`` property with an enum in a schema, with where it is."""
    if isinstance(node, dict):
        backend = node.get("properties", {}).get("backend") if isinstance(
            node.get("properties"), dict) else None
        if isinstance(backend, dict) and "enum" in backend:
            yield f"{path}.properties.backend", backend["enum"]
        for key, value in node.items():
            yield from backend_enums(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from backend_enums(value, f"{path}[{i}]")


def spec_schema(path: str) -> dict[str, Any]:
    crd = yaml.safe_load((ROOT / path).read_text())
    version = crd["spec"]["versions"][0]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return schema


@pytest.mark.parametrize("path", DOCUMENTS)
def test_every_backend_enum_lists_the_registered_schedulers(path: str) -> None:
    documents = list(yaml.safe_load_all((ROOT / path).read_text()))
    found = [item for document in documents for item in backend_enums(document)]
    assert found, f"{path} has no backend enum"
    for where, enum in found:
        assert sorted(enum) == sorted(REGISTRY), where


def test_each_scheduler_has_its_block_in_a_batchjob_and_in_a_batchclusters_defaults() -> None:
    batchjob = spec_schema("crds/batchjob.yaml")["properties"]
    defaults = spec_schema("crds/batchcluster.yaml")["properties"]["defaults"]["properties"]
    for name in REGISTRY:
        assert name in batchjob, f"spec.{name}"
        assert name in defaults, f"spec.defaults.{name}"


def test_a_batchcluster_limits_the_queues_of_each_scheduler_that_has_them() -> None:
    limits = spec_schema("crds/batchcluster.yaml")["properties"]["limits"]["properties"]
    keys = {rules.queue_limit.limit for rules in REGISTRY.values() if rules.queue_limit}
    assert keys <= set(limits)
    assert {key for key in limits if not key.startswith("max")} == keys
