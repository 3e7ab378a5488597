"""What an attempt carries to the cluster besides its script: the variables of ``spec.env``
and the files of ``spec.inputs``, read from the Secrets and ConfigMaps Metacontroller sent with
the request. Resolved once, when the attempt is submitted: a later change to those objects
does not reach an attempt already on the cluster. Pure: no I/O.
"""

from __future__ import annotations

import base64
import binascii
import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from hooks.core.spec.layout import relative_path, reserved_file
from hooks.core.values.fields import SpecError
from hooks.core.values.job import EnvVar, Input, InputFile, ObjectKey, Spec
from hooks.core.values.reasons import Reason
from hooks.core.values.text import shown

MAX_PAYLOAD = 4 * 1024 * 1024
"""The most bytes of input files and env values one attempt carries."""
MAX_FILES = 1024
MAX_NAME_BYTES = 64 * 1024
"""The most input files of one attempt, and the most bytes of their paths together: each is
named on the submission's command line, which one SSH request carries."""
NOT_FOUND = {"Secret": Reason.SECRET_NOT_FOUND, "ConfigMap": Reason.CONFIG_MAP_NOT_FOUND}


@dataclass(frozen=True, slots=True)
class Payload:
    environment: tuple[tuple[str, str], ...] = field(repr=False)
    inputs: tuple[InputFile, ...]


@dataclass(frozen=True, slots=True)
class Unresolved:
    """Why the payload cannot be built: an object or key is missing (the attempt waits), or
    what it holds cannot be used (``INVALID_SPEC``)."""

    reason: Reason
    message: str


