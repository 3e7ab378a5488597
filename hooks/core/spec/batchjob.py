"""Validation of a BatchJob spec: the rules the CRD cannot express, and the CRD's own again.

The hooks may run behind an older CRD, or as a DecoratorController, so they never trust that the
API server has checked anything. ``parse`` reads the raw spec once into a ``ParsedSpec``: where
the attempt goes (backend and cluster, which an edit that breaks another rule leaves usable for
an attempt already submitted), the frozen ``Spec`` when every rule holds, or one sentence that
names the field and the expected form. A scheduler's own block (``spec.slurm``,
``spec.htcondor``) is validated by that scheduler's rules, which come in as an argument; the
field readers are ``hooks.core.values.fields``, the route and file-name rules
``hooks.core.spec.layout``, the env and the Secret and ConfigMap inputs
``hooks.core.spec.env_inputs``, the S3 and claim data ``hooks.core.spec.data``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from dataclasses import MISSING, dataclass, fields, is_dataclass, replace

from hooks.core.spec import data, dependencies
from hooks.core.spec.container import parse_container
from hooks.core.spec.endpoints import Endpoint
from hooks.core.spec.env_inputs import parse_env, parse_inputs
from hooks.core.spec.layout import cluster_ref
from hooks.core.values import units
from hooks.core.values.fields import (
    INT64,
    SpecError,
    flag,
    mapping,
    optional_number,
    whole_number,
)
from hooks.core.values.job import ClusterRef, Resources, Spec
from hooks.core.values.reasons import Reason
from hooks.core.values.sdk import Rules
from hooks.core.values.text import shown

MAX_SCRIPT_BYTES = 256 * 1024


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
    digest: str = ""
    """``digest(spec)``; empty when ``spec`` is None."""
    reason: Reason = Reason.INVALID_SPEC
    """Why ``error``: an invalid spec, or a BatchCluster that the BatchJob waits for
    (``hooks.core.sites.routing``)."""


@dataclass(frozen=True, slots=True)
class Logs:
    """``spec.logs``: whether an attempt gets a log Pod, and whether it follows the output
    while the job runs."""

    pod: bool = True
    follow: bool = False


def logs_choice(raw: object) -> Logs:
    """``spec.logs`` read on its own, the defaults where it cannot be read: an attempt already
    on the cluster keeps its log Pod when the rest of the spec no longer reads on its route
    (its BatchCluster deleted). Pure: no I/O."""
    try:
        logs = mapping(mapping(raw, "spec").get("logs") or {}, "spec.logs")
        return Logs(flag(logs.get("pod", True), "spec.logs.pod"),
                    flag(logs.get("follow", False), "spec.logs.follow"))
    except SpecError:
        return Logs()


def parse(raw: object, rules: Rules, *, endpoints: Collection[Endpoint] = ()) -> ParsedSpec:
    """Read ``raw`` (the BatchJob's ``spec``) once; ``endpoints`` are the object stores allowed
    whatever their address (``hooks.core.spec.endpoints``). Pure: no I/O."""
    written = raw.get("backend") if isinstance(raw, dict) else None
    backend = written if isinstance(written, str) else ""
    try:
        placement = parse_placement(raw, rules)
    except SpecError as err:
        return ParsedSpec(backend, None, None, str(err))
    try:
        spec = _spec(raw, placement, rules, endpoints)
    except SpecError as err:
        return ParsedSpec(backend, placement, None, str(err))
    return ParsedSpec(backend, placement, spec, "", digest(spec))


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
    return Placement(backend, cluster_ref(spec.get("cluster"), "spec.cluster"))


def _spec(raw: object, placement: Placement, rules: Rules, endpoints: Collection[Endpoint]
          ) -> Spec:
    spec = mapping(raw, "spec")
    backend = placement.backend
    for other in rules:
        if other != backend and spec.get(other) is not None:
            raise SpecError(f"spec.{other} is set but spec.backend is {backend}; remove one.")
    resources = parse_resources(spec.get("resources") or {}, "spec.resources")
    options = rules[backend].parse_options(
        mapping(spec.get(backend) or {}, f"spec.{backend}"), resources)
    logs = mapping(spec.get("logs") or {}, "spec.logs")
    deadline = spec.get("activeDeadlineSeconds")
    container = parse_container(spec.get("container"))
    script = "" if container is not None and spec.get("script") is None else _script(
        spec.get("script"))
    rules[backend].check_script(script)
    store, (inputs, files) = data.storage(spec.get("storage"), endpoints), parse_inputs(
        spec.get("inputs"), rules[backend].writes_file)
    fetched = data.data_inputs(spec.get("inputs"), store)
    data.check_targets(fetched, files, rules[backend].writes_file)
    return Spec(
        backend=backend,
        cluster=placement.cluster,
        script=script,
        resources=resources,
        options=options,
        logs_pod=flag(logs.get("pod", True), "spec.logs.pod"),
        logs_follow=flag(logs.get("follow", False), "spec.logs.follow"),
        backoff_limit=whole_number(spec.get("backoffLimit", 0), "spec.backoffLimit", minimum=0),
        env=parse_env(spec.get("env")),
        inputs=inputs,
        storage=store,
        data_inputs=fetched,
        outputs=data.outputs(spec.get("outputs"), store),
        suspend=flag(spec.get("suspend", False), "spec.suspend"),
        active_deadline_seconds=None if deadline is None else whole_number(
            deadline, "spec.activeDeadlineSeconds", minimum=1, maximum=INT64),
        depends_on=dependencies.depends_on(spec.get("dependsOn")),
        dependency_grace_seconds=dependencies.grace_seconds(
            spec.get("dependencyGracePeriodSeconds")),
        container=container,
    )


def digest(spec: Spec) -> str:
    """What makes an attempt, as 16 hex digits: the whole spec but ``suspend`` and
    ``activeDeadlineSeconds``, which an attempt follows while it runs. Fields at their
    defaults are left out, so that a field added to the spec later leaves the digests of
    specs that do not use it as they were. A BatchCluster's host keys are left out too: its
    platform team rotates them without starting new attempts; and so is whether the object
    store is on an allow-list, which the platform team edits."""
    kept = replace(spec, suspend=False, active_deadline_seconds=None,
                   cluster=replace(spec.cluster, known_hosts=""),
                   storage=spec.storage and replace(spec.storage, allowed=False))
    return hashlib.sha256(repr(essence(kept)).encode()).hexdigest()[:16]


def essence(value: object) -> object:
    """``value`` with every dataclass reduced to its fields that differ from their defaults,
    by name."""
    if is_dataclass(value) and not isinstance(value, type):
        found = []
        for item in fields(value):
            current = getattr(value, item.name)
            if item.default is not MISSING:
                if current == item.default:
                    continue
            elif item.default_factory is not MISSING and current == item.default_factory():
                continue
            found.append((item.name, essence(current)))
        return (type(value).__name__, tuple(found))
    if isinstance(value, tuple):
        return tuple(essence(v) for v in value)
    return value


def _script(script: object) -> str:
    if not isinstance(script, str) or not script.startswith("#!"):
        raise SpecError('spec.script must be a batch script starting with "#!" (it may be left '
                        'out only with spec.container).')
    # UTF-8 takes at most 4 bytes a character: only a script that long can be too big.
    if len(script) * 4 > MAX_SCRIPT_BYTES and len(script.encode()) > MAX_SCRIPT_BYTES:
        raise SpecError("spec.script is larger than 256 KiB; stage big inputs on the cluster.")
    return script


def parse_resources(value: object, where: str) -> Resources:
    """``spec.resources`` (or a BatchCluster's defaults for it), each field checked."""
    raw = mapping(value, where)
    time_limit = raw.get("timeLimit")
    memory = raw.get("memory")
    plausible = (isinstance(time_limit, str) and len(time_limit) <= 32) or (
        isinstance(time_limit, int) and not isinstance(time_limit, bool)
        and time_limit.bit_length() <= 64)
    if time_limit is not None and not plausible:
        raise SpecError(f"{where}.timeLimit: {shown(time_limit)} is not a duration "
                        "like 90s, 30m, 2h or 1d12h.")
    try:
        seconds = None if time_limit is None else units.parse_time_limit(str(time_limit))
    except ValueError as err:
        raise SpecError(f"{where}.timeLimit: {err}.") from err
    try:
        mib = None if memory is None else units.parse_memory_mib(memory)
    except ValueError as err:
        raise SpecError(f"{where}.memory: {err}.") from err
    return Resources(
        cpus=optional_number(raw.get("cpus"), f"{where}.cpus", minimum=1),
        memory_mib=mib,
        gpus=optional_number(raw.get("gpus"), f"{where}.gpus", minimum=0),
        time_limit_seconds=seconds,
        nodes=optional_number(raw.get("nodes"), f"{where}.nodes", minimum=1),
    )
