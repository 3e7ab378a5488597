"""Validation of a BatchJob spec: the rules the CRD cannot express, and the CRD's own again.

The hooks may run behind an older CRD, or as a DecoratorController, so they never trust that the
API server has checked anything. ``parse`` reads the raw spec once into a ``ParsedSpec``: where
the attempt goes (backend and cluster, which an edit that breaks another rule leaves usable for
an attempt already submitted), the frozen ``Spec`` when every rule holds, or one sentence that
names the field and the expected form. A scheduler's own block (``spec.slurm``,
``spec.htcondor``) is validated by that scheduler's rules, which come in as an argument.

The field readers below (``mapping``, ``whole_number``, ...) are shared with the scheduler
packages, so that every message has the same form.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hooks.core import units
from hooks.core.model import ClusterRef, Resources, Spec
from hooks.core.scheduler import Rules
from hooks.core.text import has_control, shown

MAX_SCRIPT_BYTES = 256 * 1024
INT32 = 2**31 - 1
DNS_SUBDOMAIN = re.compile(
    r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
"""The form of a Kubernetes object's name (a BatchJob's, a Secret's)."""


class SpecError(ValueError):
    """The spec breaks a rule; the message is one readable sentence for ``status.message``."""


@dataclass(frozen=True, slots=True)
class Placement:
    """Where an attempt goes: the scheduler (``spec.backend``) and the cluster."""

    backend: str
    cluster: ClusterRef


@dataclass(frozen=True, slots=True)
class ParsedSpec:
    backend: str
    """``spec.backend`` as written, when it is text (for messages about an invalid spec)."""
    placement: Placement | None
    spec: Spec | None
    error: str
    """Why ``spec`` (or ``placement``) is None; empty when the spec is valid."""


def parse(raw: object, rules: Rules) -> ParsedSpec:
    """Read ``raw`` (the BatchJob's ``spec``) once. Pure: no I/O."""
    written = raw.get("backend") if isinstance(raw, dict) else None
    backend = written if isinstance(written, str) else ""
    try:
        placement = parse_placement(raw, rules)
    except SpecError as err:
        return ParsedSpec(backend, None, None, str(err))
    try:
        return ParsedSpec(backend, placement, _spec(raw, placement, rules), "")
    except SpecError as err:
        return ParsedSpec(backend, placement, None, str(err))


def parse_spec(raw: object, rules: Rules) -> Spec:
    """The valid ``Spec`` of ``raw``, or ``SpecError``. Pure: no I/O."""
    parsed = parse(raw, rules)
    if parsed.spec is None:
        raise SpecError(parsed.error)
    return parsed.spec


def parse_placement(raw: object, rules: Rules) -> Placement:
    """Only the backend and cluster of a spec. Pure: no I/O."""
    spec = mapping(raw, "spec")
    backend = spec.get("backend")
    if not isinstance(backend, str) or backend not in rules:
        raise SpecError(f"spec.backend must be one of {', '.join(rules)}, not {shown(backend)}.")
    return Placement(backend, _cluster(mapping(spec.get("cluster"), "spec.cluster")))


def _spec(raw: object, placement: Placement, rules: Rules) -> Spec:
    spec = mapping(raw, "spec")
    backend = placement.backend
    for other in rules:
        if other != backend and spec.get(other) is not None:
            raise SpecError(f"spec.{other} is set but spec.backend is {backend}; remove one.")
    resources = _resources(mapping(spec.get("resources") or {}, "spec.resources"))
    options = rules[backend].parse_options(
        mapping(spec.get(backend) or {}, f"spec.{backend}"), resources)
    logs = mapping(spec.get("logs") or {}, "spec.logs")
    return Spec(
        backend=backend,
        cluster=placement.cluster,
        script=_script(spec.get("script")),
        resources=resources,
        options=options,
        logs_pod=flag(logs.get("pod", True), "spec.logs.pod"),
        logs_follow=flag(logs.get("follow", False), "spec.logs.follow"),
        backoff_limit=whole_number(spec.get("backoffLimit", 0), "spec.backoffLimit", minimum=0),
    )