class _Missing(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.reason = NOT_FOUND[kind]


def resolve(
    spec: Spec, *, namespace: str, secrets: Mapping[str, Mapping[str, Any]],
    config_maps: Mapping[str, Mapping[str, Any]], writes_file: Callable[[str], bool],
) -> Payload | Unresolved:
    """The environment and input files of ``spec``, none of them at a name the scheduler
    writes itself (``writes_file``). Pure: no I/O."""
    objects = {"Secret": secrets, "ConfigMap": config_maps}
    try:
        environment = tuple(pair for i, var in enumerate(spec.env)
                            if (pair := _variable(var, i, objects, namespace)) is not None)
        inputs = _files(spec.inputs, objects, namespace, writes_file)
    except _Missing as err:
        return Unresolved(err.reason, str(err))
    except SpecError as err:
        return Unresolved(Reason.INVALID_SPEC, str(err))
    size = sum(len(n) + len(v.encode()) for n, v in environment) + sum(
        len(f.path) + len(f.content) for f in inputs)
    if size > MAX_PAYLOAD:
        return Unresolved(Reason.INVALID_SPEC,
                          f"spec.env and spec.inputs come to {size} bytes; an attempt carries "
                          f"at most {MAX_PAYLOAD // (1024 * 1024)} MiB.")
    return Payload(environment, inputs)


def _variable(
    var: EnvVar, index: int, objects: Mapping[str, Mapping[str, Mapping[str, Any]]],
    namespace: str,
) -> tuple[str, str] | None:
    if var.source is None:
        return var.name, var.value
    ref: ObjectKey = var.source
    where = f"spec.env[{index}] ({var.name})"
    data = _data(ref.kind, ref.name, objects, namespace, ref.optional, where)
    if data is None or (ref.key not in data and ref.optional):
        return None
    if ref.key not in data:
        raise _Missing(ref.kind, f"{ref.kind} {ref.name!r} has no key {shown(ref.key)} "
                                 f"({where}).")
    try:
        value = data[ref.key].decode()
    except UnicodeDecodeError as err:
        raise SpecError(f"{where}: {ref.kind} {ref.name!r} key {shown(ref.key)} is not UTF-8 "
                        "text.") from err
    if "\0" in value:
        raise SpecError(f"{where}: {ref.kind} {ref.name!r} key {shown(ref.key)} holds a NUL "
                        "character.")
    return var.name, value


def _files(
    inputs: tuple[Input, ...], objects: Mapping[str, Mapping[str, Mapping[str, Any]]],
    namespace: str, writes_file: Callable[[str], bool],
) -> tuple[InputFile, ...]:
    """The files of ``inputs``, in order: each at its own path, none inside another's."""
    files = _InputFiles()
    for index, item in enumerate(inputs):
        where = f"spec.inputs[{index}]"
        data = _data(item.kind, item.name, objects, namespace, item.optional, where)
        if data is None:
            continue
        for key, name in _present_items(item, data, where):
            path = _input_path(item, key, name, where, writes_file)
            files.add(InputFile(path, data[key]), where)
    return files.unnested()


def _present_items(
    item: Input, data: Mapping[str, bytes], where: str
) -> Iterator[tuple[str, str]]:
    """The (key, file name) pairs of ``item`` whose key its object holds, every key by its own
    name when ``item`` names none; a missing key is skipped only in an optional object."""
    pairs = item.items or tuple((key, key) for key in sorted(data))
    for key, name in pairs:
        if key not in data:
            if item.optional:
                continue
            raise _Missing(item.kind, f"{item.kind} {item.name!r} has no key {shown(key)} "
                                      f"({where}).")
        yield key, name


def _input_path(
    item: Input, key: str, name: str, where: str, writes_file: Callable[[str], bool]
) -> str:
    """The path in the job's directory of the file ``name`` of ``item``, checked to stay
    inside it and off the names the hooks use there."""
    relative_path(name, f"{where}: {item.kind} {item.name!r} key {shown(key)}")
    path = f"{item.path}/{name}" if item.path else name
    if reserved_file(path, writes_file):
        raise SpecError(f"{where}: {shown(path)} is a name the hooks use in the job's "
                        "directory; rename it with items.")
    return path


class _InputFiles:
    """The input files gathered so far by path, with the input that wrote each."""

    def __init__(self) -> None:
        self.files: dict[str, InputFile] = {}
        self.owners: dict[str, str] = {}
        self.names = 0
        """The bytes of the files' paths together."""

    def add(self, file: InputFile, where: str) -> None:
        """Take ``file``, written by the input at ``where``; refuse a second file at its path,
        and one past the limits."""
        path = file.path
        if path in self.files:
            raise SpecError(f"{where}: {shown(path)} is written by {self.owners[path]} too.")
        # Checked as the files come, so that no number of items costs more than the limits.
        self.names += len(path)
        if len(self.files) >= MAX_FILES or self.names > MAX_NAME_BYTES:
            raise SpecError(f"spec.inputs come to at least {len(self.files) + 1} files with "
                            f"paths of at least {self.names} bytes together; an attempt "
                            f"carries at most {MAX_FILES} files with paths of at most "
                            f"{MAX_NAME_BYTES // 1024} KiB together.")
        self.files[path] = file
        self.owners[path] = where

    def unnested(self) -> tuple[InputFile, ...]:
        """The files in the order they came, refused if one's path is inside another's."""
        clash = _nested(self.files)
        if clash is not None:
            order = list(self.files)
            later = max(clash, key=order.index)
            raise SpecError(f"{self.owners[later]}: {shown(later)} is written by another input "
                            "too.")
        return tuple(self.files.values())


def _nested(files: Mapping[str, object]) -> tuple[str, str] | None:
    """A file whose path is a directory of another file's, as (that file, the other): in the
    order of their components, a path is directly followed by one inside it if any is. Linear
    in the paths' length, whatever their depth."""
    ordered = sorted(files, key=lambda path: path.split("/"))
    for outer, inner in itertools.pairwise(ordered):
        if inner.startswith(outer + "/"):
            return outer, inner
    return None


def _data(
    kind: str, name: str, objects: Mapping[str, Mapping[str, Mapping[str, Any]]],
    namespace: str, optional: bool, where: str,
) -> dict[str, bytes] | None:
    """The object's data as bytes by key; None for a missing optional object."""
    obj = objects[kind].get(name)
    if obj is None:
        if optional:
            return None
        raise _Missing(kind, f"{kind} {name!r} was not found in namespace {namespace} "
                             f"({where}).")
    data: dict[str, bytes] = {}
    text = obj.get("data") or {}
    binary = obj.get("binaryData") or {}
    if not isinstance(text, dict) or not isinstance(binary, dict):
        raise SpecError(f"{where}: {kind} {name!r} has malformed data.")
    what = f"{where}: {kind} {name!r}"
    for key, value in text.items():
        data[str(key)] = (_base64(value, what, key) if kind == "Secret"
                          else _text(value, what, key))
    for key, value in binary.items():
        data[str(key)] = _base64(value, what, key)
    return data


def _text(value: object, what: str, key: object) -> bytes:
    if not isinstance(value, str):
        raise SpecError(f"{what} key {shown(key)} is not text.")
    return value.encode()


def _base64(value: object, what: str, key: object) -> bytes:
    if not isinstance(value, str):
        raise SpecError(f"{what} key {shown(key)} is not base64 text.")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as err:
        raise SpecError(f"{what} key {shown(key)} is not base64.") from err
