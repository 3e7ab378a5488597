"""``spec.container``: the image a BatchJob runs on the cluster, and how. Pure: no I/O.

Every field is checked here the way the CRD checks it, and more: the reference by its full
grammar (``hooks.core.values.image``), paths as absolute paths of plain components, the
arguments as text without NUL. What the route's site decides — which runtime, which registries
and host paths are allowed, the cache — is applied afterwards (``hooks.core.sites.containers``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from hooks.core.spec.layout import DNS_SUBDOMAIN
from hooks.core.values.fields import SpecError, flag, mapping
from hooks.core.values.image import Container, Mount, PullPolicy, parse_reference
from hooks.core.values.shell_words import bindable
from hooks.core.values.text import has_control, shown

MAX_MOUNTS = 16
MAX_ARGS = 256
MAX_ARG = 4096
MAX_PULL_SECRETS = 8
MAX_PATH = 1024
RUNTIME_NAME = re.compile(r"[a-z][a-z0-9-]{0,31}")
SYSTEM_PATHS = ("/proc", "/sys", "/dev")
"""Paths inside an image that a mount may not cover: the runtime makes them."""
FIELDS = frozenset({"image", "imagePullPolicy", "imagePullSecrets", "command", "args",
                    "workingDir", "mounts", "runtime"})


def parse_container(raw: object) -> Container | None:
    """``spec.container`` checked, or None when it is absent; ``SpecError`` names the field."""
    if raw is None:
        return None
    spec = mapping(raw, "spec.container")
    unknown = sorted(set(spec) - FIELDS)
    if unknown:
        raise SpecError(f"spec.container.{unknown[0]} is not a field of spec.container.")
    policy = spec.get("imagePullPolicy", PullPolicy.IF_NOT_PRESENT.value)
    if not isinstance(policy, str) or policy not in set(PullPolicy):
        raise SpecError("spec.container.imagePullPolicy must be Always, IfNotPresent or Never, "
                        f"not {shown(policy)}.")
    command = spec.get("command")
    runtime = spec.get("runtime", "")
    if not isinstance(runtime, str) or (runtime and not RUNTIME_NAME.fullmatch(runtime)):
        raise SpecError(f"spec.container.runtime must name a runtime, not {shown(runtime)}.")
    return Container(
        image=parse_reference(spec.get("image"), "spec.container.image"),
        pull_policy=PullPolicy(policy),
        pull_secrets=_pull_secrets(spec.get("imagePullSecrets")),
        command=None if command is None else _words(command, "spec.container.command",
                                                    at_least=1),
        args=_words(spec.get("args", []), "spec.container.args", at_least=0),
        working_dir="" if spec.get("workingDir") is None else absolute_path(
            spec["workingDir"], "spec.container.workingDir"),
        mounts=_mounts(spec.get("mounts")),
        runtime=runtime,
    )


def absolute_path(value: object, where: str) -> str:
    """An absolute path without ``.``, ``..`` or empty components, control characters or
    backslashes; a trailing ``/`` is dropped."""
    text = (value.rstrip("/") or "/") if isinstance(value, str) and value else value
    if (not isinstance(text, str) or not text.startswith("/") or len(text) > MAX_PATH
            or has_control(text) or "\\" in text
            or (text != "/" and any(part in ("", ".", "..") for part in text[1:].split("/")))):
        raise SpecError(f"{where} must be an absolute path without '.', '..' or empty "
                        f"components, not {shown(value)}.")
    return text


def within(path: str, roots: Sequence[str]) -> bool:
    """Whether ``path`` is one of ``roots`` or below one, by whole components.

    >>> within("/scratch/lab", ["/scratch"]), within("/scratchy", ["/scratch"])
    (True, False)
    """
    return any(root == "/" or path == root or path.startswith(f"{root}/") for root in roots)


def _bindable(value: object, where: str) -> str:
    """An absolute path every runtime binds as it is written: without ``:`` or ``,``, which
    their bind options split on."""
    path = absolute_path(value, where)
    if not bindable(path):
        raise SpecError(f"{where} may not hold ':' or ',', which the runtimes' binds split on.")
    return path


def _words(value: object, where: str, *, at_least: int) -> tuple[str, ...]:
    if not isinstance(value, list) or not at_least <= len(value) <= MAX_ARGS:
        raise SpecError(f"{where} must be a list of {at_least} to {MAX_ARGS} strings.")
    for index, item in enumerate(value):
        if not isinstance(item, str) or len(item) > MAX_ARG or "\0" in item:
            raise SpecError(f"{where}[{index}] must be a string of at most {MAX_ARG} "
                            "characters without NUL.")
    if at_least and not value[0]:
        raise SpecError(f"{where}[0] must name a program.")
    return tuple(value)


def _pull_secrets(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_PULL_SECRETS:
        raise SpecError("spec.container.imagePullSecrets must be a list of at most "
                        f"{MAX_PULL_SECRETS} Secret references.")
    names = []
    for index, item in enumerate(value):
        name = mapping(item, f"spec.container.imagePullSecrets[{index}]").get("name")
        if not isinstance(name, str) or not DNS_SUBDOMAIN.fullmatch(name):
            raise SpecError(f"spec.container.imagePullSecrets[{index}].name must name a "
                            f"Secret, not {shown(name)}.")
        names.append(name)
    return tuple(dict.fromkeys(names))


def _mounts(value: object) -> tuple[Mount, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_MOUNTS:
        raise SpecError(f"spec.container.mounts must be a list of at most {MAX_MOUNTS} "
                        "mounts.")
    mounts = []
    for index, item in enumerate(value):
        where = f"spec.container.mounts[{index}]"
        raw = mapping(item, where)
        target = _bindable(raw.get("mountPath"), f"{where}.mountPath")
        if target == "/" or within(target, SYSTEM_PATHS):
            raise SpecError(f"{where}.mountPath may not be / or below {', '.join(SYSTEM_PATHS)}"
                            f", not {shown(target)}.")
        mounts.append(Mount(_bindable(raw.get("hostPath"), f"{where}.hostPath"), target,
                            flag(raw.get("readOnly", False), f"{where}.readOnly")))
    if len({mount.mount_path for mount in mounts}) < len(mounts):
        raise SpecError("spec.container.mounts bind two paths at the same mountPath.")
    return tuple(mounts)
