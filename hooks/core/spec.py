"""Validation of a BatchJob spec: the rules the CRD cannot express, and the CRD's own again.

The hooks may run behind an older CRD, or as a DecoratorController, so they never trust that the
API server has checked anything. ``parse`` reads the raw spec once into a ``ParsedSpec``: where
the attempt goes (backend and cluster, which an edit that breaks another rule leaves usable for
an attempt already submitted), the frozen ``Spec`` when every rule holds, or one sentence that
names the field and the expected form. A scheduler's own block (``spec.slurm``,
``spec.htcondor``) is validated by that scheduler's rules, which come in as an argument; the
field readers are ``hooks.core.fields``, the route and file-name rules ``hooks.core.layout``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, fields, is_dataclass, replace
from typing import Any

from hooks.core import data, units
from hooks.core.fields import INT64, SpecError, flag, mapping, optional_number, whole_number
from hooks.core.layout import DNS_SUBDOMAIN, cluster_ref, relative_path, reserved_file
from hooks.core.model import ClusterRef, EnvVar, Input, ObjectKey, Reason, Resources, Spec
from hooks.core.scheduler import Rules
from hooks.core.text import shown

MAX_SCRIPT_BYTES = 256 * 1024
MAX_ENV = 128
MAX_INPUTS = 32
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
READ_ONLY_NAMES = frozenset({"UID", "EUID", "PPID", "SHELLOPTS", "BASHOPTS", "BASH_VERSINFO"})
"""Variables bash refuses to be given: where ``/bin/sh`` is bash, setting one would stop the
job before its script (``hooks.schedulers.files.WRAPPER``)."""
Files = dict[str, str]
CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]{1,253}")
"""The form of a key of a Secret's or ConfigMap's data."""


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
    (``hooks.core.routing``)."""


def parse(raw: object, rules: Rules) -> ParsedSpec:
    """Read ``raw`` (the BatchJob's ``spec``) once. Pure: no I/O."""
    written = raw.get("backend") if isinstance(raw, dict) else None
    backend = written if isinstance(written, str) else ""
    try:
        placement = parse_placement(raw, rules)
    except SpecError as err:
        return ParsedSpec(backend, None, None, str(err))
    try:
        spec = _spec(raw, placement, rules)
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


def _spec(raw: object, placement: Placement, rules: Rules) -> Spec:
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
    script = _script(spec.get("script"))
    rules[backend].check_script(script)
    store, (inputs, files) = data.storage(spec.get("storage")), _inputs(
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
        env=_env(spec.get("env")),
        inputs=inputs,
        storage=store,
        data_inputs=fetched,
        outputs=data.outputs(spec.get("outputs"), store),
        suspend=flag(spec.get("suspend", False), "spec.suspend"),
        active_deadline_seconds=None if deadline is None else whole_number(
            deadline, "spec.activeDeadlineSeconds", minimum=1, maximum=INT64),
    )


def digest(spec: Spec) -> str:
    """What makes an attempt, as 16 hex digits: the whole spec but ``suspend`` and
    ``activeDeadlineSeconds``, which an attempt follows while it runs. Fields at their
    defaults are left out, so that a field added to the spec later leaves the digests of
    specs that do not use it as they were. A BatchCluster's host keys are left out too: its
    platform team rotates them without starting new attempts."""
    kept = replace(spec, suspend=False, active_deadline_seconds=None,
                   cluster=replace(spec.cluster, known_hosts=""))
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


