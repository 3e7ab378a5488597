"""What each install renders: its objects and their namespaces, valid against the Kubernetes and
cert-manager schemas; the BatchJob type belongs to crds/ alone."""

from __future__ import annotations

import functools
from pathlib import Path

import kubernetes_validate
import pytest

from tests.static.install import CONTROLLER_OF_INSTALL, INSTALLS, NAMESPACE, render_install
from tests.static.kube import (
    METACONTROLLER_KINDS,
    REPO,
    Object,
    Render,
    load_all,
    schema_violations,
)

CERT_MANAGER_KINDS = {"Issuer", "Certificate"}


CLUSTER_SCOPED = {"Namespace", "CustomResourceDefinition", "ClusterRole", *METACONTROLLER_KINDS}


@pytest.mark.parametrize("install", INSTALLS)
def test_install_objects(install: str, render: Render) -> None:
    docs = render_install(install, render)
    assert sorted((doc["kind"], doc["metadata"]["name"]) for doc in docs) == sorted(
        [
            ("Namespace", NAMESPACE),
            ("ServiceAccount", "hpcbridge-hooks"),
            ("ConfigMap", "hpcbridge-nginx"),
            ("Deployment", "hpcbridge-hooks"),
            ("Service", "hpcbridge-hooks"),
            ("PodDisruptionBudget", "hpcbridge-hooks"),
            ("NetworkPolicy", "hpcbridge-hooks"),
            ("Issuer", "hpcbridge-selfsigned"),
            ("Certificate", "hpcbridge-ca"),
            ("Issuer", "hpcbridge-ca"),
            ("Certificate", "hpcbridge-hooks-tls"),
            ("Certificate", "hpcbridge-metacontroller-client"),
            ("CustomResourceDefinition", "batchjobs.hpcbridge.io"),
            ("ClusterRole", "hpcbridge-batchjobs-edit"),
            ("ClusterRole", "hpcbridge-batchjobs-view"),
            ("CustomResourceDefinition", "batchclusters.hpcbridge.io"),
            ("ClusterRole", "hpcbridge-batchclusters-edit"),
            ("ClusterRole", "hpcbridge-batchclusters-view"),
            (CONTROLLER_OF_INSTALL[install], "hpcbridge-batchjob"),
        ]
    )
    for doc in docs:
        expected = None if doc["kind"] in CLUSTER_SCOPED else NAMESPACE
        assert doc["metadata"].get("namespace") == expected, doc["kind"]


@pytest.mark.parametrize("install", INSTALLS)
def test_install_validates_against_kubernetes_schemas(install: str, render: Render) -> None:
    for doc in render_install(install, render):
        if doc["kind"] not in METACONTROLLER_KINDS | CERT_MANAGER_KINDS:  # schemas/
            kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)


@functools.cache
def cert_manager_schema(kind: str) -> Object:
    """The repository's JSON Schema of the cert-manager fields deploy/tls uses (schemas/)."""
    (schemas,) = load_all(Path(__file__).parent / "schemas/cert-manager.yaml")
    return {"$schema": schemas["$schema"], "$defs": schemas["$defs"], **schemas[kind]}


@pytest.mark.parametrize("install", INSTALLS)
def test_install_certificates_match_the_cert_manager_schema(install: str, render: Render) -> None:
    docs = [doc for doc in render_install(install, render) if doc["kind"] in CERT_MANAGER_KINDS]
    assert sorted({doc["kind"] for doc in docs}) == sorted(CERT_MANAGER_KINDS)
    for doc in docs:
        assert schema_violations(doc, cert_manager_schema(doc["kind"])) == [], doc["metadata"]


@pytest.mark.parametrize("directory", ["deploy", "deploy/base"])
def test_removing_the_controller_keeps_the_batchjob_type(directory: str, render: Render) -> None:
    """`kubectl delete -k deploy/` cannot delete the CRD, and with it every BatchJob: the type
    is crds/'s alone (docs/operations.md, "Uninstall")."""
    kinds = {doc["kind"] for doc in render(REPO / directory)}
    assert "CustomResourceDefinition" not in kinds
    assert "ClusterRole" not in kinds
