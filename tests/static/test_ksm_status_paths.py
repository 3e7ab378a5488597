"""kube-state-metrics' BatchJob configuration against the CRD: every path it reads is a field
the CRD's schema declares (an undeclared one would be pruned and read as nothing), every gauge
reads a number (or a condition's True/False), and every field of status.usage is exported."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
KSM = REPO / "deploy/monitoring/kube-state-metrics-batchjobs.yaml"
DASHBOARD = REPO / "deploy/monitoring/grafana-dashboard.json"


def crd_schema() -> dict[str, Any]:
    crd = yaml.safe_load((REPO / "crds/batchjob.yaml").read_text())
    (version,) = crd["spec"]["versions"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def resolve(schema: dict[str, Any], path: list[str]) -> dict[str, Any]:
    """The schema of ``path`` below ``schema``: through objects' properties and arrays' items."""
    for step in path:
        if schema.get("type") == "array":
            schema = schema["items"]
        if step == "metadata" and "properties" not in schema.get("properties", {}).get(step, {}):
            return {"type": "object"}  # the API server's own metadata
        assert step in schema.get("properties", {}), (path, step)
        schema = schema["properties"][step]
    return schema


def metrics() -> list[dict[str, Any]]:
    (resource,) = yaml.safe_load(KSM.read_text())["spec"]["resources"]
    found: list[dict[str, Any]] = resource["metrics"]
    return found


def test_common_labels_are_crd_fields() -> None:
    (resource,) = yaml.safe_load(KSM.read_text())["spec"]["resources"]
    for path in resource["labelsFromPath"].values():
        if path[0] != "metadata":
            assert resolve(crd_schema(), path)["type"] == "string", path


def test_the_backend_label_is_the_status_one() -> None:
    """A BatchJob on a BatchCluster may leave spec.backend out: the hooks write the route's in
    status.backend (as the BACKEND column reads it)."""
    (resource,) = yaml.safe_load(KSM.read_text())["spec"]["resources"]
    assert resource["labelsFromPath"]["backend"] == ["status", "backend"]


@pytest.mark.parametrize("metric", metrics(), ids=lambda m: m["name"])
def test_every_path_is_a_crd_field(metric: dict[str, Any]) -> None:
    each = metric["each"]
    config = each[{"StateSet": "stateSet", "Info": "info", "Gauge": "gauge"}[each["type"]]]
    base = config.get("path", [])
    target = resolve(crd_schema(), base)
    for label_path in config.get("labelsFromPath", {}).values():
        assert resolve(target, label_path)["type"] == "string", label_path
    if each["type"] == "Gauge":
        value = resolve(target, config["valueFrom"])
        if value["type"] == "string":
            assert set(value["enum"]) == {"True", "False", "Unknown"}, metric["name"]
        else:
            assert value["type"] in ("integer", "number"), metric["name"]


def test_every_usage_field_is_exported() -> None:
    usage = resolve(crd_schema(), ["status", "usage"])["properties"]
    read = {m["each"]["gauge"]["valueFrom"][0] for m in metrics()
            if m["each"]["type"] == "Gauge" and m["each"]["gauge"]["path"] == ["status", "usage"]}
    assert read == {name for name, field in usage.items() if field["type"] != "array"}


def test_the_dashboard_shows_usage_and_waiting_by_namespace_and_cluster() -> None:
    panels = {p["title"]: p for p in json.loads(DASHBOARD.read_text())["panels"]}
    for title, metric in [
        ("Queue wait by namespace and cluster", "kube_batchjob_usage_queue_seconds"),
        ("Run time by namespace and cluster", "kube_batchjob_usage_elapsed_seconds"),
        ("CPU efficiency by namespace and cluster", "kube_batchjob_usage_cpu_efficiency"),
        ("Memory efficiency by namespace and cluster", "kube_batchjob_usage_memory_efficiency"),
        ("BatchJobs waiting by reason", "kube_batchjob_status_condition"),
    ]:
        exprs = [t["expr"] for t in panels[title]["targets"]]
        assert all(metric in e and 'namespace=~"$namespace"' in e
                   and 'cluster=~"$cluster"' in e for e in exprs), title
