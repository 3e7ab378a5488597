"""The data a BatchJob moves: ``spec.storage`` (the object store), the inputs fetched from S3
or a PersistentVolumeClaim (``spec.inputs`` entries with ``s3`` or ``persistentVolumeClaim``)
and ``spec.outputs`` (collected after the attempt ends). Parsing and the rules the CRD cannot
say, each failure one sentence naming the field (``SpecError``). Pure: no I/O.

The bytes never pass through a hook call: the mover Pods (``hooks.core.wire.mover_pods``) copy them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from hooks.core.spec import endpoints
from hooks.core.spec.endpoints import Endpoint
from hooks.core.spec.layout import DNS_SUBDOMAIN, relative_path, reserved_file
from hooks.core.values.fields import SpecError, flag, mapping
from hooks.core.values.storage import DataInput, Output, S3Object, S3Storage, Volume, When
from hooks.core.values.text import has_control, shown

MAX_OUTPUTS = 64
MAX_KEY = 1024
BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
IP_ADDRESS = re.compile(r"\d+\.\d+\.\d+\.\d+")
GLOB_PART = re.compile(r"[-._a-zA-Z0-9+@=*?\[\]!]+")
"""A component of an output pattern: the characters of a file name and the glob's ``* ? [ ]
!`` (``**`` for any number of directories)."""


def is_data_input(raw: object) -> bool:
    """Whether a ``spec.inputs`` entry is fetched by the mover (``s3`` or
    ``persistentVolumeClaim``) rather than read from a ConfigMap or Secret."""
    return isinstance(raw, dict) and (raw.get("s3") is not None
                                      or raw.get("persistentVolumeClaim") is not None)


def storage(raw: object, allowed: Collection[Endpoint] = ()) -> S3Storage | None:
    """``spec.storage``; its endpoint must lead to a public store unless it is on one of the
    ``allowed`` lists (``hooks.core.spec.endpoints``)."""
    if raw is None:
        return None
    s3 = mapping(mapping(raw, "spec.storage").get("s3"), "spec.storage.s3")
    where = "spec.storage.s3.endpoint"
    endpoint = endpoints.parse(s3.get("endpoint"), where)
    listed = endpoint in allowed
    refused = "" if listed else endpoints.refusal(endpoint, where)
    if refused:
        raise SpecError(refused)
    region = s3.get("region", "")
    if not isinstance(region, str) or not re.fullmatch(r"[a-z0-9-]{0,64}", region):
        raise SpecError("spec.storage.s3.region must be a region name such as us-east-1.")
    ref = mapping(s3.get("secretRef"), "spec.storage.s3.secretRef").get("name")
    if not isinstance(ref, str) or not DNS_SUBDOMAIN.fullmatch(ref):
        raise SpecError("spec.storage.s3.secretRef.name must name a Secret in this namespace.")
    return S3Storage(str(s3["endpoint"]).rstrip("/"), ref, region, allowed=listed)


def data_inputs(raw: object, store: S3Storage | None) -> tuple[DataInput, ...]:
    """The entries of ``spec.inputs`` the inputs mover fetches (the spec checked the list)."""
    if not isinstance(raw, list):
        return ()
    return tuple(data_input(mapping(item, f"spec.inputs[{i}]"), f"spec.inputs[{i}]", store)
                 for i, item in enumerate(raw) if is_data_input(item))


def data_input(entry: Mapping[str, Any], where: str, store: S3Storage | None) -> DataInput:
    """One ``spec.inputs`` entry with ``s3`` or ``persistentVolumeClaim``."""
    s3, volume = _source(entry, where, store, output=False)
    path = entry.get("path")
    folder = path.endswith("/") if isinstance(path, str) else False
    relative_path(path[:-1] if folder and isinstance(path, str) else path, f"{where}.path")
    assert isinstance(path, str)
    if s3 is not None and s3.prefix and not folder:
        raise SpecError(f"{where}.path must end in / (a directory): {where}.s3.prefix names "
                        "many objects.")
    return DataInput(path, s3, volume)


def outputs(raw: object, store: S3Storage | None) -> tuple[Output, ...]:
    """``spec.outputs``."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or len(raw) > MAX_OUTPUTS:
        raise SpecError(f"spec.outputs must be a list of at most {MAX_OUTPUTS} entries.")
    found = []
    for i, item in enumerate(raw):
        where = f"spec.outputs[{i}]"
        entry = mapping(item, where)
        s3, volume = _source(entry, where, store, output=True)
        when = entry.get("when", When.ON_SUCCESS.value)
        if when not in [w.value for w in When]:
            raise SpecError(f"{where}.when must be OnSuccess, OnFailure or Always, not "
                            f"{shown(when)}.")
        found.append(Output(_pattern(entry.get("path"), f"{where}.path"), s3, volume,
                            When(when), flag(entry.get("optional", False), f"{where}.optional")))
    return tuple(found)


