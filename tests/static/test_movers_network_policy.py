"""The mover Pods' NetworkPolicy (deploy/movers-networkpolicy/), as kustomize renders it for a
namespace: it selects the mover Pods the hooks declare (inputs and outputs) and neither the log
Pod nor the hook Pods; lets them out to DNS, SSH to the sites and HTTPS to the stores and to
nothing else — no cloud metadata service, no Service of the cluster; admits nothing in. And
docs/operations.md's patch of its placeholders."""

from __future__ import annotations

import ipaddress
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from hooks.core.spec.batchjob import parse_spec
from hooks.core.values.job import JobRequest
from hooks.core.values.phases import Phase
from hooks.core.wire import log_pod, mover_pods
from hooks.schedulers.registry import REGISTRY
from tests.static.install import LABELS, operations_section
from tests.static.kube import REPO, Object, Render, select

DIRECTORY = REPO / "deploy/movers-networkpolicy"
POLICY = {"kind": "NetworkPolicy", "name": "hpcbridge-movers"}
SITE, STORE = "192.0.2.10", "198.51.100.20"  # the manifest's placeholders
SPEC = {
    "backend": "slurm", "script": "#!/bin/sh\ntrue\n",
    "cluster": {"host": "login.hpc.example.org", "secretRef": {"name": "login"}},
    "storage": {"s3": {"endpoint": "https://s3.example.org", "secretRef": {"name": "s3"}}},
    "inputs": [{"s3": {"bucket": "data", "key": "a"}, "path": "a"}],
    "outputs": [{"path": "b", "s3": {"bucket": "results", "prefix": "r/"}}],
}
JOB = JobRequest("research", "sim", "2b7e1f6a-5c3d-4e8f-9a0b-1c2d3e4f5a6b", 1,
                 parse_spec(SPEC, REGISTRY), 120)


def policy(render: Render, directory: Path = DIRECTORY) -> Object:
    return select(render(directory), POLICY)


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A label selector (``matchLabels`` and ``matchExpressions``) on a Pod's labels."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for rule in selector.get("matchExpressions", []):
        key, operator, values = rule["key"], rule["operator"], rule.get("values", [])
        if not {"In": key in labels and labels[key] in values,
                "NotIn": key not in labels or labels[key] not in values,
                "Exists": key in labels, "DoesNotExist": key not in labels}[operator]:
            return False
    return True


def allows(spec: Object, address: str, port: int, protocol: str = "TCP") -> bool:
    """Whether the policy's egress lets a selected Pod out to ``address:port``."""
    ip = ipaddress.ip_address(address)
    for rule in spec.get("egress", []):
        ports = rule.get("ports")
        if ports and not any(p.get("port") == port and p.get("protocol", "TCP") == protocol
                             for p in ports):
            continue
        peers = rule.get("to")
        if not peers:
            return True
        for peer in peers:
            assert set(peer) == {"ipBlock"}, "only ipBlocks: addresses outside the cluster"
            block = peer["ipBlock"]
            network = ipaddress.ip_network(block["cidr"])
            if ip.version == network.version and ip in network and not any(
                    ip in ipaddress.ip_network(cut) for cut in block.get("except", [])):
                return True
    return False


def test_it_selects_the_mover_pods_and_not_the_log_pod_nor_the_hooks(render: Render) -> None:
    spec = policy(render)["spec"]
    movers = [mover_pods.inputs_pod(JOB, image="i"),
              mover_pods.outputs_pod(JOB, Phase.SUCCEEDED, image="i")]
    for pod in movers:
        assert pod is not None and selects(spec["podSelector"], pod["metadata"]["labels"])
    logs = log_pod.log_pod(JOB, job_ids=("500",), image="i")
    assert not selects(spec["podSelector"], logs["metadata"]["labels"])
    assert not selects(spec["podSelector"], LABELS)


def test_it_is_rendered_for_the_namespace_set(render: Render) -> None:
    rendered = policy(render)
    assert rendered["metadata"]["namespace"] == "research"


@pytest.mark.parametrize(("address", "port", "protocol"), [
    (SITE, 22, "TCP"), (STORE, 443, "TCP"),
    ("10.96.0.10", 53, "UDP"), ("10.96.0.10", 53, "TCP"), ("169.254.20.10", 53, "UDP"),
    ("2001:db8::53", 53, "UDP"),
])
def test_out_to_dns_the_sites_and_the_stores(render: Render, address: str, port: int,
                                             protocol: str) -> None:
    assert allows(policy(render)["spec"], address, port, protocol)


@pytest.mark.parametrize(("address", "port", "protocol"), [
    ("169.254.169.254", 80, "TCP"), ("169.254.169.254", 443, "TCP"),
    ("169.254.169.254", 53, "UDP"), ("169.254.169.254", 22, "TCP"),
    ("fd00:ec2::254", 80, "TCP"), ("fd00:ec2::254", 53, "UDP"),
    ("10.96.0.1", 443, "TCP"),  # the API server's Service
    ("10.244.1.7", 9000, "TCP"),  # a Pod of the cluster
    ("127.0.0.1", 9000, "TCP"), ("8.8.8.8", 443, "TCP"), ("8.8.8.8", 22, "TCP"),
    (SITE, 443, "TCP"), (STORE, 22, "TCP"), (STORE, 80, "TCP"), (SITE, 22, "UDP"),
])
def test_nothing_else(render: Render, address: str, port: int, protocol: str) -> None:
    assert not allows(policy(render)["spec"], address, port, protocol)


def test_nothing_in(render: Render) -> None:
    spec = policy(render)["spec"]
    assert "Ingress" in spec["policyTypes"] and "Egress" in spec["policyTypes"]
    assert not spec.get("ingress")


def test_the_manifest_alone_names_no_namespace() -> None:
    """``kubectl apply -n NAMESPACE -f networkpolicy.yaml`` for each namespace."""
    text = (DIRECTORY / "networkpolicy.yaml").read_text()
    assert not re.search(r"^\s+namespace:", text, re.MULTILINE)


def test_documented_patch_of_the_placeholders(tmp_path: Path, render: Render) -> None:
    """docs/operations.md's patch, added to a copy's kustomization, sets the sites and the
    stores."""
    section = operations_section("The mover Pods' NetworkPolicy")
    assert "deploy/movers-networkpolicy/" in section
    (patch,) = re.findall(r"```yaml\n(.*?)```", section, re.DOTALL)
    copy = tmp_path / "movers-networkpolicy"
    shutil.copytree(DIRECTORY, copy)
    with (copy / "kustomization.yaml").open("a") as kustomization:
        kustomization.write(patch)
    spec = policy(render, copy)["spec"]
    assert allows(spec, "203.0.113.5", 22) and allows(spec, "203.0.113.6", 2222)
    assert allows(spec, "198.51.100.7", 9000) and not allows(spec, STORE, 443)
    assert not allows(spec, SITE, 22) and not allows(spec, "169.254.169.254", 80)
