"""The ``spec.env`` and ``spec.inputs`` entries read from Secrets and ConfigMaps: variable names
bash accepts, one source per variable, the files each input writes and no name written twice or
used by the hooks (the S3 and claim inputs are ``hooks.core.spec.data``'s)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from hooks.core.spec import data
from hooks.core.spec.layout import DNS_SUBDOMAIN, relative_path, reserved_file
from hooks.core.values.fields import SpecError, flag, mapping
from hooks.core.values.job import EnvVar, Input, ObjectKey
from hooks.core.values.text import shown

MAX_ENV = 128
MAX_INPUTS = 32
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
READ_ONLY_NAMES = frozenset({"UID", "EUID", "PPID", "SHELLOPTS", "BASHOPTS", "BASH_VERSINFO"})
"""Variables bash refuses to be given: where ``/bin/sh`` is bash, setting one would stop the
job before its script (``hooks.schedulers.files.WRAPPER``)."""
Files = dict[str, str]
CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]{1,253}")
"""The form of a key of a Secret's or ConfigMap's data."""


def parse_env(raw: object) -> tuple[EnvVar, ...]:
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
            found.append(EnvVar(name, source=key_ref(mapping(value_from, f"{where}.valueFrom"),
                                                      f"{where}.valueFrom")))
    return tuple(found)


def one_of(raw: Mapping[str, Any], where: str, kinds: dict[str, str], expected: str
           ) -> tuple[str, str, Mapping[str, Any], str]:
    """The one reference ``raw`` holds of ``kinds`` (field: kind): its kind, field, the
    reference, and the name it gives, which must be an object's name in this namespace."""
    refs = [field for field in kinds if raw.get(field) is not None]
    if len(refs) != 1:
        raise SpecError(f"{where} {expected}.")
    field = refs[0]
    ref = mapping(raw[field], f"{where}.{field}")
    name = ref.get("name")
    if not isinstance(name, str) or not DNS_SUBDOMAIN.fullmatch(name):
        raise SpecError(f"{where}.{field}.name must name a {kinds[field]} in this namespace.")
    return kinds[field], field, ref, name


def key_ref(raw: Mapping[str, Any], where: str) -> ObjectKey:
    kind, field, ref, name = one_of(
        raw, where, {"secretKeyRef": "Secret", "configMapKeyRef": "ConfigMap"},
        "must have exactly one of secretKeyRef and configMapKeyRef")
    key = ref.get("key")
    if not isinstance(key, str) or not CONFIG_KEY.fullmatch(key):
        raise SpecError(f"{where}.{field}.key must be a key of the {kind}'s data.")
    return ObjectKey(kind, name, key, flag(ref.get("optional", False), f"{where}.{field}.optional"))


def parse_inputs(raw: object, writes_file: Callable[[str], bool]
                 ) -> tuple[tuple[Input, ...], Files]:
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
        kind, field, ref, name = one_of(
            entry, where, {"configMap": "ConfigMap", "secret": "Secret"},
            "needs one of configMap, secret, s3, persistentVolumeClaim")
        path = entry.get("path")
        folder = "" if path is None else relative_path(path, f"{where}.path")
        items = parse_items(entry.get("items"), f"{where}.items")
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


def parse_items(raw: object, where: str) -> tuple[tuple[str, str], ...]:
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
