"""deploy/metacontroller/: Metacontroller's official manifests at the README's version, with
the workers, client rate limits and resources docs/operations.md sizes. Its base is remote, so it
is rendered here over a stand-in of the upstream StatefulSet's shape (its name, namespace,
container and arguments)."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from tests.static.install import METACONTROLLER_UPSTREAM, METACONTROLLER_VERSION, README
from tests.static.kube import REPO, Object, Render, select

OVERLAY = REPO / "deploy/metacontroller"
UPSTREAM_ARGS = ["--zap-log-level=4", "--discovery-interval=20s"]
STAND_IN = {
    "apiVersion": "apps/v1", "kind": "StatefulSet",
    "metadata": {"name": "metacontroller", "namespace": "metacontroller"},
    "spec": {"template": {"spec": {"containers": [{
        "name": "metacontroller", "image": f"metacontroller:{METACONTROLLER_VERSION}",
        "command": ["/usr/bin/metacontroller"], "args": UPSTREAM_ARGS,
    }]}}},
}  # fmt: skip


def kustomization() -> Object:
    return yaml.safe_load((OVERLAY / "kustomization.yaml").read_text())


def rendered(tmp_path: Path, render: Render) -> Object:
    overlay = tmp_path / "overlay"
    shutil.copytree(OVERLAY, overlay)
    (tmp_path / "upstream").mkdir()
    (tmp_path / "upstream/statefulset.yaml").write_text(yaml.safe_dump(STAND_IN))
    (tmp_path / "upstream/kustomization.yaml").write_text("resources: [statefulset.yaml]\n")
    local = {**kustomization(), "resources": ["../upstream"]}
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(local))
    statefulset = select(render(overlay), {"kind": "StatefulSet", "name": "metacontroller"})
    (container,) = statefulset["spec"]["template"]["spec"]["containers"]
    assert isinstance(container, dict)
    return container


def flags(container: Object) -> dict[str, str]:
    return dict(arg.split("=", 1) for arg in container["args"])


def test_overlay_is_the_official_manifests_at_the_readme_version() -> None:
    assert kustomization()["resources"] == [METACONTROLLER_UPSTREAM]
    assert f"Metacontroller {METACONTROLLER_VERSION}" in README.read_text()


def test_overlay_sets_workers_and_client_limits_and_keeps_upstreams_args(
    tmp_path: Path, render: Render
) -> None:
    container = rendered(tmp_path, render)
    assert container["args"][: len(UPSTREAM_ARGS)] == UPSTREAM_ARGS
    given = flags(container)
    assert int(given["--workers"]) > 5
    assert float(given["--client-go-qps"]) > 5
    assert int(given["--client-go-burst"]) >= float(given["--client-go-qps"])
    assert container["command"] == STAND_IN["spec"]["template"]["spec"]["containers"][0]["command"]


def test_overlay_gives_resources(tmp_path: Path, render: Render) -> None:
    resources = rendered(tmp_path, render)["resources"]
    assert set(resources["requests"]) == {"cpu", "memory"}
    assert "memory" in resources["limits"]


def test_operations_doc_states_the_overlays_flags(tmp_path: Path, render: Render) -> None:
    """The sizing section names each flag at the value the overlay gives it."""
    text = (REPO / "docs/operations.md").read_text()
    section = text.split("\n### Sizing Metacontroller\n", 1)[1].split("\n## ", 1)[0]
    for flag, value in flags(rendered(tmp_path, render)).items():
        if flag in ("--workers", "--client-go-qps", "--client-go-burst"):
            assert f"`{flag}={value}`" in section
