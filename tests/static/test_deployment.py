"""The hooks' Deployment, Service, Namespace and PodDisruptionBudget as the installs render them:
the Deployment's settings, the restricted Pod Security Standard, one replica down at a time."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from tests.static.install import (
    HOOKS,
    INSTALLS,
    LABELS,
    NAMESPACE,
    POD_SPEC,
    copy_install_dirs,
    operations_section,
    render_install,
)
from tests.static.kube import REPO, Object, Render, field, select

IMAGE = "hpcbridge:0.1.0"
DEPLOYMENT = {"kind": "Deployment", "name": "hpcbridge-hooks"}


SPREAD = {
    "maxSkew": 1,
    "whenUnsatisfiable": "ScheduleAnyway",
    "labelSelector": {"matchLabels": LABELS},
    "matchLabelKeys": ["pod-template-hash"],
}


DEPLOYMENT_SETTINGS = [
    pytest.param("spec.replicas", 2, id="replicas"),
    pytest.param("spec.selector.matchLabels", LABELS, id="selector"),
    pytest.param("spec.template.metadata.labels", LABELS, id="pod-labels"),
    pytest.param(f"{HOOKS}.image", IMAGE, id="image"),
    pytest.param(f"{HOOKS}.command", None, id="image-cmd"),
    pytest.param(f"{HOOKS}.env.[name=HOST].value", "127.0.0.1", id="env-host"),
    pytest.param(f"{HOOKS}.env.[name=PORT].value", "8080", id="env-port"),
    pytest.param(f"{HOOKS}.env.[name=HPCBRIDGE_LOG_IMAGE].value", IMAGE, id="env-log-image"),
    pytest.param(
        f"{HOOKS}.env.[name=HPCBRIDGE_AUTH_TOKEN_FILE].value",
        "/etc/hpcbridge/token/token",
        id="token-file",
    ),
    pytest.param(f"{HOOKS}.env.[name=HPCBRIDGE_METRICS_PORT].value", "9090", id="metrics-port"),
    pytest.param(f"{HOOKS}.env.[name=HPCBRIDGE_DIRECT_CLUSTERS].value", "false",
                 id="named-clusters-only"),
    pytest.param(
        f"{HOOKS}.ports",
        [{"name": "metrics", "containerPort": 9090, "protocol": "TCP"}],
        id="ports",
    ),
    pytest.param(
        f"{HOOKS}.readinessProbe.httpGet",
        {"path": "/healthz", "port": "metrics", "scheme": "HTTP"},
        id="ready",
    ),
    pytest.param(
        f"{HOOKS}.livenessProbe.httpGet",
        {"path": "/healthz", "port": "metrics", "scheme": "HTTP"},
        id="live",
    ),
    pytest.param(
        f"{HOOKS}.resources",
        {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
        id="resources",
    ),
    pytest.param(
        f"{HOOKS}.securityContext",
        {
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
        id="container-security",
    ),
    pytest.param(
        f"{POD_SPEC}.securityContext",
        {
            "runAsNonRoot": True,
            "runAsUser": 65532,
            "runAsGroup": 65532,
            "fsGroup": 65532,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        id="pod-security",
    ),
    pytest.param(
        f"{HOOKS}.volumeMounts",
        [
            {"name": "tmp", "mountPath": "/tmp"},
            {"name": "token", "mountPath": "/etc/hpcbridge/token", "readOnly": True},
        ],
        id="mounts",
    ),
    pytest.param(
        f"{POD_SPEC}.volumes",
        [
            {"name": "tmp", "emptyDir": {}},
            {"name": "nginx-tmp", "emptyDir": {}},
            {"name": "nginx", "configMap": {"name": "hpcbridge-nginx"}},
            {
                "name": "tls",
                "secret": {
                    "secretName": "hpcbridge-hooks-tls",
                    "defaultMode": 0o440,
                    "items": [
                        {"key": key, "path": key} for key in ("tls.crt", "tls.key", "ca.crt")
                    ],
                },
            },
            {
                "name": "token",
                "secret": {
                    "secretName": "hpcbridge-hooks-token",
                    "defaultMode": 0o440,
                    "items": [{"key": "token", "path": "token"}],
                },
            },
        ],
        id="volumes",
    ),
    pytest.param(f"{POD_SPEC}.automountServiceAccountToken", False, id="no-token"),
    pytest.param(f"{POD_SPEC}.serviceAccountName", "hpcbridge-hooks", id="service-account"),
    pytest.param(
        f"{POD_SPEC}.topologySpreadConstraints",
        [
            {"topologyKey": "kubernetes.io/hostname", **SPREAD},
            {"topologyKey": "topology.kubernetes.io/zone", **SPREAD},
        ],
        id="spread",
    ),
]


@pytest.mark.parametrize("install", INSTALLS)
@pytest.mark.parametrize(("field_path", "expected"), DEPLOYMENT_SETTINGS)
def test_deployment_setting(
    install: str, field_path: str, expected: object, render: Render
) -> None:
    deployment = select(
        render_install(install, render), {"kind": "Deployment", "name": "hpcbridge-hooks"}
    )
    assert field(deployment, field_path) == expected


@pytest.mark.parametrize("install", INSTALLS)
def test_service_routes_to_the_hooks(install: str, render: Render) -> None:
    service = select(
        render_install(install, render), {"kind": "Service", "name": "hpcbridge-hooks"}
    )
    assert service["spec"]["selector"] == LABELS
    assert service["spec"]["ports"] == [
        {"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"},
        {"name": "metrics", "port": 9090, "targetPort": "metrics", "protocol": "TCP"},
    ]


def test_namespace_enforces_restricted_pod_security(render: Render) -> None:
    namespace = select(render(REPO / "deploy/base"), {"kind": "Namespace", "name": NAMESPACE})
    labels = namespace["metadata"]["labels"]
    for mode in ("enforce", "audit", "warn"):
        assert labels[f"pod-security.kubernetes.io/{mode}"] == "restricted"


RESTRICTED_VOLUME_TYPES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
    "projected", "secret",
}  # fmt: skip


def restricted_violations(pod: Object) -> list[str]:
    """What the restricted Pod Security Standard forbids in a Pod spec (its checks that the
    installs could break)."""
    found = []
    pod_context = pod.get("securityContext", {})
    for host in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(host):
            found.append(host)
    for volume in pod.get("volumes", []):
        if not set(volume) - {"name"} <= RESTRICTED_VOLUME_TYPES:
            found.append(f"volume {volume['name']}")
    for container in pod["containers"] + pod.get("initContainers", []):
        context = {**pod_context, **container.get("securityContext", {})}
        name = container["name"]
        if context.get("runAsNonRoot") is not True or context.get("runAsUser") == 0:
            found.append(f"{name}: may run as root")
        if context.get("allowPrivilegeEscalation") is not False:
            found.append(f"{name}: allowPrivilegeEscalation")
        if context.get("privileged"):
            found.append(f"{name}: privileged")
        if context.get("seccompProfile", {}).get("type") not in ("RuntimeDefault", "Localhost"):
            found.append(f"{name}: seccompProfile")
        capabilities = context.get("capabilities", {})
        if "ALL" not in capabilities.get("drop", []):
            found.append(f"{name}: capabilities not dropped")
        if set(capabilities.get("add", [])) - {"NET_BIND_SERVICE"}:
            found.append(f"{name}: capabilities added")
        if any("hostPort" in port for port in container.get("ports", [])):
            found.append(f"{name}: hostPort")
    return found


@pytest.mark.parametrize("install", INSTALLS)
def test_pods_meet_the_restricted_pod_security_standard(install: str, render: Render) -> None:
    for doc in render_install(install, render):
        if "template" in doc.get("spec", {}):
            assert restricted_violations(doc["spec"]["template"]["spec"]) == [], doc["kind"]


@pytest.mark.parametrize("install", INSTALLS)
def test_disruptions_take_one_replica_at_a_time(install: str, render: Render) -> None:
    docs = render_install(install, render)
    budget = select(docs, {"kind": "PodDisruptionBudget", "name": "hpcbridge-hooks"})
    deployment = select(docs, {"kind": "Deployment", "name": "hpcbridge-hooks"})
    assert budget["spec"] == {
        "maxUnavailable": 1,
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
        "selector": {"matchLabels": LABELS},
    }
    assert deployment["spec"]["replicas"] > budget["spec"]["maxUnavailable"]


def test_documented_patch_lets_batchjobs_name_hosts(tmp_path: Path, render: Render) -> None:
    """docs/operations.md's patch for an install whose BatchJobs name hosts sets
    HPCBRIDGE_DIRECT_CLUSTERS to true in the hook container, and changes nothing else."""
    (patch,) = re.findall(r"```yaml\n(.*?)```", operations_section("BatchJobs that name a host"),
                          re.DOTALL)
    workdir = copy_install_dirs(tmp_path)
    with (workdir / "deploy/kustomization.yaml").open("a") as kustomization:
        kustomization.write(patch)
    after = copy.deepcopy(select(render(workdir / "deploy"), DEPLOYMENT))
    before = copy.deepcopy(select(render_install("deploy", render), DEPLOYMENT))
    envs = []
    for deployment in (before, after):
        (hooks,) = [c for c in field(deployment, f"{POD_SPEC}.containers")
                    if c["name"] == "hooks"]
        envs.append({entry["name"]: entry for entry in hooks.pop("env")})
    envs[0]["HPCBRIDGE_DIRECT_CLUSTERS"] = {"name": "HPCBRIDGE_DIRECT_CLUSTERS", "value": "true"}
    assert envs[1] == envs[0]
    assert after == before