def check_targets(
    inputs: Sequence[DataInput], files: Mapping[str, str], writes_file: Callable[[str], bool],
) -> None:
    """No two inputs write the same file, and none takes a name the hooks use: ``files`` are
    the ConfigMap and Secret inputs' files known from the spec (path: the field naming it)."""
    taken = dict(files)
    for item in inputs:
        where = f"spec.inputs: the input to {shown(item.path)}"
        target = item.path.rstrip("/")
        if reserved_file(target, writes_file):
            raise SpecError(f"{where} takes a name the hooks use in the job's directory; "
                            "choose another path.")
        for other, owner in taken.items():
            if other == target or other.startswith(target + "/") or target.startswith(
                    other + "/"):
                raise SpecError(f"{where} and {owner} write the same files; choose paths "
                                "that do not overlap.")
        taken[target] = f"the input to {shown(item.path)}"


def matches(pattern: str, path: str) -> bool:
    """Whether ``path`` (relative, ``/``-separated) matches an output pattern: ``*``, ``?`` and
    ``[...]`` within one component, ``**`` for any number of components.

    >>> [matches("results/**/*.h5", p) for p in ("results/a.h5", "results/x/y/b.h5", "b.h5")]
    [True, True, False]
    """
    return _match(pattern.split("/"), path.split("/"))


def _match(parts: list[str], names: list[str]) -> bool:
    if not parts:
        return not names
    if parts[0] == "**":
        return any(_match(parts[1:], names[i:]) for i in range(len(names) + 1))
    return bool(names) and _component(parts[0], names[0]) and _match(parts[1:], names[1:])


def _component(pattern: str, name: str) -> bool:
    if name.startswith(".") and not pattern.startswith("."):
        return False
    regex = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            regex.append("[^/]*")
        elif c == "?":
            regex.append("[^/]")
        elif c == "[" and "]" in pattern[i + 2:]:
            end = pattern.index("]", i + 2)
            body = pattern[i + 1:end]
            negated = body.startswith("!")
            chars = (body[1:] if negated else body).replace("^", "\\^")
            regex.append(f"[{'^' if negated else ''}{chars}]")
            i = end
        else:
            regex.append(re.escape(c))
        i += 1
    return re.fullmatch("".join(regex), name) is not None


def _pattern(value: object, where: str) -> str:
    if (not isinstance(value, str) or not value or len(value) > 1024 or value.endswith("/")
            or any(part in (".", "..") or not GLOB_PART.fullmatch(part)
                   for part in value.split("/"))):
        raise SpecError(f"{where} must be a relative file pattern inside the job's directory "
                        "(components of letters, digits, -._+@= and the glob's * ? [ ] !, "
                        f"none of them '.' or '..'), not {shown(value)}.")
    return value


def _source(
    entry: Mapping[str, Any], where: str, store: S3Storage | None, *, output: bool,
) -> tuple[S3Object | None, Volume | None]:
    present = [f for f in ("s3", "persistentVolumeClaim") if entry.get(f) is not None]
    if len(present) != 1:
        raise SpecError(f"{where} must have exactly one of s3 and persistentVolumeClaim.")
    if present[0] == "persistentVolumeClaim":
        return None, _volume(mapping(entry["persistentVolumeClaim"],
                                     f"{where}.persistentVolumeClaim"),
                             f"{where}.persistentVolumeClaim")
    if store is None:
        raise SpecError(f"{where}.s3 needs spec.storage.s3 (the object store and its keys).")
    return _object(mapping(entry["s3"], f"{where}.s3"), f"{where}.s3", output=output), None


def _volume(raw: Mapping[str, Any], where: str) -> Volume:
    claim = raw.get("claimName")
    if not isinstance(claim, str) or not DNS_SUBDOMAIN.fullmatch(claim):
        raise SpecError(f"{where}.claimName must name a PersistentVolumeClaim in this "
                        "namespace.")
    sub = raw.get("subPath")
    return Volume(claim, "" if sub in (None, "") else relative_path(sub, f"{where}.subPath"))


def _object(raw: Mapping[str, Any], where: str, *, output: bool) -> S3Object:
    bucket = raw.get("bucket")
    if (not isinstance(bucket, str) or not BUCKET.fullmatch(bucket) or ".." in bucket
            or IP_ADDRESS.fullmatch(bucket) or bucket.startswith("xn--")
            or bucket.endswith("-s3alias")):
        raise SpecError(f"{where}.bucket must be an S3 bucket name (3 to 63 lower-case "
                        f"letters, digits, '.' and '-'), not {shown(bucket)}.")
    key, prefix = raw.get("key"), raw.get("prefix")
    if output and key is not None:
        raise SpecError(f"{where} takes a prefix, not a key: each file's key is the prefix "
                        "and its path in the job's directory.")
    if not output and (key is None) == (prefix is None):
        raise SpecError(f"{where} must have exactly one of key and prefix.")
    if key is not None:
        return S3Object(bucket, key=_key(key, f"{where}.key", folder=False))
    return S3Object(bucket, prefix=_key(prefix or "", f"{where}.prefix", folder=True))


def _key(value: object, where: str, *, folder: bool) -> str:
    if value == "" and folder:
        return ""
    if (not isinstance(value, str) or not value or len(value.encode()) > MAX_KEY
            or has_control(value) or value.startswith("/")
            or (folder and not value.endswith("/"))
            or any(part in ("", ".", "..") for part in value.removesuffix("/").split("/"))):
        form = "ending in /" if folder else "naming one object"
        raise SpecError(f"{where} must be an object key {form}, relative (no leading /), "
                        "without empty, '.' or '..' components or control characters, "
                        f"not {shown(value)}.")
    return value
