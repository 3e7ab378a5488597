"""crds/: the BatchJob CRD's names, scope, printer columns, defaults and descriptions, and the
ClusterRoles that aggregate BatchJob access into Kubernetes' default user roles."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.static.admission import batchjob_crd, crd_schema
from tests.static.kube import REPO, Object, Render, select


@pytest.mark.parametrize(
    ("field_path", "default"),
    [
        pytest.param("logs.pod", True, id="logs-pod"),
        pytest.param("logs.follow", False, id="logs-follow"),
        pytest.param("backoffLimit", 0, id="backoff-limit"),
        pytest.param("cluster.jump[].port", 22, id="jump-port"),
        pytest.param("cluster.jump[].insecureSkipHostKeyCheck", False, id="jump-insecure"),
        pytest.param("suspend", False, id="suspend"),
    ],
)
def test_spec_default(field_path: str, default: object) -> None:
    schema = crd_schema(batchjob_crd())["properties"]["spec"]
    for name in field_path.split("."):
        schema = schema["properties"][name.removesuffix("[]")]
        if name.endswith("[]"):
            schema = schema["items"]
    assert schema["default"] is default


def test_every_crd_field_has_a_description() -> None:
    def missing(schema: Object, path: str) -> Iterator[str]:
        if path != "metadata" and not schema.get("description"):
            yield path
        for name, sub in schema.get("properties", {}).items():
            yield from missing(sub, f"{path}.{name}".lstrip("."))
        if "items" in schema and "properties" in schema["items"]:
            for name, sub in schema["items"]["properties"].items():
                yield from missing(sub, f"{path}[].{name}")

    assert list(missing(crd_schema(batchjob_crd()), "")) == []


def test_crd_names_scope_and_status_subresource() -> None:
    crd = batchjob_crd()
    assert crd["metadata"]["name"] == "batchjobs.hpcbridge.io"
    assert crd["spec"]["scope"] == "Namespaced"
    assert crd["spec"]["names"]["kind"] == "BatchJob"
    assert crd["spec"]["names"]["shortNames"] == ["bj"]
    (version,) = crd["spec"]["versions"]
    assert version["name"] == "v1alpha1"
    assert version["subresources"] == {"status": {}}


def test_printer_columns() -> None:
    (version,) = batchjob_crd()["spec"]["versions"]
    columns = [
        (column["name"], column["type"], column["jsonPath"])
        for column in version["additionalPrinterColumns"]
    ]
    assert columns == [
        ("BACKEND", "string", ".status.backend"),  # spec.backend is empty under a BatchCluster
        ("PHASE", "string", ".status.phase"),
        ("REASON", "string", ".status.reason"),
        ("JOBID", "string", ".status.jobIDs[0]"),
        ("WAITING", "string", ".status.schedulerReason"),
        ("ACTIVE", "integer", ".status.active"),
        ("SUCCEEDED", "integer", ".status.succeeded"),
        ("FAILED", "integer", ".status.failed"),
        ("STARTED", "date", ".status.startTime"),
        ("ELAPSED", "integer", ".status.usage.elapsedSeconds"),
        ("AGE", "date", ".metadata.creationTimestamp"),
    ]


BATCHJOB_RULE = {"apiGroups": ["hpcbridge.io"], "resources": ["batchjobs"]}
USER_ROLES = {  # ClusterRole: (the default roles it is aggregated into, its one rule)
    "hpcbridge-batchjobs-edit": (
        {"admin", "edit"},
        {
            **BATCHJOB_RULE,
            "verbs": [
                "get", "list", "watch", "create", "update", "patch", "delete", "deletecollection",
            ],
        },
    ),
    "hpcbridge-batchjobs-view": (
        {"view"},
        {
            **BATCHJOB_RULE,
            "resources": ["batchjobs", "batchjobs/status"],
            "verbs": ["get", "list", "watch"],
        },
    ),
}  # fmt: skip


@pytest.mark.parametrize(("name", "role"), USER_ROLES.items(), ids=USER_ROLES)
def test_user_role_is_aggregated(name: str, role: tuple[set[str], Object], render: Render) -> None:
    aggregated_to, rule = role
    cluster_role = select(render(REPO / "crds"), {"kind": "ClusterRole", "name": name})
    labels = cluster_role["metadata"]["labels"]
    prefix = "rbac.authorization.k8s.io/aggregate-to-"
    assert {key.removeprefix(prefix) for key in labels if key.startswith(prefix)} == aggregated_to
    assert all(labels[f"{prefix}{role}"] == "true" for role in aggregated_to)
    assert cluster_role["rules"] == [rule]
