"""The installs as the README runs them: what each applies, from a copy of the install
directories, and the names the hooks' Deployment, Service and certificates share; the sections
of docs/operations.md that change an install."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from tests.static.kube import REPO, Object, Render, load_all

README = REPO / "README.md"
OPERATIONS = REPO / "docs/operations.md"
NAMESPACE = "hpcbridge-system"
SERVICE_HOST = f"hpcbridge-hooks.{NAMESPACE}.svc"
SET_IMAGE = "registry.example.org/platform/hpcbridge:1.2.3"  # the tests' $REGISTRY/hpcbridge:$TAG
METACONTROLLER_VERSION = "v4.17.2"
METACONTROLLER_UPSTREAM = (  # the official production manifests, which deploy/metacontroller/ tunes
    f"https://github.com/metacontroller/metacontroller/manifests/production?ref={METACONTROLLER_VERSION}"
)
METACONTROLLER_INSTALL = "deploy/metacontroller/"
INSTALL_DIRS = ("crds", "deploy", "metacontroller")  # what the installs read
CONTROLLER_OF_INSTALL = {"deploy": "CompositeController", "decorator": "DecoratorController"}
INSTALLS = list(CONTROLLER_OF_INSTALL)
TOKEN_SECRET = "secret:hpcbridge-hooks-token"  # the README's `kubectl create secret` step
INSTALL_SOURCES = {  # what each README install applies or creates, in order
    "deploy": ["crds/", "deploy/", TOKEN_SECRET],
    "decorator": [
        "crds/", "deploy/base/", "deploy/tls/", TOKEN_SECRET,
        "metacontroller/decoratorcontroller.yaml",
    ],
}  # fmt: skip
SITE = "deploy/overlays/site/"  # the README's copy of an example overlay, with the image set
README_SOURCES = {  # what each README install applies: the same objects, from the site overlay
    "deploy": ["crds/", SITE, TOKEN_SECRET],
    "decorator": ["crds/", SITE, TOKEN_SECRET, "metacontroller/decoratorcontroller.yaml"],
}
HOOKS = "spec.template.spec.containers.[name=hooks]"
POD_SPEC = "spec.template.spec"
LABELS = {"app.kubernetes.io/name": "hpcbridge", "app.kubernetes.io/component": "hooks"}


def copy_install_dirs(workdir: Path) -> Path:
    for name in INSTALL_DIRS:
        shutil.copytree(REPO / name, workdir / name)
    return workdir


def render_install(install: str, render: Render) -> tuple[Object, ...]:
    """The objects of an install from the repository as it is (image hpcbridge:0.1.0), without
    the Secret its `kubectl create secret` step makes."""
    docs: list[Object] = []
    for source in INSTALL_SOURCES[install]:
        if source.startswith("secret:"):
            continue
        path = REPO / source
        docs += render(path) if path.is_dir() else load_all(path)
    return tuple(docs)


def operations_section(title: str) -> str:
    """The text of docs/operations.md's ``### title`` section, up to the next heading."""
    section = OPERATIONS.read_text().split(f"\n### {title}\n", 1)[1]
    return re.split(r"\n#{2,3} ", section, maxsplit=1)[0]