def _env(raw: object) -> tuple[EnvVar, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or len(raw) > MAX_ENV:
        raise SpecError(f"spec.env must be a list of at most {MAX_ENV} variables.")
    found: list[EnvVar] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        where = f"spec.env[{i}]"
        entry = mapping(item, where)
        name = entry.get("name")
        if not isinstance(name, str) or not ENV_NAME.fullmatch(name) or len(name) > 253:
            raise SpecError(f"{where}.name must be a variable name (letters, digits and _, not "
                            f"starting with a digit), not {shown(name)}.")
        if name in READ_ONLY_NAMES:
            raise SpecError(f"{where}.name: {name} is read-only in bash, which runs the job's "
                            "environment on many clusters; choose another name.")
        if name in seen:
            raise SpecError(f"{where}.name: {name} is set twice in spec.env.")
        seen.add(name)
        value, value_from = entry.get("value"), entry.get("valueFrom")
        if (value is None) == (value_from is None):
            raise SpecError(f"{where} ({name}) must have either value or valueFrom.")
        if value is not None:
            if not isinstance(value, str) or "\0" in value:
                raise SpecError(f"{where}.value ({name}) must be a string without NUL "
                                "characters.")
            found.append(EnvVar(name, value))
        else:
            found.append(EnvVar(name, source=_key_ref(mapping(value_from, f"{where}.valueFrom"),
                                                      f"{where}.valueFrom")))
    return tuple(found)


def _key_ref(raw: Mapping[str, Any], where: str) -> ObjectKey:
    refs = [(kind, field) for kind, field in (("Secret", "secretKeyRef"),
                                              ("ConfigMap", "configMapKeyRef"))
            if raw.get(field) is not None]
    if len(refs) != 1:
        raise SpecError(f"{where} must have exactly one of secretKeyRef and configMapKeyRef.")
    kind, field = refs[0]
    ref = mapping(raw[field], f"{where}.{field}")
    name, key = ref.get("name"), ref.get("key")
    if not isinstance(name, str) or not DNS_SUBDOMAIN.fullmatch(name):
        raise SpecError(f"{where}.{field}.name must name a {kind} in this namespace.")
    if not isinstance(key, str) or not CONFIG_KEY.fullmatch(key):
        raise SpecError(f"{where}.{field}.key must be a key of the {kind}'s data.")
    return ObjectKey(kind, name, key, flag(ref.get("optional", False), f"{where}.{field}.optional"))


def _inputs(raw: object, writes_file: Callable[[str], bool]) -> tuple[tuple[Input, ...], Files]:
    """The ConfigMap and Secret entries of ``spec.inputs``, and the files (or directories) they
    write, by the field that names each."""
    if raw is None:
        return (), {}
    if not isinstance(raw, list) or len(raw) > MAX_INPUTS:
        raise SpecError(f"spec.inputs must be a list of at most {MAX_INPUTS} entries.")
    found: list[Input] = []
    files: dict[str, str] = {}
    folders: dict[str, str] = {}
    for i, item in enumerate(raw):
        where = f"spec.inputs[{i}]"
        entry = mapping(item, where)
        if data.is_data_input(entry):
            continue
        sources = [(kind, field) for kind, field in (("ConfigMap", "configMap"),
                                                     ("Secret", "secret"))
                   if entry.get(field) is not None]
        if len(sources) != 1:
            raise SpecError(f"{where} needs one of configMap, secret, s3, persistentVolumeClaim.")
        kind, field = sources[0]
        ref = mapping(entry[field], f"{where}.{field}")
        name = ref.get("name")
        if not isinstance(name, str) or not DNS_SUBDOMAIN.fullmatch(name):
            raise SpecError(f"{where}.{field}.name must name a {kind} in this namespace.")
        path = entry.get("path")
        folder = "" if path is None else relative_path(path, f"{where}.path")
        items = _items(entry.get("items"), f"{where}.items")
        for _, file in items:
            target = f"{folder}/{file}" if folder else file
            if reserved_file(target, writes_file):
                raise SpecError(f"{where}.items: {shown(target)} is a name the hooks use in "
                                "the job's directory; choose another path.")
            if target in files:
                raise SpecError(f"{where}.items: {shown(target)} is written by "
                                f"{files[target]} too.")
            files[target] = where
        if folder and reserved_file(folder, writes_file):
            raise SpecError(f"{where}.path: {shown(folder)} is a name the hooks use in the "
                            "job's directory; choose another path.")
        if folder and not items:
            folders[folder] = where
        found.append(Input(kind, name, folder, items,
                           flag(ref.get("optional", False), f"{where}.{field}.optional")))
    return tuple(found), {**folders, **files}


def _items(raw: object, where: str) -> tuple[tuple[str, str], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not raw:
        raise SpecError(f"{where} must be a non-empty list of {{key, path}}.")
    items = []
    for i, item in enumerate(raw):
        entry = mapping(item, f"{where}[{i}]")
        key = entry.get("key")
        if not isinstance(key, str) or not CONFIG_KEY.fullmatch(key):
            raise SpecError(f"{where}[{i}].key must be a key of the object's data.")
        items.append((key, relative_path(entry.get("path"), f"{where}[{i}].path")))
    return tuple(items)


def _script(script: object) -> str:
    if not isinstance(script, str) or not script.startswith("#!"):
        raise SpecError('spec.script must be a batch script starting with "#!".')
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
