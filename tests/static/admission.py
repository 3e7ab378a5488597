"""What the API server admits of a BatchJob by crds/batchjob.yaml: its structural schema (strict
field validation, keys of map lists unique) and the spec's CEL rules, evaluated by cel-python
with the functions of Kubernetes' quantity library that the rules call."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import celpy
from celpy.adapter import json_to_cel
from celpy.celtypes import BoolType, IntType, StringType
from celpy.evaluation import CELEvalError

from tests.static.kube import REPO, Object, load_all, schema_violations, to_jsonschema


def crd_schema(crd: Object) -> Object:
    schema: Object = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


@functools.cache
def batchjob_crd() -> Object:
    crd: Object
    (crd,) = load_all(REPO / "crds/batchjob.yaml")
    return crd


QUANTITY = re.compile(
    r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))((?:[KMGTPE]i)|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
)
QUANTITY_SUFFIXES = {
    "": Fraction(1),
    **{suffix: Fraction(10) ** (3 * i - 9) for i, suffix in enumerate("num kMGTPE") if i != 3},
    **{f"{suffix}i": Fraction(2) ** (10 * i) for i, suffix in enumerate("KMGTPE", 1)},
}


def parse_quantity(text: str) -> Fraction | None:
    match = QUANTITY.match(text)
    if match is None:
        return None
    number, suffix = match[1], match[2] or ""
    if suffix[:1] in ("e", "E"):
        return Fraction(number) * Fraction(10) ** int(suffix[1:])
    return Fraction(number) * QUANTITY_SUFFIXES[suffix]


def cel_quantity(text: StringType) -> Fraction | CELEvalError:
    """An error value for what is not a quantity, which ``||`` absorbs as CEL's does."""
    value = parse_quantity(str(text))
    return CELEvalError(f"quantity({str(text)!r}): not a quantity") if value is None else value


# What the rules use of Kubernetes' CEL quantity library, which cel-python does not have.
QUANTITY_LIBRARY = {
    "isQuantity": lambda text: BoolType(parse_quantity(str(text)) is not None),
    "quantity": cel_quantity,
    "compareTo": lambda left, right: IntType((left > right) - (left < right)),
}


def cel_violations(spec: Object) -> list[str]:
    """Messages of the spec's CEL rules that ``spec`` breaks (``messageExpression`` when the rule
    has one, as the API server reports it)."""
    env = celpy.Environment()
    activation = {"self": json_to_cel(spec)}
    rules = crd_schema(batchjob_crd())["properties"]["spec"]["x-kubernetes-validations"]
    failed = []
    for rule in rules:
        program = env.program(env.compile(rule["rule"]), functions=QUANTITY_LIBRARY)
        result = program.evaluate(activation)
        if not (isinstance(result, BoolType) and result):
            if "messageExpression" in rule:
                message = env.program(env.compile(rule["messageExpression"])).evaluate(activation)
                failed.append(str(message))
            else:
                failed.append(rule["message"])
    return failed


def repeated_map_keys(value: Any, schema: Object, path: str = "") -> Iterator[str]:
    """Dotted paths of the items of ``x-kubernetes-list-type: map`` lists whose keys an earlier
    item already has: the API server refuses them, and JSON Schema cannot say so."""
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        keys = schema.get("x-kubernetes-list-map-keys", [])
        seen: set[str] = set()
        for i, item in enumerate(value):
            where = f"{path}.{i}"
            if schema.get("x-kubernetes-list-type") == "map" and isinstance(item, dict):
                key = repr([item.get(name) for name in keys])
                if key in seen:
                    yield where
                seen.add(key)
            yield from repeated_map_keys(item, schema["items"], where)
    elif isinstance(value, dict):
        for name, sub in schema.get("properties", {}).items():
            if name in value:
                yield from repeated_map_keys(value[name], sub, f"{path}.{name}".lstrip("."))


def batchjob_violations(batchjob: Object) -> list[str]:
    """What the API server would reject in a BatchJob: schema paths (repeated keys of map lists
    among them), then CEL messages."""
    crd = crd_schema(batchjob_crd())
    paths = schema_violations(batchjob, to_jsonschema(crd)) + list(repeated_map_keys(batchjob, crd))
    return sorted(paths) + cel_violations(batchjob["spec"])


# The smallest spec the CRD accepts, which the rules' tests change one field at a time.
MINIMAL_SPEC: Object = {
    "backend": "slurm",
    "cluster": {"host": "login.hpc.example.org", "secretRef": {"name": "hpc-login"}},
    "script": "#!/bin/sh\ntrue\n",
}
