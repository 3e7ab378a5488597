"""The hooks' NetworkPolicy as the installs render it, and docs/operations.md's patch of it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.static.install import (
    INSTALLS,
    LABELS,
    POD_SPEC,
    copy_install_dirs,
    operations_section,
    render_install,
)
from tests.static.kube import Render, field, select

NETWORK_POLICY_SPEC = {
    "podSelector": {"matchLabels": LABELS},
    "policyTypes": ["Ingress", "Egress"],
    "ingress": [
        {
            "from": [{"namespaceSelector": {"matchLabels": {
                "kubernetes.io/metadata.name": "metacontroller"}}}],
            "ports": [{"port": "https", "protocol": "TCP"}],
        },
        {
            "from": [{"namespaceSelector": {"matchLabels": {
                "kubernetes.io/metadata.name": "monitoring"}}}],
            "ports": [{"port": "metrics", "protocol": "TCP"}],
        },
    ],
    "egress": [
        {"ports": [{"port": 22, "protocol": "TCP"}]},
        {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]},
    ],
}  # fmt: skip


@pytest.mark.parametrize("install", INSTALLS)
def test_network_policy(install: str, render: Render) -> None:
    """Metacontroller's namespace to the hooks, the monitoring namespace to the metrics, and
    out only SSH and DNS; the named ports are the hook container's."""
    docs = render_install(install, render)
    policy = select(docs, {"kind": "NetworkPolicy", "name": "hpcbridge-hooks"})
    assert policy["spec"] == NETWORK_POLICY_SPEC
    deployment = select(docs, {"kind": "Deployment", "name": "hpcbridge-hooks"})
    assert policy["spec"]["podSelector"]["matchLabels"] == field(
        deployment, "spec.template.metadata.labels"
    )
    names = {port["name"] for container in field(deployment, f"{POD_SPEC}.containers")
             for port in container["ports"]}
    assert {port["port"] for rule in policy["spec"]["ingress"] for port in rule["ports"]} == names


def test_documented_network_policy_patch(tmp_path: Path, render: Render) -> None:
    """docs/operations.md's kustomize patch, added to deploy/kustomization.yaml, moves the
    namespaces and opens another SSH port."""
    (patch,) = re.findall(r"```yaml\n(.*?)```", operations_section("NetworkPolicy"), re.DOTALL)
    workdir = copy_install_dirs(tmp_path)
    with (workdir / "deploy/kustomization.yaml").open("a") as kustomization:
        kustomization.write(patch)
    policy = select(
        render(workdir / "deploy"), {"kind": "NetworkPolicy", "name": "hpcbridge-hooks"}
    )
    spec = policy["spec"]
    namespaces = [rule["from"][0]["namespaceSelector"]["matchLabels"] for rule in spec["ingress"]]
    assert namespaces == [
        {"kubernetes.io/metadata.name": "mc-system"},
        {"kubernetes.io/metadata.name": "prometheus"},
    ]
    assert spec["egress"][0]["ports"] == [
        {"port": 22, "protocol": "TCP"},
        {"port": 2222, "protocol": "TCP"},
    ]
