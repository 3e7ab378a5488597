"""metacontroller/: the CompositeController and DecoratorController against the repository's
schema of Metacontroller's controller kinds (schemas/), their hooks and their resources."""

from __future__ import annotations

import pytest

from tests.static.install import NAMESPACE, SERVICE_HOST
from tests.static.kube import (
    CONTROLLER_FILES,
    REPO,
    Object,
    controller_schema,
    load_all,
    merge,
    schema_violations,
)


@pytest.mark.parametrize(("kind", "file_name"), CONTROLLER_FILES.items(), ids=CONTROLLER_FILES)
def test_controller_matches_the_controller_schema(kind: str, file_name: str) -> None:
    (controller,) = load_all(REPO / "metacontroller" / file_name)
    assert controller["kind"] == kind
    assert schema_violations(controller, controller_schema(kind)) == []


@pytest.mark.parametrize(
    ("change", "violations"),
    [
        pytest.param({"spec": {"generateSelector": "yes"}}, ["spec.generateSelector"], id="type"),
        pytest.param({"spec": {"resyncPeriodSecond": 300}}, ["spec"], id="unknown-field"),
        pytest.param(
            {"spec": {"hooks": {"sync": {"version": "v3"}}}},
            ["spec.hooks.sync.version"],
            id="hook-version",
        ),
        pytest.param(
            {"spec": {"hooks": {"sync": {"webhook": {"timeout": 30}}}}},
            ["spec.hooks.sync.webhook.timeout"],
            id="timeout-not-a-duration",
        ),
        pytest.param(
            {"spec": {"childResources": [{"resource": "pods"}]}},
            ["spec.childResources.0"],
            id="child-without-api-version",
        ),
        pytest.param({"kind": "DecoratorController"}, ["kind"], id="kind"),
        pytest.param(
            {"spec": {"hooks": {"sync": {"webhook": {"caBundle": {"inline": "PEM"}}}}}},
            ["spec.hooks.sync.webhook.caBundle"],
            id="ca-bundle-two-sources",
        ),
        pytest.param(
            {"spec": {"hooks": {"sync": {"webhook": {"caBundle": {"secretRef": {"key": None}}}}}}},
            ["spec.hooks.sync.webhook.caBundle.secretRef.key"],
            id="ca-bundle-key-not-a-string",
        ),
        pytest.param(
            {"spec": {"hooks": {"sync": {"webhook": {"clientTLS": {"secretRef": {"ns": "x"}}}}}}},
            ["spec.hooks.sync.webhook.clientTLS.secretRef"],
            id="client-tls-unknown-field",
        ),
        pytest.param(
            {"spec": {"hooks": {"sync": {"webhook": {"authorization": {"type": "basic"}}}}}},
            ["spec.hooks.sync.webhook.authorization.type"],
            id="authorization-basic",
        ),
        pytest.param(
            {"spec": {"hooks": {"sync": {"webhook": {"authorization": {"secretRef": None}}}}}},
            ["spec.hooks.sync.webhook.authorization.secretRef"],
            id="authorization-without-secret",
        ),
    ],
)
def test_controller_schema_rejects(change: Object, violations: list[str]) -> None:
    (controller,) = load_all(REPO / "metacontroller/compositecontroller.yaml")
    controller = merge(controller, change)
    assert schema_violations(controller, controller_schema("CompositeController")) == violations


SECURED_WEBHOOK = {  # every hook's connection: HTTPS to the hooks' CA, mutual TLS, bearer token
    "caBundle": {
        "secretRef": {"name": "hpcbridge-hooks-tls", "namespace": NAMESPACE, "key": "ca.crt"}
    },
    "clientTLS": {
        "secretRef": {"name": "hpcbridge-metacontroller-client", "namespace": NAMESPACE},
        "certKey": "tls.crt",
        "privateKeyKey": "tls.key",
    },
    "authorization": {
        "type": "Bearer",
        "secretRef": {"name": "hpcbridge-hooks-token", "namespace": NAMESPACE, "key": "token"},
    },
}


@pytest.mark.parametrize("file_name", CONTROLLER_FILES.values())
def test_controller_hooks_and_resync(file_name: str) -> None:
    path = REPO / "metacontroller" / file_name
    (controller,) = load_all(path)
    assert path.read_text().startswith("# Alternative to ")
    assert controller["metadata"]["name"] == "hpcbridge-batchjob"
    assert controller["spec"]["resyncPeriodSeconds"] == 600
    assert controller["spec"]["hooks"] == {
        hook: {
            "version": "v2",
            "webhook": {
                "url": f"https://{SERVICE_HOST}:443/{hook}",
                "timeout": "30s",
                **SECURED_WEBHOOK,
            },
        }
        for hook in ("customize", "sync", "finalize")
    }


def test_composite_controller_resources() -> None:
    (controller,) = load_all(REPO / "metacontroller/compositecontroller.yaml")
    spec = controller["spec"]
    assert spec["parentResource"] == {
        "apiVersion": "hpcbridge.io/v1alpha1",
        "resource": "batchjobs",
    }
    assert spec["childResources"] == [
        {"apiVersion": "v1", "resource": "pods", "updateStrategy": {"method": "Recreate"}}
    ]
    assert spec["generateSelector"] is True


def test_decorator_controller_resources() -> None:
    (controller,) = load_all(REPO / "metacontroller/decoratorcontroller.yaml")
    spec = controller["spec"]
    assert spec["resources"] == [{"apiVersion": "hpcbridge.io/v1alpha1", "resource": "batchjobs"}]
    assert spec["attachments"] == [
        {"apiVersion": "v1", "resource": "pods", "updateStrategy": {"method": "Recreate"}}
    ]
