"""deploy/metacontroller/: Metacontroller's official manifests at the README's version, with
the workers, client rate limits and resources docs/operations.md sizes. Its base is remote, so it
is rendered here over a stand-in of the upstream StatefulSet's shape (its name, namespace,
container and arguments); and the offline install of docs/operations.md, which points it at a
checked local copy of those manifests."""

from __future__ import annotations

import re
import shutil
import subprocess
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


def stand_in_upstream(directory: Path) -> None:
    """A kustomization in ``directory`` with the stand-in of upstream's StatefulSet."""
    directory.mkdir()
    (directory / "statefulset.yaml").write_text(yaml.safe_dump(STAND_IN))
    (directory / "kustomization.yaml").write_text("resources: [statefulset.yaml]\n")


def rendered(tmp_path: Path, render: Render) -> Object:
    overlay = tmp_path / "overlay"
    shutil.copytree(OVERLAY, overlay)
    stand_in_upstream(tmp_path / "upstream")
    local = {**kustomization(), "resources": ["../upstream"]}
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(local))
    return container_of(overlay, render)


def container_of(overlay: Path, render: Render) -> Object:
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


def offline_steps() -> list[str]:
    """docs/operations.md's offline install: the commands of its two blocks, in order."""
    text = (REPO / "docs/operations.md").read_text()
    section = text.split("\n## Metacontroller without network access\n", 1)[1].split("\n## ")[0]
    return [line for block in re.findall(r"```sh\n(.*?)```", section, re.DOTALL)
            for line in block.splitlines()]


def test_offline_install_fetches_the_readme_version_and_checks_its_commit() -> None:
    (clone,) = (line for line in offline_steps() if line.startswith("git clone "))
    assert f"--branch {METACONTROLLER_VERSION} " in clone
    assert METACONTROLLER_UPSTREAM.startswith(clone.split()[-2].removesuffix(".git"))
    text = (REPO / "docs/operations.md").read_text()
    assert re.search(r"`git rev-parse HEAD` must print `[0-9a-f]{40}`, the commit the tag\s+"
                     + re.escape(METACONTROLLER_VERSION), text)


def test_offline_digests_cover_upstreams_production_manifests() -> None:
    """One SHA-256 a file of upstream's manifests/production/, its kustomization among them,
    in the form `sha256sum --check --strict` reads, for the directory the copy goes to."""
    lines = (OVERLAY / "upstream.sha256").read_text().splitlines()
    files = [re.fullmatch(r"[0-9a-f]{64}  upstream/([\w.-]+\.yaml)", line) for line in lines]
    assert all(files), lines
    names = {found.group(1) for found in files if found}
    assert "kustomization.yaml" in names and len(names) == len(lines) == 5
    (check,) = (line for line in offline_steps() if "sha256sum" in line)
    assert check == "(cd deploy/metacontroller && sha256sum --check --strict upstream.sha256)"
    (copy,) = (line for line in offline_steps() if line.startswith("mkdir -p "))
    assert copy.split()[2] == "deploy/metacontroller/upstream"


def test_offline_install_renders_the_overlay_over_the_local_copy(
    tmp_path: Path, render: Render
) -> None:
    """The documented `sed` turns the remote base into the copy in upstream/ (a stand-in here),
    and the overlay's flags apply to it as to the remote one."""
    (sed,) = (line for line in offline_steps() if line.startswith("sed "))
    shutil.copytree(OVERLAY, tmp_path / "deploy/metacontroller")
    stand_in_upstream(tmp_path / "deploy/metacontroller/upstream")
    subprocess.run(["bash", "-ec", sed], cwd=tmp_path, check=True)
    local = yaml.safe_load((tmp_path / "deploy/metacontroller/kustomization.yaml").read_text())
    assert local == {**kustomization(), "resources": ["upstream"]}
    container = container_of(tmp_path / "deploy/metacontroller", render)
    assert flags(container) == flags(rendered(tmp_path / "remote", render))