def mapping(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise SpecError(f"{where} must be an object.")
    return value


def whole_number(value: object, where: str, *, minimum: int, maximum: int = INT32) -> int:
    """A whole number in range; without a maximum of its own, one that fits Kubernetes' int32
    (a number too long to print must never reach a message or a command)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"{where} must be a whole number, not {shown(value)}.")
    if value < minimum or value > maximum:
        upper = f" and at most {maximum}" if maximum != INT32 or value > maximum else ""
        raise SpecError(f"{where} must be at least {minimum}{upper}, not {shown(value)}.")
    return value


def _optional_number(value: object, where: str, *, minimum: int) -> int | None:
    return None if value is None else whole_number(value, where, minimum=minimum)


def flag(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise SpecError(f"{where} must be true or false, not {shown(value)}.")
    return value


def line(value: object, where: str) -> str | None:
    """An optional single-line string."""
    if value is None:
        return None
    if not isinstance(value, str) or not value or has_control(value):
        raise SpecError(f"{where} must be a non-empty single-line string without control "
                        "characters.")
    return value


def _cluster(cluster: Mapping[str, Any]) -> ClusterRef:
    host = cluster.get("host")
    if (not isinstance(host, str) or not host or len(host) > 253 or has_control(host)
            or any(c.isspace() for c in host)
            or not all(0 < len(label) < 64 for label in host.removesuffix(".").split("."))):
        raise SpecError("spec.cluster.host must be the SSH host name of the login node.")
    secret_ref = mapping(cluster.get("secretRef"), "spec.cluster.secretRef")
    secret_name = secret_ref.get("name")
    if not isinstance(secret_name, str) or not DNS_SUBDOMAIN.fullmatch(secret_name):
        raise SpecError("spec.cluster.secretRef.name must name a Secret in this namespace.")
    return ClusterRef(
        host=host,
        port=whole_number(cluster.get("port", 22), "spec.cluster.port", minimum=1,
                          maximum=65535),
        secret_name=secret_name,
        insecure_skip_host_key_check=flag(
            cluster.get("insecureSkipHostKeyCheck", False), "spec.cluster.insecureSkipHostKeyCheck"
        ),
    )


def _script(script: object) -> str:
    if not isinstance(script, str) or not script.startswith("#!"):
        raise SpecError('spec.script must be a batch script starting with "#!".')
    # UTF-8 takes at most 4 bytes a character: only a script that long can be too big.
    if len(script) * 4 > MAX_SCRIPT_BYTES and len(script.encode()) > MAX_SCRIPT_BYTES:
        raise SpecError("spec.script is larger than 256 KiB; stage big inputs on the cluster.")
    return script


def _resources(raw: Mapping[str, Any]) -> Resources:
    time_limit = raw.get("timeLimit")
    memory = raw.get("memory")
    plausible = (isinstance(time_limit, str) and len(time_limit) <= 32) or (
        isinstance(time_limit, int) and not isinstance(time_limit, bool)
        and time_limit.bit_length() <= 64)
    if time_limit is not None and not plausible:
        raise SpecError(f"spec.resources.timeLimit: {shown(time_limit)} is not a duration "
                        "like 90s, 30m, 2h or 1d12h.")
    try:
        seconds = None if time_limit is None else units.parse_time_limit(str(time_limit))
    except ValueError as err:
        raise SpecError(f"spec.resources.timeLimit: {err}.") from err
    try:
        mib = None if memory is None else units.parse_memory_mib(memory)
    except ValueError as err:
        raise SpecError(f"spec.resources.memory: {err}.") from err
    return Resources(
        cpus=_optional_number(raw.get("cpus"), "spec.resources.cpus", minimum=1),
        memory_mib=mib,
        gpus=_optional_number(raw.get("gpus"), "spec.resources.gpus", minimum=0),
        time_limit_seconds=seconds,
        nodes=_optional_number(raw.get("nodes"), "spec.resources.nodes", minimum=1),
    )
