"""The example overlays users copy to install their own image with kubectl alone
(deploy/overlays/, README "Install on a cluster"): each renders its install's objects with only
the image changed, and the image reaches the log Pods' HPCBRIDGE_LOG_IMAGE however it is set."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.static.conftest import Render

REPO = Path(__file__).resolve().parents[2]
Object = dict[str, Any]
OVERLAYS = REPO / "deploy/overlays"
PLACEHOLDER = "REGISTRY/hpcbridge:TAG"
INSTALL_OF_OVERLAY = {  # example overlay: the kustomizations of the install it copies
    "example": ("deploy",),
    "example-decorator": ("deploy/base", "deploy/tls"),
}
IMAGE_FIELDS = ("image", "env.HPCBRIDGE_LOG_IMAGE")


def hooks_container(docs: tuple[Object, ...]) -> Object:
    (deployment,) = (doc for doc in docs if doc["kind"] == "Deployment")
    (container,) = (c for c in deployment["spec"]["template"]["spec"]["containers"]
                    if c["name"] == "hooks")
    return container


def images(docs: tuple[Object, ...]) -> dict[str, str]:
    container = hooks_container(docs)
    env = {item["name"]: item.get("value") for item in container["env"]}
    return {"image": container["image"], "env.HPCBRIDGE_LOG_IMAGE": env["HPCBRIDGE_LOG_IMAGE"]}


def without_images(docs: tuple[Object, ...]) -> list[Object]:
    """The objects with the two image fields blanked."""
    docs = tuple(yaml.safe_load(yaml.safe_dump(doc)) for doc in docs)
    container = hooks_container(docs)
    container["image"] = ""
    for item in container["env"]:
        if item["name"] == "HPCBRIDGE_LOG_IMAGE":
            item["value"] = ""
    return sorted(docs, key=lambda doc: (doc["kind"], doc["metadata"]["name"]))


def test_every_overlay_is_an_example() -> None:
    assert sorted(path.name for path in OVERLAYS.iterdir()) == sorted(INSTALL_OF_OVERLAY)


@pytest.mark.parametrize("overlay", INSTALL_OF_OVERLAY)
def test_example_overlay_is_its_install_with_the_image_to_set(overlay: str, render: Render) -> None:
    rendered = render(OVERLAYS / overlay)
    install = tuple(doc for path in INSTALL_OF_OVERLAY[overlay] for doc in render(REPO / path))
    assert images(rendered) == dict.fromkeys(IMAGE_FIELDS, PLACEHOLDER)
    assert without_images(rendered) == without_images(install)


def copy_overlay(workdir: Path, images_entry: str | None = None) -> Path:
    """The install directories in ``workdir``, with the README's copy of the example overlay,
    its `images:` replaced by ``images_entry`` when one is given."""
    for name in ("crds", "deploy", "metacontroller"):
        shutil.copytree(REPO / name, workdir / name)
    site = workdir / "deploy/overlays/site"
    shutil.copytree(OVERLAYS / "example", site)
    if images_entry is not None:
        kustomization = site / "kustomization.yaml"
        text = kustomization.read_text()
        kustomization.write_text(text[: text.index("images:")] + images_entry)
    return site


@pytest.mark.parametrize(
    ("entry", "image"),
    [
        pytest.param("images: [{name: hpcbridge, newTag: '2.0'}]", "hpcbridge:2.0", id="tag"),
        pytest.param(
            "images: [{name: hpcbridge, newName: registry.example.org/hpcbridge, "
            "digest: 'sha256:" + "a" * 64 + "'}]",
            "registry.example.org/hpcbridge@sha256:" + "a" * 64,
            id="digest",
        ),
    ],
)
def test_image_set_in_a_copy_reaches_the_log_pods(
    entry: str, image: str, tmp_path: Path, render: Render
) -> None:
    assert images(render(copy_overlay(tmp_path, entry))) == dict.fromkeys(IMAGE_FIELDS, image)


def test_only_the_log_image_follows_the_image(render: Render) -> None:
    """The images transformer also runs over the environment (deploy/base/image-fields.yaml):
    every other value stays as deploy/base/deployment.yaml writes it."""
    written = yaml.safe_load((REPO / "deploy/base/deployment.yaml").read_text())
    (container,) = (c for c in written["spec"]["template"]["spec"]["containers"]
                    if c["name"] == "hooks")
    rendered = hooks_container(render(OVERLAYS / "example"))
    changed = {
        item["name"]
        for item, before in zip(rendered["env"], container["env"], strict=True)
        if item != before
    }
    assert changed == {"HPCBRIDGE_LOG_IMAGE"}


def sh_blocks(markdown: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", markdown, re.DOTALL)


@pytest.mark.parametrize("document", ["README.md", "docs/operations.md"])
def test_installs_need_kubectl_alone(document: str) -> None:
    """No documented step runs the kustomize program, which Debian's kubectl does not bring."""
    text = (REPO / document).read_text()
    assert not [line for block in sh_blocks(text) for line in block.splitlines()
                if re.match(r"\(?(cd \S+ && )?kustomize ", line.strip())]
    assert "kustomize edit" not in text


def readme_image_step() -> str:
    """The README's step that sets the image in the copy of an overlay (the same in both
    installs)."""
    section = (REPO / "README.md").read_text().split("\n## Install on a cluster\n", 1)[1]
    steps = {line for block in sh_blocks(section.split("\n## ", 1)[0])
             for line in block.splitlines() if "$REGISTRY/hpcbridge" in line}
    (step,) = steps
    return step


def test_readme_image_step_takes_a_tag_that_looks_like_a_number(
    tmp_path: Path, render: Render
) -> None:
    """A tag such as 2.0 stays a string (kustomize refuses a number)."""
    site = copy_overlay(tmp_path)
    subprocess.run(["bash", "-ec", readme_image_step()], cwd=tmp_path, check=True,
                   env={**os.environ, "REGISTRY": "registry.example.org", "TAG": "2.0"})
    assert images(render(site)) == dict.fromkeys(
        IMAGE_FIELDS, "registry.example.org/hpcbridge:2.0")
