"""Static checks of what users install and send: the CRD, the Metacontroller controllers, the
crds/ and deploy/ kustomizations as the README installs them, the Dockerfile and its lock file,
the examples and the saved hook requests. No network; nothing outside the repository."""

from __future__ import annotations

import base64
import copy
import functools
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import celpy
import jsonschema
import kubernetes_validate
import pytest
import yaml
from celpy.adapter import json_to_cel
from celpy.celtypes import BoolType, IntType, StringType
from celpy.evaluation import CELEvalError
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

REPO = Path(__file__).resolve().parents[2]
API_DOC = REPO / "docs/batchjob-api.md"
README = REPO / "README.md"
CONTROLLER_SCHEMAS = Path(__file__).parent / "schemas/metacontroller-controllers.yaml"
EXAMPLES = REPO / "examples"
REQUESTS = EXAMPLES / "requests"
NAMESPACE = "hpcbridge-system"
IMAGE = "hpcbridge:0.1.0"
METACONTROLLER_KINDS = {"CompositeController", "DecoratorController"}
Object = dict[str, Any]
Render = Callable[[Path], tuple[Object, ...]]  # the conftest's render fixture


def load_all(path: Path) -> list[Object]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def to_jsonschema(schema: Object) -> Object:
    """A Kubernetes structural schema as plain JSON Schema.

    ``x-kubernetes-int-or-string`` becomes a type union and other ``x-kubernetes-*`` keys are
    dropped. Objects with declared properties reject other keys, as the API server's strict field
    validation does.
    """
    out = {key: value for key, value in schema.items() if not key.startswith("x-kubernetes-")}
    if schema.get("x-kubernetes-int-or-string"):
        out["type"] = ["integer", "string"]
    if "properties" in schema:
        out["properties"] = {name: to_jsonschema(sub) for name, sub in schema["properties"].items()}
        out.setdefault("additionalProperties", False)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            out[key] = to_jsonschema(schema[key])
    return out


def crd_schema(crd: Object) -> Object:
    schema: Object = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


@functools.cache
def batchjob_crd() -> Object:
    crd: Object
    (crd,) = load_all(REPO / "crds/batchjob.yaml")
    return crd


@functools.cache
def controller_schema(kind: str) -> Object:
    """The repository's JSON Schema of the controller fields hpcbridge uses (schemas/)."""
    (schemas,) = load_all(CONTROLLER_SCHEMAS)
    return {"$schema": schemas["$schema"], "$defs": schemas["$defs"], **schemas[kind]}


def schema_violations(instance: Object, schema: Object) -> list[str]:
    """Dotted paths of the fields a JSON schema rejects ("" for the root)."""
    validator = jsonschema.Draft202012Validator(schema)
    return sorted(
        ".".join(str(part) for part in error.absolute_path)
        for error in validator.iter_errors(instance)
    )


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


def locate(obj: Any, field_path: str) -> tuple[Any, str]:
    """The parent of a kustomize-style field path (``containers.[name=hooks].image``) and the
    last key."""
    *parents, last = field_path.split(".")
    for segment in parents:
        if segment.startswith("["):
            key, _, value = segment[1:-1].partition("=")
            obj = next(item for item in obj if item[key] == value)
        else:
            obj = obj[segment]
    return obj, last


def field(obj: Object, field_path: str) -> Any:
    parent, last = locate(obj, field_path)
    return parent.get(last)


# --- (a) examples against the CRD -----------------------------------------------------------

EXAMPLE_OBJECTS = {
    f"{path.stem}:{doc['kind']}:{doc['metadata']['name']}": doc
    for path in sorted(EXAMPLES.glob("*.yaml"))
    for doc in load_all(path)
}
EXAMPLE_DOCS = [pytest.param(doc, id=name) for name, doc in EXAMPLE_OBJECTS.items()]
EXAMPLE_BATCHJOBS = [
    pytest.param(doc, id=name) for name, doc in EXAMPLE_OBJECTS.items() if doc["kind"] == "BatchJob"
]
EXAMPLE_OTHERS = [
    pytest.param(doc, id=name) for name, doc in EXAMPLE_OBJECTS.items() if doc["kind"] != "BatchJob"
]


@pytest.mark.parametrize("batchjob", EXAMPLE_BATCHJOBS)
def test_example_batchjob_is_accepted(batchjob: Object) -> None:
    assert batchjob_violations(batchjob) == []


@pytest.mark.parametrize("obj", EXAMPLE_OTHERS)
def test_example_core_object_is_valid(obj: Object) -> None:
    kubernetes_validate.validate(obj, kubernetes_validate.latest_version(), strict=True)


@pytest.mark.parametrize("obj", EXAMPLE_DOCS)
def test_example_lives_in_research(obj: Object) -> None:
    assert obj["metadata"]["namespace"] == "research"


def test_example_names_are_unique() -> None:
    files = [doc for path in EXAMPLES.glob("*.yaml") for doc in load_all(path)]
    names = [(doc["kind"], doc["metadata"]["name"]) for doc in files]
    assert len(names) == len(set(names))


# One example for each site feature: the field it shows.
FEATURE_EXAMPLES = {
    "jump-slurm": "cluster.jump",
    "certificate-slurm": "cluster.secretRef",
    "workdir-slurm": "cluster.workDir",
    "env-slurm": "env",
    "inputs-slurm": "inputs",
    "suspend-htcondor": "suspend",
    "deadline-slurm": "activeDeadlineSeconds",
}


@pytest.mark.parametrize(("stem", "field_path"), FEATURE_EXAMPLES.items(), ids=FEATURE_EXAMPLES)
def test_feature_example_shows_its_field(stem: str, field_path: str) -> None:
    (batchjob,) = (doc for doc in load_all(EXAMPLES / f"{stem}.yaml") if doc["kind"] == "BatchJob")
    assert field(batchjob["spec"], field_path) is not None
    assert batchjob_violations(batchjob) == []


def example_data(kind: str, name: str) -> dict[str, str]:
    """The keys and values of the example Secret or ConfigMap ``name`` (stringData or data)."""
    (obj,) = (
        doc
        for doc in EXAMPLE_OBJECTS.values()
        if doc["kind"] == kind and doc["metadata"]["name"] == name
    )
    data: dict[str, str] = dict(obj.get("data", {}))
    if kind == "Secret":
        data = {key: base64.b64decode(value).decode() for key, value in data.items()}
    return {**data, **obj.get("stringData", {})}


def referenced_keys(spec: Object) -> Iterator[tuple[str, str, str | None]]:
    """(kind, name, key or None for the whole object) of every Secret and ConfigMap a spec names."""
    cluster = spec["cluster"]
    yield "Secret", cluster["secretRef"]["name"], "username"
    for hop in cluster.get("jump", []):
        yield "Secret", hop.get("secretRef", cluster["secretRef"])["name"], "username"
    for variable in spec.get("env", []):
        for field_name, kind in (("secretKeyRef", "Secret"), ("configMapKeyRef", "ConfigMap")):
            ref = variable.get("valueFrom", {}).get(field_name)
            if ref is not None:
                yield kind, ref["name"], ref["key"]
    for entry in spec.get("inputs", []):
        for field_name, kind in (("secret", "Secret"), ("configMap", "ConfigMap")):
            if field_name in entry:
                name = entry[field_name]["name"]
                keys = [item["key"] for item in entry.get("items", [])] or [None]
                yield from ((kind, name, key) for key in keys)


@pytest.mark.parametrize("batchjob", EXAMPLE_BATCHJOBS)
def test_example_objects_it_names_are_examples_too(batchjob: Object) -> None:
    """Every Secret and ConfigMap an example BatchJob names (and every key it reads) is among
    the examples, so that applying examples/ gives each BatchJob what it needs."""
    for kind, name, key in referenced_keys(batchjob["spec"]):
        data = example_data(kind, name)
        assert key is None or key in data, f"{kind} {name} has no key {key}"


def known_host_names(known_hosts: str) -> set[str]:
    return {
        name for line in known_hosts.splitlines() if line.strip() and not line.startswith("#")
        for name in line.split()[0].split(",")
    }  # fmt: skip


@pytest.mark.parametrize("batchjob", EXAMPLE_BATCHJOBS)
def test_example_known_hosts_list_each_hop(batchjob: Object) -> None:
    """Each hop's Secret lists that hop in known_hosts (``[host]:port`` off port 22), and the
    cluster's Secret lists the login node by the name the spec gives."""
    cluster = batchjob["spec"]["cluster"]
    for hop in [*cluster.get("jump", []), cluster]:
        secret = hop.get("secretRef", cluster["secretRef"])["name"]
        port = hop.get("port", 22)
        name = hop["host"] if port == 22 else f"[{hop['host']}]:{port}"
        assert name in known_host_names(example_data("Secret", secret)["known_hosts"]), secret


def merge(base: Object, change: Object) -> Object:
    """``base`` with ``change`` merged in, nested objects key by key."""
    for key, value in change.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge(base[key], value)
        else:
            base[key] = value
    return base


MINIMAL_SPEC: Object = {
    "backend": "slurm",
    "cluster": {"host": "login.hpc.example.org", "secretRef": {"name": "hpc-login"}},
    "script": "#!/bin/sh\ntrue\n",
}
SLURM_ONLY = "spec.slurm is only allowed with backend: slurm"
HTCONDOR_ONLY = "spec.htcondor is only allowed with backend: htcondor"
NODES_SLURM_ONLY = "spec.resources.nodes is only supported with backend: slurm"


@pytest.mark.parametrize(
    ("change", "violations"),
    [
        pytest.param({}, [], id="minimal"),
        pytest.param({"resources": {"memory": 1073741824}}, [], id="memory-as-integer"),
        pytest.param({"resources": {"memory": "1.5G"}}, [], id="memory-decimal-suffix"),
        pytest.param({"resources": {"timeLimit": "1d12h"}}, [], id="time-limit-days-hours"),
        pytest.param({"slurm": {"array": "1,3,5-9:2%2"}}, [], id="array-list-step-throttle"),
        pytest.param({"backend": "htcondor", "htcondor": {"queue": 10000}}, [], id="queue-max"),
        pytest.param(
            {"backend": "htcondor", "slurm": {"partition": "debug"}},
            [SLURM_ONLY],
            id="slurm-block-with-htcondor",
        ),
        pytest.param({"htcondor": {"queue": 2}}, [HTCONDOR_ONLY], id="htcondor-block-with-slurm"),
        pytest.param(
            {"backend": "htcondor", "resources": {"nodes": 2}},
            [NODES_SLURM_ONLY],
            id="nodes-with-htcondor",
        ),
        pytest.param({"backend": "pbs"}, ["spec.backend"], id="unknown-backend"),
        pytest.param({"script": "echo hi\n"}, ["spec.script"], id="script-without-shebang"),
        pytest.param({"script": "#!" + "x" * 262143}, ["spec.script"], id="script-too-long"),
        pytest.param({"cluster": {"port": 70000}}, ["spec.cluster.port"], id="port-70000"),
        pytest.param(
            {"cluster": {"host": "-oProxyCommand=x"}}, ["spec.cluster.host"], id="host-dash"
        ),
        pytest.param(
            {"cluster": {"secretRef": {"name": "Bad_Name"}}},
            ["spec.cluster.secretRef.name"],
            id="secret-name-not-dns",
        ),
        pytest.param(
            {"resources": {"timeLimit": "90min"}}, ["spec.resources.timeLimit"], id="time-90min"
        ),
        pytest.param(
            {"resources": {"timeLimit": "1h30"}}, ["spec.resources.timeLimit"], id="time-1h30"
        ),
        pytest.param(
            {"resources": {"timeLimit": ""}}, ["spec.resources.timeLimit"], id="time-empty"
        ),
        pytest.param({"resources": {"memory": "4GB"}}, ["spec.resources.memory"], id="memory-4GB"),
        pytest.param({"resources": {"memory": "1Mi"}}, [], id="memory-1Mi"),
        pytest.param({"resources": {"memory": 1048576}}, [], id="memory-1Mi-as-integer"),
        pytest.param({"resources": {"memory": "1.1M"}}, [], id="memory-1.1M"),
        pytest.param(
            {"resources": {"memory": 4096}},
            ["spec.resources.memory 4096 is bytes, below 1Mi: did you mean 4096Mi?"],
            id="memory-4096-integer",
        ),
        pytest.param(
            {"resources": {"memory": "4096"}},
            ["spec.resources.memory 4096 is bytes, below 1Mi: did you mean 4096Mi?"],
            id="memory-4096-string",
        ),
        pytest.param(
            {"resources": {"memory": "1048575"}},
            ["spec.resources.memory 1048575 is bytes, below 1Mi: did you mean 1048575Mi?"],
            id="memory-1Mi-less-one-byte",
        ),
        pytest.param(
            {"resources": {"memory": "512Ki"}},
            ["spec.resources.memory 512Ki is below 1Mi"],
            id="memory-512Ki",
        ),
        pytest.param(
            {"resources": {"memory": "1M"}},
            ["spec.resources.memory 1M is below 1Mi"],
            id="memory-1M",
        ),
        pytest.param(
            {"resources": {"memory": "500m"}},
            ["spec.resources.memory 500m is below 1Mi"],
            id="memory-millibytes",
        ),
        pytest.param({"resources": {"cpus": 0}}, ["spec.resources.cpus"], id="cpus-0"),
        pytest.param({"resources": {"gpus": -1}}, ["spec.resources.gpus"], id="gpus-negative"),
        pytest.param({"slurm": {"array": "0-3%"}}, ["spec.slurm.array"], id="array-bad-throttle"),
        pytest.param({"slurm": {"array": "1:2"}}, ["spec.slurm.array"], id="array-step-no-range"),
        pytest.param(
            {"slurm": {"extraArgs": ["--x"] * 65}}, ["spec.slurm.extraArgs"], id="extra-args-65"
        ),
        pytest.param(
            {"backend": "htcondor", "htcondor": {"queue": 10001}},
            ["spec.htcondor.queue"],
            id="queue-10001",
        ),
        pytest.param(
            {"backend": "htcondor", "htcondor": {"submitOptions": {"+A": 1}}},
            ["spec.htcondor.submitOptions.+A"],
            id="submit-option-not-string",
        ),
        pytest.param({"backoffLimit": -1}, ["spec.backoffLimit"], id="backoff-negative"),
        pytest.param({"sript": "#!/bin/sh\n"}, ["spec"], id="unknown-field"),
    ],
)
def test_spec_rules(change: Object, violations: list[str]) -> None:
    spec = merge(copy.deepcopy(MINIMAL_SPEC), change)
    batchjob = {"apiVersion": "hpcbridge.io/v1alpha1", "kind": "BatchJob", "spec": spec}
    assert batchjob_violations(batchjob) == violations


HOP = {"host": "bastion.example.org"}
ENV_VALUE = {"name": "A", "value": "1"}
SECRET_KEY = {"secretKeyRef": {"name": "tokens", "key": "api"}}
CONFIG_MAP_KEY = {"configMapKeyRef": {"name": "settings", "key": "mode"}}
INPUT = {"configMap": {"name": "params"}}


@pytest.mark.parametrize(
    ("change", "violations"),
    [
        pytest.param({"cluster": {"jump": [HOP]}}, [], id="jump-host-only"),
        pytest.param(
            {
                "cluster": {
                    "jump": [
                        {
                            **HOP,
                            "port": 2222,
                            "secretRef": {"name": "bastion"},
                            "insecureSkipHostKeyCheck": False,
                        }
                    ]
                    * 3
                }
            },
            [],
            id="jump-three-full",
        ),
        pytest.param({"cluster": {"jump": [HOP] * 4}}, ["spec.cluster.jump"], id="jump-four"),
        pytest.param(
            {"cluster": {"jump": [{"port": 22}]}}, ["spec.cluster.jump.0"], id="jump-no-host"
        ),
        pytest.param(
            {"cluster": {"jump": [{"host": "-oProxyCommand=x"}]}},
            ["spec.cluster.jump.0.host"],
            id="jump-host-dash",
        ),
        pytest.param(
            {"cluster": {"jump": [{**HOP, "port": 0}]}},
            ["spec.cluster.jump.0.port"],
            id="jump-port-0",
        ),
        pytest.param(
            {"cluster": {"jump": [{**HOP, "port": 65536}]}},
            ["spec.cluster.jump.0.port"],
            id="jump-port-65536",
        ),
        pytest.param(
            {"cluster": {"jump": [{**HOP, "secretRef": {}}]}},
            ["spec.cluster.jump.0.secretRef"],
            id="jump-secret-without-name",
        ),
        pytest.param(
            {"cluster": {"jump": [{**HOP, "secretRef": {"name": "Bastion"}}]}},
            ["spec.cluster.jump.0.secretRef.name"],
            id="jump-secret-not-dns",
        ),
        pytest.param(
            {"cluster": {"workDir": "/scratch/alice/hpcbridge"}}, [], id="workdir-absolute"
        ),
        pytest.param({"cluster": {"workDir": "work/hpcbridge"}}, [], id="workdir-relative"),
        pytest.param({"cluster": {"workDir": "~/work/"}}, [], id="workdir-tilde-trailing-slash"),
        pytest.param({"cluster": {"workDir": ".hpcbridge"}}, [], id="workdir-hidden"),
        pytest.param({"cluster": {"workDir": "/a/..b/c..."}}, [], id="workdir-dots-in-names"),
        pytest.param({"cluster": {"workDir": "/" + "a" * 1023}}, [], id="workdir-1024"),
        pytest.param(
            {"cluster": {"workDir": "/" + "a" * 1024}}, ["spec.cluster.workDir"], id="workdir-1025"
        ),
        pytest.param(
            {"cluster": {"workDir": ""}},
            ["spec.cluster.workDir", "spec.cluster.workDir"],  # minLength and pattern
            id="workdir-empty",
        ),
        pytest.param({"cluster": {"workDir": "/"}}, ["spec.cluster.workDir"], id="workdir-root"),
        pytest.param({"cluster": {"workDir": "$SCRATCH/x"}}, ["spec.cluster.workDir"],
                     id="workdir-variable"),
        pytest.param({"cluster": {"workDir": "~alice/x"}}, ["spec.cluster.workDir"],
                     id="workdir-other-home"),
        pytest.param({"cluster": {"workDir": "/a/`id`"}}, ["spec.cluster.workDir"],
                     id="workdir-backquote"),
        pytest.param({"cluster": {"workDir": "~"}}, ["spec.cluster.workDir"], id="workdir-home"),
        pytest.param({"cluster": {"workDir": "~/"}}, ["spec.cluster.workDir"],
                     id="workdir-home-slash"),
        pytest.param(
            {"cluster": {"workDir": "/scratch/../etc"}},
            ["spec.cluster.workDir"],
            id="workdir-dotdot",
        ),
        pytest.param({"cluster": {"workDir": "../x"}}, ["spec.cluster.workDir"], id="workdir-up"),
        pytest.param({"cluster": {"workDir": "a/./b"}}, ["spec.cluster.workDir"], id="workdir-dot"),
        pytest.param(
            {"cluster": {"workDir": "a//b"}}, ["spec.cluster.workDir"], id="workdir-empty-part"
        ),
        pytest.param(
            {"cluster": {"workDir": "/scratch/a\nb"}},
            ["spec.cluster.workDir"],
            id="workdir-newline",
        ),
        pytest.param(
            {"cluster": {"workDir": "/scratch/a\x85b"}},
            ["spec.cluster.workDir"],
            id="workdir-c1-control",
        ),
        pytest.param(
            {
                "env": [
                    ENV_VALUE,
                    {"name": "_B2", "value": ""},
                    {"name": "C", "valueFrom": SECRET_KEY},
                    {"name": "D", "valueFrom": CONFIG_MAP_KEY},
                ]
            },
            [],
            id="env-every-form",
        ),
        pytest.param(
            {
                "env": [
                    {
                        "name": "T",
                        "valueFrom": {
                            "secretKeyRef": {"name": "tokens", "key": "api", "optional": True}
                        },
                    }
                ]
            },
            [],
            id="env-optional",
        ),
        pytest.param(
            {"env": [{"name": f"V{i}", "value": ""} for i in range(128)]}, [], id="env-128"
        ),
        pytest.param(
            {"env": [{"name": f"V{i}", "value": ""} for i in range(129)]},
            ["spec.env"],
            id="env-129",
        ),
        pytest.param({"env": [ENV_VALUE, ENV_VALUE]}, ["spec.env.1"], id="env-name-twice"),
        pytest.param(
            {"env": [{"name": "1A", "value": ""}]}, ["spec.env.0.name"], id="env-name-digit"
        ),
        pytest.param(
            {"env": [{"name": "A-B", "value": ""}]}, ["spec.env.0.name"], id="env-name-dash"
        ),
        pytest.param(
            {"env": [{"name": "", "value": ""}]}, ["spec.env.0.name"], id="env-name-empty"
        ),
        pytest.param({"env": [{"value": "x"}]}, ["spec.env.0"], id="env-without-name"),
        pytest.param({"env": [{"name": "A"}]}, ["spec.env.0"], id="env-without-value"),
        pytest.param(
            {"env": [{**ENV_VALUE, "valueFrom": SECRET_KEY}]},
            ["spec.env.0"],
            id="env-value-and-from",
        ),
        pytest.param(
            {"env": [{"name": "A", "value": 8}]}, ["spec.env.0.value"], id="env-value-number"
        ),
        pytest.param(
            {"env": [{"name": "A", "value": "a\x00b"}]}, ["spec.env.0.value"], id="env-value-nul"
        ),
        pytest.param(
            {"env": [{"name": "A", "valueFrom": {**SECRET_KEY, **CONFIG_MAP_KEY}}]},
            ["spec.env.0.valueFrom"],
            id="env-two-sources",
        ),
        pytest.param(
            {"env": [{"name": "A", "valueFrom": {}}]}, ["spec.env.0.valueFrom"], id="env-no-source"
        ),
        pytest.param(
            {"env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "tokens"}}}]},
            ["spec.env.0.valueFrom.secretKeyRef"],
            id="env-secret-without-key",
        ),
        pytest.param(
            {"env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "s", "key": "a/b"}}}]},
            ["spec.env.0.valueFrom.configMapKeyRef.key"],
            id="env-key-with-slash",
        ),
        pytest.param(
            {
                "inputs": [
                    {**INPUT, "path": "conf/run"},
                    {
                        "secret": {"name": "license", "optional": True},
                        "items": [{"key": "lic", "path": "lic/license.dat"}],
                    },
                ]
            },
            [],
            id="inputs-both-kinds",
        ),
        pytest.param({"inputs": [INPUT] * 32}, [], id="inputs-32"),
        pytest.param({"inputs": [INPUT] * 33}, ["spec.inputs"], id="inputs-33"),
        pytest.param({"inputs": [{}]}, ["spec.inputs.0"], id="inputs-no-source"),
        pytest.param(
            {"inputs": [{**INPUT, "secret": {"name": "license"}}]},
            ["spec.inputs.0"],
            id="inputs-two-sources",
        ),
        pytest.param(
            {"inputs": [{"configMap": {}}]}, ["spec.inputs.0.configMap"], id="inputs-without-name"
        ),
        pytest.param(
            {"inputs": [{**INPUT, "path": "/etc"}]}, ["spec.inputs.0.path"], id="path-absolute"
        ),
        pytest.param({"inputs": [{**INPUT, "path": ".."}]}, ["spec.inputs.0.path"], id="path-up"),
        pytest.param(
            {"inputs": [{**INPUT, "path": "conf/../../x"}]},
            ["spec.inputs.0.path"],
            id="path-dotdot",
        ),
        pytest.param(
            {"inputs": [{**INPUT, "path": "a//b"}]}, ["spec.inputs.0.path"], id="path-empty-part"
        ),
        pytest.param(
            {"inputs": [{**INPUT, "path": "conf/"}]}, ["spec.inputs.0.path"], id="path-trailing"
        ),
        pytest.param(
            {"inputs": [{**INPUT, "path": "a\tb"}]}, ["spec.inputs.0.path"], id="path-tab"
        ),
        pytest.param(
            {"inputs": [{**INPUT, "path": "a b"}]}, ["spec.inputs.0.path"], id="path-space"
        ),
        pytest.param(
            {"inputs": [{**INPUT, "items": [{"key": "a", "path": "a,b"}]}]},
            ["spec.inputs.0.items.0.path"], id="item-path-comma",
        ),
        pytest.param(
            {"inputs": [{**INPUT, "items": []}]}, ["spec.inputs.0.items"], id="items-empty"
        ),
        pytest.param(
            {"inputs": [{**INPUT, "items": [{"key": "a"}]}]},
            ["spec.inputs.0.items.0"],
            id="item-without-path",
        ),
        pytest.param(
            {"inputs": [{**INPUT, "items": [{"key": "a", "path": "../a"}]}]},
            ["spec.inputs.0.items.0.path"],
            id="item-path-up",
        ),
        pytest.param(
            {"inputs": [{**INPUT, "items": [{"key": "a", "path": "/tmp/a"}]}]},
            ["spec.inputs.0.items.0.path"],
            id="item-path-absolute",
        ),
        pytest.param({"suspend": True}, [], id="suspend"),
        pytest.param({"suspend": "yes"}, ["spec.suspend"], id="suspend-not-boolean"),
        pytest.param({"activeDeadlineSeconds": 1}, [], id="deadline-1"),
        pytest.param({"activeDeadlineSeconds": 2**40}, [], id="deadline-int64"),
        pytest.param({"activeDeadlineSeconds": 0}, ["spec.activeDeadlineSeconds"], id="deadline-0"),
        pytest.param(
            {"activeDeadlineSeconds": "2h"}, ["spec.activeDeadlineSeconds"], id="deadline-string"
        ),
    ],
)
def test_site_feature_rules(change: Object, violations: list[str]) -> None:
    """The rules of the site features (jump hosts, workDir, env, inputs, suspend, deadline)
    that the CRD can express; the hooks check the rest (docs/batchjob-api.md)."""
    spec = merge(copy.deepcopy(MINIMAL_SPEC), change)
    batchjob = {"apiVersion": "hpcbridge.io/v1alpha1", "kind": "BatchJob", "spec": spec}
    assert batchjob_violations(batchjob) == violations


@pytest.mark.parametrize(
    ("field_path", "default"),
    [
        pytest.param("cluster.port", 22, id="port"),
        pytest.param("cluster.insecureSkipHostKeyCheck", False, id="insecure"),
        pytest.param("logs.pod", True, id="logs-pod"),
        pytest.param("logs.follow", False, id="logs-follow"),
        pytest.param("backoffLimit", 0, id="backoff-limit"),
        pytest.param("cluster.jump[].port", 22, id="jump-port"),
        pytest.param("cluster.jump[].insecureSkipHostKeyCheck", False, id="jump-insecure"),
        pytest.param("suspend", False, id="suspend"),
    ],
)
def test_spec_default(field_path: str, default: object) -> None:
    schema = crd_schema(batchjob_crd())["properties"]["spec"]
    for name in field_path.split("."):
        schema = schema["properties"][name.removesuffix("[]")]
        if name.endswith("[]"):
            schema = schema["items"]
    assert schema["default"] is default


# --- (b) the CRD against the API doc --------------------------------------------------------


def api_doc_block(top_key: str) -> Object:
    """The API doc's YAML block that holds ``top_key`` (the example BatchJob or the status)."""
    blocks = re.findall(r"```yaml\n(.*?)```", API_DOC.read_text(), re.DOTALL)
    return next(block[top_key] for block in map(yaml.safe_load, blocks) if top_key in block)


def undeclared(value: Any, schema: Object, path: str) -> Iterator[str]:
    """Paths in ``value`` that ``schema`` does not declare; the doc's ``...`` elisions skipped."""
    if isinstance(value, list):
        for item in value:
            yield from undeclared(item, schema["items"], f"{path}[]")
    elif isinstance(value, dict):
        for key, item in value.items():
            if key == "...":
                continue
            sub = schema.get("properties", {}).get(key, schema.get("additionalProperties"))
            if sub is None:
                yield f"{path}.{key}"
            else:
                yield from undeclared(item, sub, f"{path}.{key}")


@pytest.mark.parametrize("section", ["spec", "status"])
def test_crd_declares_every_api_doc_field(section: str) -> None:
    schema = crd_schema(batchjob_crd())["properties"][section]
    assert list(undeclared(api_doc_block(section), schema, section)) == []


def heading_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a Markdown file's headings."""
    headings = re.findall(r"^#+ (.+)$", markdown, re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


@pytest.mark.parametrize("document", [README, API_DOC], ids=["README", "api-doc"])
def test_local_links_resolve(document: Path) -> None:
    """Every link to a file of the repository names one that exists, and a heading of it that
    exists (the site features' links to their examples and API doc sections among them)."""
    text = document.read_text()
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (document.parent / path).resolve() if path else document
        assert linked.exists(), target
        if anchor:
            assert anchor in heading_anchors(linked.read_text()), target


def test_status_fields_are_the_api_doc_ones_plus_retries_and_cluster() -> None:
    declared = crd_schema(batchjob_crd())["properties"]["status"]["properties"]
    assert set(declared) == set(api_doc_block("status")) | {"retries", "cluster"}


def test_every_crd_field_has_a_description() -> None:
    def missing(schema: Object, path: str) -> Iterator[str]:
        if path != "metadata" and not schema.get("description"):
            yield path
        for name, sub in schema.get("properties", {}).items():
            yield from missing(sub, f"{path}.{name}".lstrip("."))
        if "items" in schema and "properties" in schema["items"]:
            for name, sub in schema["items"]["properties"].items():
                yield from missing(sub, f"{path}[].{name}")

    assert list(missing(crd_schema(batchjob_crd()), "")) == []


def test_crd_names_scope_and_status_subresource() -> None:
    crd = batchjob_crd()
    assert crd["metadata"]["name"] == "batchjobs.hpcbridge.io"
    assert crd["spec"]["scope"] == "Namespaced"
    assert crd["spec"]["names"]["kind"] == "BatchJob"
    assert crd["spec"]["names"]["shortNames"] == ["bj"]
    (version,) = crd["spec"]["versions"]
    assert version["name"] == "v1alpha1"
    assert version["subresources"] == {"status": {}}


def test_printer_columns() -> None:
    (version,) = batchjob_crd()["spec"]["versions"]
    columns = [
        (column["name"], column["type"], column["jsonPath"])
        for column in version["additionalPrinterColumns"]
    ]
    assert columns == [
        ("BACKEND", "string", ".spec.backend"),
        ("PHASE", "string", ".status.phase"),
        ("REASON", "string", ".status.reason"),
        ("JOBID", "string", ".status.jobIDs[0]"),
        ("ACTIVE", "integer", ".status.active"),
        ("SUCCEEDED", "integer", ".status.succeeded"),
        ("FAILED", "integer", ".status.failed"),
        ("AGE", "date", ".metadata.creationTimestamp"),
    ]


# --- (c) the Metacontroller controllers against schemas/metacontroller-controllers.yaml -----

CONTROLLER_FILES = {
    "CompositeController": "compositecontroller.yaml",
    "DecoratorController": "decoratorcontroller.yaml",
}


@pytest.mark.parametrize(("kind", "file_name"), CONTROLLER_FILES.items(), ids=CONTROLLER_FILES)
def test_controller_matches_the_controller_schema(kind: str, file_name: str) -> None:
    (controller,) = load_all(REPO / "metacontroller" / file_name)
    assert controller["kind"] == kind
    assert schema_violations(controller, controller_schema(kind)) == []


@pytest.mark.parametrize(
    ("change", "violations"),
    [
        pytest.param({"spec": {"generateSelector": "yes"}}, ["spec.generateSelector"], id="type"),
        pytest.param({"spec": {"resyncPeriodSecond": 300}}, ["spec"], id="unknown-field"),
        pytest.param(
            {"spec": {"hooks": {"sync": {"version": "v3"}}}},
            ["spec.hooks.sync.version"],
            id="hook-version",
        ),
        pytest.param(
            {"spec": {"hooks": {"sync": {"webhook": {"timeout": 30}}}}},
            ["spec.hooks.sync.webhook.timeout"],
            id="timeout-not-a-duration",
        ),
        pytest.param(
            {"spec": {"childResources": [{"resource": "pods"}]}},
            ["spec.childResources.0"],
            id="child-without-api-version",
        ),
        pytest.param({"kind": "DecoratorController"}, ["kind"], id="kind"),
        pytest.param(
            {"spec": {"hooks": {"sync": {"webhook": {"caBundle": {"inline": "PEM"}}}}}},
            ["spec.hooks.sync.webhook.caBundle"],
            id="ca-bundle-two-sources",
        ),
        pytest.param(
            {"spec": {"hooks": {"sync": {"webhook": {"caBundle": {"secretRef": {"key": None}}}}}}},
            ["spec.hooks.sync.webhook.caBundle.secretRef.key"],
            id="ca-bundle-key-not-a-string",
        ),
        pytest.param(
            {"spec": {"hooks": {"sync": {"webhook": {"clientTLS": {"secretRef": {"ns": "x"}}}}}}},
            ["spec.hooks.sync.webhook.clientTLS.secretRef"],
            id="client-tls-unknown-field",
        ),
        pytest.param(
            {"spec": {"hooks": {"sync": {"webhook": {"authorization": {"type": "basic"}}}}}},
            ["spec.hooks.sync.webhook.authorization.type"],
            id="authorization-basic",
        ),
        pytest.param(
            {"spec": {"hooks": {"sync": {"webhook": {"authorization": {"secretRef": None}}}}}},
            ["spec.hooks.sync.webhook.authorization.secretRef"],
            id="authorization-without-secret",
        ),
    ],
)
def test_controller_schema_rejects(change: Object, violations: list[str]) -> None:
    (controller,) = load_all(REPO / "metacontroller/compositecontroller.yaml")
    controller = merge(controller, change)
    assert schema_violations(controller, controller_schema("CompositeController")) == violations


SERVICE_HOST = f"hpcbridge-hooks.{NAMESPACE}.svc"
SECURED_WEBHOOK = {  # every hook's connection: HTTPS to the hooks' CA, mutual TLS, bearer token
    "caBundle": {
        "secretRef": {"name": "hpcbridge-hooks-tls", "namespace": NAMESPACE, "key": "ca.crt"}
    },
    "clientTLS": {
        "secretRef": {"name": "hpcbridge-metacontroller-client", "namespace": NAMESPACE},
        "certKey": "tls.crt",
        "privateKeyKey": "tls.key",
    },
    "authorization": {
        "type": "Bearer",
        "secretRef": {"name": "hpcbridge-hooks-token", "namespace": NAMESPACE, "key": "token"},
    },
}


@pytest.mark.parametrize("file_name", CONTROLLER_FILES.values())
def test_controller_hooks_and_resync(file_name: str) -> None:
    path = REPO / "metacontroller" / file_name
    (controller,) = load_all(path)
    assert path.read_text().startswith("# Alternative to ")
    assert controller["metadata"]["name"] == "hpcbridge-batchjob"
    assert controller["spec"]["resyncPeriodSeconds"] == 300
    assert controller["spec"]["hooks"] == {
        hook: {
            "version": "v1",
            "webhook": {
                "url": f"https://{SERVICE_HOST}:443/{hook}",
                "timeout": "30s",
                **SECURED_WEBHOOK,
            },
        }
        for hook in ("customize", "sync", "finalize")
    }


def test_composite_controller_resources() -> None:
    (controller,) = load_all(REPO / "metacontroller/compositecontroller.yaml")
    spec = controller["spec"]
    assert spec["parentResource"] == {
        "apiVersion": "hpcbridge.io/v1alpha1",
        "resource": "batchjobs",
    }
    assert spec["childResources"] == [
        {"apiVersion": "v1", "resource": "pods", "updateStrategy": {"method": "Recreate"}}
    ]
    assert spec["generateSelector"] is True


def test_decorator_controller_resources() -> None:
    (controller,) = load_all(REPO / "metacontroller/decoratorcontroller.yaml")
    spec = controller["spec"]
    assert spec["resources"] == [{"apiVersion": "hpcbridge.io/v1alpha1", "resource": "batchjobs"}]
    assert spec["attachments"] == [
        {"apiVersion": "v1", "resource": "pods", "updateStrategy": {"method": "Recreate"}}
    ]


# --- (d) the installs, as the README runs them ----------------------------------------------

SET_IMAGE = "registry.example.org/platform/hpcbridge:1.2.3"  # the tests' REGISTRY/hpcbridge:TAG
METACONTROLLER_INSTALL = (
    "https://github.com/metacontroller/metacontroller/manifests/production?ref=v4.17.2"
)
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
CERT_MANAGER_KINDS = {"Issuer", "Certificate"}


def readme_install_blocks() -> list[list[str]]:
    """The ```sh blocks of the README's "Install on a cluster" section, a command a line."""
    section = README.read_text().split("\n## Install on a cluster\n", 1)[1].split("\n## ", 1)[0]
    return [
        [line for line in block.splitlines() if line.strip() and not line.startswith("#")]
        for block in re.findall(r"```sh\n(.*?)```", section, re.DOTALL)
    ]


def copy_install_dirs(workdir: Path) -> Path:
    for name in INSTALL_DIRS:
        shutil.copytree(REPO / name, workdir / name)
    return workdir


def run_readme_block(block: list[str], workdir: Path, render: Render, kustomize: str) -> Object:
    """Run one README install in ``workdir``, a copy of the install directories. The
    Metacontroller install is only checked to be pinned; `kubectl apply -k DIR` and `-f FILE`
    collect what they would apply, DIR rendered by kubectl's own kustomize; `kubectl create
    secret` steps are kept for ``secrets_made`` (they need kubectl); every other line runs in
    bash, with REGISTRY/hpcbridge:TAG replaced and kustomize on PATH."""
    applied: list[Object] = []
    sources: list[str] = []
    secret_steps: list[str] = []
    for line in block:
        words = line.split()
        if words[:3] == ["kubectl", "apply", "-k"] and words[3].strip("'").startswith("https:"):
            assert words == ["kubectl", "apply", "-k", f"'{METACONTROLLER_INSTALL}'"]
        elif "kubectl create secret" in line:
            secret = words[words.index("secret") + 2]
            sources.append(f"secret:{secret}")
            secret_steps.append(line)
        elif words[:2] == ["kubectl", "apply"]:
            assert len(words) == 4 and words[2] in ("-k", "-f"), line
            sources.append(words[3])
            path = workdir / words[3]
            applied += render(path) if words[2] == "-k" else load_all(path)
        else:
            assert "REGISTRY/hpcbridge:TAG" in line, f"the tests do not know this step: {line}"
            command = line.replace("REGISTRY/hpcbridge:TAG", SET_IMAGE)
            path = f"{Path(kustomize).parent}:{os.environ['PATH']}"
            result = subprocess.run(
                ["bash", "-ec", command],
                cwd=workdir,
                env={**os.environ, "PATH": path},
                capture_output=True,
                text=True,
                check=False,
            )
            assert result.returncode == 0, f"{command}:\n{result.stdout}{result.stderr}"
    return {"sources": sources, "objects": applied, "secret_steps": secret_steps}


def dry_run_secrets(script: str, cwd: Path, kubectl: str) -> list[Object]:
    """The Secrets a shell script's `kubectl create secret` steps would create, printed by a
    client-side dry run with no cluster configured; its `kubectl apply` steps are skipped (the
    tests render those themselves)."""
    out = cwd / "dry-run"
    out.mkdir()
    shim = (
        'n=0; kubectl() { if [ "$1" = apply ]; then return 0; fi; n=$((n + 1)); '
        f'"{kubectl}" "$@" --dry-run=client -o yaml > "{out}/$n.yaml"; }}\n'
    )
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", shim + script],
        cwd=cwd,
        env={**os.environ, "KUBECONFIG": str(cwd / "no-cluster")},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, f"{script}\n{result.stdout}{result.stderr}"
    return [
        doc for path in sorted(out.iterdir(), key=lambda p: int(p.stem)) for doc in load_all(path)
    ]


@pytest.fixture(scope="module")
def readme_installs(
    tmp_path_factory: pytest.TempPathFactory, render: Render, kustomize: str
) -> dict[str, Object]:
    """Each README install by its controller kind: what it applied, from where."""
    installs = {}
    for block in readme_install_blocks():
        workdir = copy_install_dirs(tmp_path_factory.mktemp("readme-install"))
        result = run_readme_block(block, workdir, render, kustomize)
        (kind,) = {doc["kind"] for doc in result["objects"]} & METACONTROLLER_KINDS
        install = {kind: name for name, kind in CONTROLLER_OF_INSTALL.items()}[kind]
        assert install not in installs
        installs[install] = result
    return installs


def test_readme_has_both_installs(readme_installs: dict[str, Object]) -> None:
    assert sorted(readme_installs) == sorted(INSTALLS)


@pytest.mark.parametrize("install", INSTALLS)
def test_readme_install_applies(install: str, readme_installs: dict[str, Object]) -> None:
    assert readme_installs[install]["sources"] == INSTALL_SOURCES[install]


@pytest.mark.parametrize("install", INSTALLS)
def test_readme_install_runs_the_image_it_sets(
    install: str, readme_installs: dict[str, Object]
) -> None:
    """The hook container and the log Pods (HPCBRIDGE_LOG_IMAGE) both get the image set."""
    objects = readme_installs[install]["objects"]
    deployment = select(objects, {"kind": "Deployment", "name": "hpcbridge-hooks"})
    assert field(deployment, f"{HOOKS}.image") == SET_IMAGE
    assert field(deployment, f"{HOOKS}.env.[name=HPCBRIDGE_LOG_IMAGE].value") == SET_IMAGE


@pytest.mark.parametrize("where", ["deploy", "deploy/base"])
def test_image_set_in_either_kustomization_reaches_the_log_pods(
    where: str, tmp_path: Path, render: Render, kustomize: str
) -> None:
    """`kustomize edit set image` in deploy/ or in deploy/base: either way deploy/ gives the
    log Pods the image of the hooks (each of the two kustomizations copies it)."""
    workdir = copy_install_dirs(tmp_path)
    subprocess.run(
        [kustomize, "edit", "set", "image", f"hpcbridge={SET_IMAGE}"],
        cwd=workdir / where,
        check=True,
    )
    deployment = select(
        render(workdir / "deploy"), {"kind": "Deployment", "name": "hpcbridge-hooks"}
    )
    assert field(deployment, f"{HOOKS}.image") == SET_IMAGE
    assert field(deployment, f"{HOOKS}.env.[name=HPCBRIDGE_LOG_IMAGE].value") == SET_IMAGE


def select(docs: Sequence[Object], selector: Object) -> Object:
    (doc,) = (
        doc
        for doc in docs
        if doc["kind"] == selector["kind"] and doc["metadata"]["name"] == selector["name"]
    )
    return doc


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


CLUSTER_SCOPED = {"Namespace", "CustomResourceDefinition", "ClusterRole", *METACONTROLLER_KINDS}


@pytest.mark.parametrize("install", INSTALLS)
def test_install_objects(install: str, render: Render) -> None:
    docs = render_install(install, render)
    assert sorted((doc["kind"], doc["metadata"]["name"]) for doc in docs) == sorted(
        [
            ("Namespace", NAMESPACE),
            ("ServiceAccount", "hpcbridge-hooks"),
            ("ConfigMap", "hpcbridge-nginx"),
            ("Deployment", "hpcbridge-hooks"),
            ("Service", "hpcbridge-hooks"),
            ("PodDisruptionBudget", "hpcbridge-hooks"),
            ("NetworkPolicy", "hpcbridge-hooks"),
            ("Issuer", "hpcbridge-selfsigned"),
            ("Certificate", "hpcbridge-ca"),
            ("Issuer", "hpcbridge-ca"),
            ("Certificate", "hpcbridge-hooks-tls"),
            ("Certificate", "hpcbridge-metacontroller-client"),
            ("CustomResourceDefinition", "batchjobs.hpcbridge.io"),
            ("ClusterRole", "hpcbridge-batchjobs-edit"),
            ("ClusterRole", "hpcbridge-batchjobs-view"),
            (CONTROLLER_OF_INSTALL[install], "hpcbridge-batchjob"),
        ]
    )
    for doc in docs:
        expected = None if doc["kind"] in CLUSTER_SCOPED else NAMESPACE
        assert doc["metadata"].get("namespace") == expected, doc["kind"]


@pytest.mark.parametrize("install", INSTALLS)
def test_install_validates_against_kubernetes_schemas(install: str, render: Render) -> None:
    for doc in render_install(install, render):
        if doc["kind"] not in METACONTROLLER_KINDS | CERT_MANAGER_KINDS:  # schemas/
            kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)


@functools.cache
def cert_manager_schema(kind: str) -> Object:
    """The repository's JSON Schema of the cert-manager fields deploy/tls uses (schemas/)."""
    (schemas,) = load_all(Path(__file__).parent / "schemas/cert-manager.yaml")
    return {"$schema": schemas["$schema"], "$defs": schemas["$defs"], **schemas[kind]}


@pytest.mark.parametrize("install", INSTALLS)
def test_install_certificates_match_the_cert_manager_schema(install: str, render: Render) -> None:
    docs = [doc for doc in render_install(install, render) if doc["kind"] in CERT_MANAGER_KINDS]
    assert sorted({doc["kind"] for doc in docs}) == sorted(CERT_MANAGER_KINDS)
    for doc in docs:
        assert schema_violations(doc, cert_manager_schema(doc["kind"])) == [], doc["metadata"]


@pytest.mark.parametrize("directory", ["deploy", "deploy/base"])
def test_removing_the_controller_keeps_the_batchjob_type(directory: str, render: Render) -> None:
    """`kubectl delete -k deploy/` cannot delete the CRD, and with it every BatchJob: the type
    is crds/'s alone (docs/operations.md, "Uninstall")."""
    kinds = {doc["kind"] for doc in render(REPO / directory)}
    assert "CustomResourceDefinition" not in kinds
    assert "ClusterRole" not in kinds


HOOKS = "spec.template.spec.containers.[name=hooks]"
POD_SPEC = "spec.template.spec"
LABELS = {"app.kubernetes.io/name": "hpcbridge", "app.kubernetes.io/component": "hooks"}
SPREAD = {
    "maxSkew": 1,
    "whenUnsatisfiable": "ScheduleAnyway",
    "labelSelector": {"matchLabels": LABELS},
    "matchLabelKeys": ["pod-template-hash"],
}

DEPLOYMENT_SETTINGS = [
    pytest.param("spec.replicas", 2, id="replicas"),
    pytest.param("spec.selector.matchLabels", LABELS, id="selector"),
    pytest.param("spec.template.metadata.labels", LABELS, id="pod-labels"),
    pytest.param(f"{HOOKS}.image", IMAGE, id="image"),
    pytest.param(f"{HOOKS}.command", None, id="image-cmd"),
    pytest.param(f"{HOOKS}.env.[name=HOST].value", "127.0.0.1", id="env-host"),
    pytest.param(f"{HOOKS}.env.[name=PORT].value", "8080", id="env-port"),
    pytest.param(f"{HOOKS}.env.[name=HPCBRIDGE_LOG_IMAGE].value", IMAGE, id="env-log-image"),
    pytest.param(
        f"{HOOKS}.env.[name=HPCBRIDGE_AUTH_TOKEN_FILE].value",
        "/etc/hpcbridge/token/token",
        id="token-file",
    ),
    pytest.param(f"{HOOKS}.env.[name=HPCBRIDGE_METRICS_PORT].value", "9090", id="metrics-port"),
    pytest.param(
        f"{HOOKS}.ports",
        [{"name": "metrics", "containerPort": 9090, "protocol": "TCP"}],
        id="ports",
    ),
    pytest.param(
        f"{HOOKS}.readinessProbe.httpGet",
        {"path": "/healthz", "port": "metrics", "scheme": "HTTP"},
        id="ready",
    ),
    pytest.param(
        f"{HOOKS}.livenessProbe.httpGet",
        {"path": "/healthz", "port": "metrics", "scheme": "HTTP"},
        id="live",
    ),
    pytest.param(
        f"{HOOKS}.resources",
        {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
        id="resources",
    ),
    pytest.param(
        f"{HOOKS}.securityContext",
        {
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
        id="container-security",
    ),
    pytest.param(
        f"{POD_SPEC}.securityContext",
        {
            "runAsNonRoot": True,
            "runAsUser": 65532,
            "runAsGroup": 65532,
            "fsGroup": 65532,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        id="pod-security",
    ),
    pytest.param(
        f"{HOOKS}.volumeMounts",
        [
            {"name": "tmp", "mountPath": "/tmp"},
            {"name": "token", "mountPath": "/etc/hpcbridge/token", "readOnly": True},
        ],
        id="mounts",
    ),
    pytest.param(
        f"{POD_SPEC}.volumes",
        [
            {"name": "tmp", "emptyDir": {}},
            {"name": "nginx-tmp", "emptyDir": {}},
            {"name": "nginx", "configMap": {"name": "hpcbridge-nginx"}},
            {
                "name": "tls",
                "secret": {
                    "secretName": "hpcbridge-hooks-tls",
                    "defaultMode": 0o440,
                    "items": [
                        {"key": key, "path": key} for key in ("tls.crt", "tls.key", "ca.crt")
                    ],
                },
            },
            {
                "name": "token",
                "secret": {
                    "secretName": "hpcbridge-hooks-token",
                    "defaultMode": 0o440,
                    "items": [{"key": "token", "path": "token"}],
                },
            },
        ],
        id="volumes",
    ),
    pytest.param(f"{POD_SPEC}.automountServiceAccountToken", False, id="no-token"),
    pytest.param(f"{POD_SPEC}.serviceAccountName", "hpcbridge-hooks", id="service-account"),
    pytest.param(
        f"{POD_SPEC}.topologySpreadConstraints",
        [
            {"topologyKey": "kubernetes.io/hostname", **SPREAD},
            {"topologyKey": "topology.kubernetes.io/zone", **SPREAD},
        ],
        id="spread",
    ),
]


@pytest.mark.parametrize("install", INSTALLS)
@pytest.mark.parametrize(("field_path", "expected"), DEPLOYMENT_SETTINGS)
def test_deployment_setting(
    install: str, field_path: str, expected: object, render: Render
) -> None:
    deployment = select(
        render_install(install, render), {"kind": "Deployment", "name": "hpcbridge-hooks"}
    )
    assert field(deployment, field_path) == expected


@pytest.mark.parametrize("install", INSTALLS)
def test_service_routes_to_the_hooks(install: str, render: Render) -> None:
    service = select(
        render_install(install, render), {"kind": "Service", "name": "hpcbridge-hooks"}
    )
    assert service["spec"]["selector"] == LABELS
    assert service["spec"]["ports"] == [
        {"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"},
        {"name": "metrics", "port": 9090, "targetPort": "metrics", "protocol": "TCP"},
    ]


def test_namespace_enforces_restricted_pod_security(render: Render) -> None:
    namespace = select(render(REPO / "deploy/base"), {"kind": "Namespace", "name": NAMESPACE})
    labels = namespace["metadata"]["labels"]
    for mode in ("enforce", "audit", "warn"):
        assert labels[f"pod-security.kubernetes.io/{mode}"] == "restricted"


RESTRICTED_VOLUME_TYPES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
    "projected", "secret",
}  # fmt: skip


def restricted_violations(pod: Object) -> list[str]:
    """What the restricted Pod Security Standard forbids in a Pod spec (its checks that the
    installs could break)."""
    found = []
    pod_context = pod.get("securityContext", {})
    for host in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(host):
            found.append(host)
    for volume in pod.get("volumes", []):
        if not set(volume) - {"name"} <= RESTRICTED_VOLUME_TYPES:
            found.append(f"volume {volume['name']}")
    for container in pod["containers"] + pod.get("initContainers", []):
        context = {**pod_context, **container.get("securityContext", {})}
        name = container["name"]
        if context.get("runAsNonRoot") is not True or context.get("runAsUser") == 0:
            found.append(f"{name}: may run as root")
        if context.get("allowPrivilegeEscalation") is not False:
            found.append(f"{name}: allowPrivilegeEscalation")
        if context.get("privileged"):
            found.append(f"{name}: privileged")
        if context.get("seccompProfile", {}).get("type") not in ("RuntimeDefault", "Localhost"):
            found.append(f"{name}: seccompProfile")
        capabilities = context.get("capabilities", {})
        if "ALL" not in capabilities.get("drop", []):
            found.append(f"{name}: capabilities not dropped")
        if set(capabilities.get("add", [])) - {"NET_BIND_SERVICE"}:
            found.append(f"{name}: capabilities added")
        if any("hostPort" in port for port in container.get("ports", [])):
            found.append(f"{name}: hostPort")
    return found


@pytest.mark.parametrize("install", INSTALLS)
def test_pods_meet_the_restricted_pod_security_standard(install: str, render: Render) -> None:
    for doc in render_install(install, render):
        if "template" in doc.get("spec", {}):
            assert restricted_violations(doc["spec"]["template"]["spec"]) == [], doc["kind"]


@pytest.mark.parametrize("install", INSTALLS)
def test_disruptions_take_one_replica_at_a_time(install: str, render: Render) -> None:
    docs = render_install(install, render)
    budget = select(docs, {"kind": "PodDisruptionBudget", "name": "hpcbridge-hooks"})
    deployment = select(docs, {"kind": "Deployment", "name": "hpcbridge-hooks"})
    assert budget["spec"] == {
        "maxUnavailable": 1,
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
        "selector": {"matchLabels": LABELS},
    }
    assert deployment["spec"]["replicas"] > budget["spec"]["maxUnavailable"]


# --- (d2) TLS, client authentication and the NetworkPolicy ----------------------------------

TLS_SECRET_KEYS = ("tls.crt", "tls.key", "ca.crt")  # what cert-manager and the recipe write


def webhooks(docs: Sequence[Object]) -> list[Object]:
    (controller,) = (doc for doc in docs if doc["kind"] in METACONTROLLER_KINDS)
    return [hook["webhook"] for hook in controller["spec"]["hooks"].values()]


def secret_references(docs: Sequence[Object]) -> set[tuple[str, str, str]]:
    """(namespace, Secret, key) of every Secret key the hook Pods mount and Metacontroller
    reads for the hooks' connections, with the controllers' defaults filled in."""
    deployment = select(docs, {"kind": "Deployment", "name": "hpcbridge-hooks"})
    found = {
        (NAMESPACE, volume["secret"]["secretName"], item["key"])
        for volume in field(deployment, f"{POD_SPEC}.volumes")
        if "secret" in volume
        for item in volume["secret"]["items"]
    }
    for webhook in webhooks(docs):
        ca, client = webhook["caBundle"]["secretRef"], webhook["clientTLS"]
        token = webhook["authorization"]["secretRef"]
        found.add((ca["namespace"], ca["name"], ca.get("key", "ca.crt")))
        for key in (client.get("certKey", "tls.crt"), client.get("privateKeyKey", "tls.key")):
            found.add((client["secretRef"]["namespace"], client["secretRef"]["name"], key))
        found.add((token["namespace"], token["name"], token["key"]))
    return found


def secrets_made(secrets: Sequence[Object], docs: Sequence[Object] = ()) -> set[tuple[str, ...]]:
    """(namespace, Secret, key) of the Secrets given and of those the Certificates make."""
    made = {
        (secret["metadata"]["namespace"], secret["metadata"]["name"], key)
        for secret in secrets
        for key in secret["data"]
    }
    for doc in docs:
        if doc["kind"] == "Certificate":
            meta, name = doc["metadata"], doc["spec"]["secretName"]
            made |= {(meta["namespace"], name, key) for key in TLS_SECRET_KEYS}
    return made


@pytest.mark.parametrize("install", INSTALLS)
def test_readme_install_makes_every_secret_the_hooks_need(
    install: str, readme_installs: dict[str, Object], kubectl: str, tmp_path: Path
) -> None:
    """The README's token step (run as a client-side dry run) and the Certificates make every
    Secret key the hook Pods mount and the controller's hooks name."""
    result = readme_installs[install]
    secrets = dry_run_secrets("\n".join(result["secret_steps"]), tmp_path, kubectl)
    (token,) = secrets
    meta = token["metadata"]
    assert (meta["name"], meta["namespace"]) == ("hpcbridge-hooks-token", NAMESPACE)
    assert re.fullmatch(r"[0-9a-f]{64}\n?", base64.b64decode(token["data"]["token"]).decode())
    assert secret_references(result["objects"]) <= secrets_made(secrets, result["objects"])


@pytest.mark.parametrize("install", INSTALLS)
def test_hook_urls_reach_the_tls_port_under_the_certificate_name(
    install: str, render: Render
) -> None:
    docs = render_install(install, render)
    service = select(docs, {"kind": "Service", "name": "hpcbridge-hooks"})
    deployment = select(docs, {"kind": "Deployment", "name": "hpcbridge-hooks"})
    serving = select(docs, {"kind": "Certificate", "name": "hpcbridge-hooks-tls"})
    (https,) = (port for port in service["spec"]["ports"] if port["name"] == "https")
    nginx = "spec.template.spec.containers.[name=nginx]"
    container_port = field(deployment, f"{nginx}.ports.[name={https['targetPort']}].containerPort")
    assert f"listen {container_port} ssl;" in (REPO / "deploy/base/nginx.conf").read_text()
    assert f"{service['metadata']['name']}.{NAMESPACE}.svc" == SERVICE_HOST
    assert SERVICE_HOST in serving["spec"]["dnsNames"]
    for webhook in webhooks(docs):
        assert re.fullmatch(
            rf"https://{re.escape(SERVICE_HOST)}:{https['port']}/[a-z]+", webhook["url"]
        )


def test_the_deployment_reads_tls_and_token_from_read_only_secret_mounts(render: Render) -> None:
    deployment = select(
        render(REPO / "deploy/base"), {"kind": "Deployment", "name": "hpcbridge-hooks"}
    )
    (container,) = (c for c in field(deployment, f"{POD_SPEC}.containers") if c["name"] == "hooks")
    env = {item["name"]: item.get("value") for item in container["env"]}
    volumes = {volume["name"]: volume for volume in field(deployment, f"{POD_SPEC}.volumes")}
    for name in ("HPCBRIDGE_AUTH_TOKEN_FILE",):
        path = Path(env[name])
        (mount,) = (m for m in container["volumeMounts"] if Path(m["mountPath"]) == path.parent)
        assert mount["readOnly"] is True
        secret = volumes[mount["name"]]["secret"]
        assert {"key": path.name, "path": path.name} in secret["items"], name
        assert secret["defaultMode"] == 0o440
    metrics = field(deployment, f"{HOOKS}.ports.[name=metrics].containerPort")
    assert env["HPCBRIDGE_METRICS_PORT"] == str(metrics)


CERTIFICATE_USAGES = {  # Certificate: (usages, the Secret)
    "hpcbridge-hooks-tls": (["digital signature", "server auth"], "hpcbridge-hooks-tls"),
    "hpcbridge-metacontroller-client": (
        ["digital signature", "client auth"], "hpcbridge-metacontroller-client",
    ),
}  # fmt: skip


def test_the_certificates_come_from_the_namespaced_private_ca(render: Render) -> None:
    docs = render(REPO / "deploy/tls")
    ca = select(docs, {"kind": "Certificate", "name": "hpcbridge-ca"})
    assert ca["spec"]["isCA"] is True
    assert ca["spec"]["issuerRef"]["name"] == "hpcbridge-selfsigned"
    assert select(docs, {"kind": "Issuer", "name": "hpcbridge-selfsigned"})["spec"] == {
        "selfSigned": {}
    }
    ca_issuer = select(docs, {"kind": "Issuer", "name": "hpcbridge-ca"})
    assert ca_issuer["spec"] == {"ca": {"secretName": ca["spec"]["secretName"]}}
    for name, (usages, secret) in CERTIFICATE_USAGES.items():
        spec = select(docs, {"kind": "Certificate", "name": name})["spec"]
        assert spec["issuerRef"] == {
            "name": "hpcbridge-ca",
            "kind": "Issuer",
            "group": "cert-manager.io",
        }
        assert (spec["usages"], spec["secretName"]) == (usages, secret)
        assert spec["privateKey"]["rotationPolicy"] == "Always"
    assert all(doc["metadata"]["namespace"] == NAMESPACE for doc in docs)


NETWORK_POLICY_SPEC = {
    "podSelector": {"matchLabels": LABELS},
    "policyTypes": ["Ingress", "Egress"],
    "ingress": [
        {
            "from": [{"namespaceSelector": {"matchLabels": {
                "kubernetes.io/metadata.name": "metacontroller"}}}],
            "ports": [{"port": "https", "protocol": "TCP"}],
        },
        {
            "from": [{"namespaceSelector": {"matchLabels": {
                "kubernetes.io/metadata.name": "monitoring"}}}],
            "ports": [{"port": "metrics", "protocol": "TCP"}],
        },
    ],
    "egress": [
        {"ports": [{"port": 22, "protocol": "TCP"}]},
        {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]},
    ],
}  # fmt: skip


@pytest.mark.parametrize("install", INSTALLS)
def test_network_policy(install: str, render: Render) -> None:
    """Metacontroller's namespace to the hooks, the monitoring namespace to the metrics, and
    out only SSH and DNS; the named ports are the hook container's."""
    docs = render_install(install, render)
    policy = select(docs, {"kind": "NetworkPolicy", "name": "hpcbridge-hooks"})
    assert policy["spec"] == NETWORK_POLICY_SPEC
    deployment = select(docs, {"kind": "Deployment", "name": "hpcbridge-hooks"})
    assert policy["spec"]["podSelector"]["matchLabels"] == field(
        deployment, "spec.template.metadata.labels"
    )
    names = {port["name"] for container in field(deployment, f"{POD_SPEC}.containers")
             for port in container["ports"]}
    assert {port["port"] for rule in policy["spec"]["ingress"] for port in rule["ports"]} == names


OPERATIONS = REPO / "docs/operations.md"


def operations_section(title: str) -> str:
    """The text of docs/operations.md's ``### title`` section, up to the next heading."""
    section = OPERATIONS.read_text().split(f"\n### {title}\n", 1)[1]
    return re.split(r"\n#{2,3} ", section, maxsplit=1)[0]


def test_documented_network_policy_patch(tmp_path: Path, render: Render) -> None:
    """docs/operations.md's kustomize patch, added to deploy/kustomization.yaml, moves the
    namespaces and opens another SSH port."""
    (patch,) = re.findall(r"```yaml\n(.*?)```", operations_section("NetworkPolicy"), re.DOTALL)
    workdir = copy_install_dirs(tmp_path)
    with (workdir / "deploy/kustomization.yaml").open("a") as kustomization:
        kustomization.write(patch)
    policy = select(
        render(workdir / "deploy"), {"kind": "NetworkPolicy", "name": "hpcbridge-hooks"}
    )
    spec = policy["spec"]
    namespaces = [rule["from"][0]["namespaceSelector"]["matchLabels"] for rule in spec["ingress"]]
    assert namespaces == [
        {"kubernetes.io/metadata.name": "mc-system"},
        {"kubernetes.io/metadata.name": "prometheus"},
    ]
    assert spec["egress"][0]["ports"] == [
        {"port": 22, "protocol": "TCP"},
        {"port": 2222, "protocol": "TCP"},
    ]


def test_openssl_recipe_makes_the_secrets_the_install_needs(
    tmp_path: Path, render: Render, kubectl: str, openssl: str
) -> None:
    """docs/operations.md's recipe for clusters without cert-manager, run as written (its
    `kubectl create secret` steps as client-side dry runs): the Secrets the hook Pods and the
    controller name, with a serving certificate for the hooks' name and a client certificate,
    both signed by the CA in ca.crt."""
    recipe = operations_section("Without cert-manager")
    (script,) = re.findall(r"```sh\n(.*?)```", recipe, re.DOTALL)
    secrets = dry_run_secrets(script, tmp_path, kubectl)
    docs = [
        *render(REPO / "deploy/base"),
        *load_all(REPO / "metacontroller/compositecontroller.yaml"),
    ]
    assert secret_references(docs) <= secrets_made(secrets)
    by_name = {secret["metadata"]["name"]: secret for secret in secrets}
    assert sorted(by_name) == sorted(
        ["hpcbridge-hooks-tls", "hpcbridge-metacontroller-client", "hpcbridge-hooks-token"]
    )

    def pem(secret: str, key: str) -> bytes:
        return base64.b64decode(by_name[secret]["data"][key])

    ca = x509.load_pem_x509_certificate(pem("hpcbridge-hooks-tls", "ca.crt"))
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    for secret, usage in (
        ("hpcbridge-hooks-tls", ExtendedKeyUsageOID.SERVER_AUTH),
        ("hpcbridge-metacontroller-client", ExtendedKeyUsageOID.CLIENT_AUTH),
    ):
        assert by_name[secret]["type"] == "kubernetes.io/tls"
        assert pem(secret, "ca.crt") == pem("hpcbridge-hooks-tls", "ca.crt")
        cert = x509.load_pem_x509_certificate(pem(secret, "tls.crt"))
        cert.verify_directly_issued_by(ca)
        assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [usage]
        key = serialization.load_pem_private_key(pem(secret, "tls.key"), password=None)
        assert key.public_key() == cert.public_key()
    serving = x509.load_pem_x509_certificate(pem("hpcbridge-hooks-tls", "tls.crt"))
    names = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert SERVICE_HOST in names.get_values_for_type(x509.DNSName)
    assert (tmp_path / "ca.key").stat().st_mode & 0o077 == 0  # the recipe's umask 077


BATCHJOB_RULE = {"apiGroups": ["hpcbridge.io"], "resources": ["batchjobs"]}
USER_ROLES = {  # ClusterRole: (the default roles it is aggregated into, its one rule)
    "hpcbridge-batchjobs-edit": (
        {"admin", "edit"},
        {
            **BATCHJOB_RULE,
            "verbs": [
                "get", "list", "watch", "create", "update", "patch", "delete", "deletecollection",
            ],
        },
    ),
    "hpcbridge-batchjobs-view": (
        {"view"},
        {
            **BATCHJOB_RULE,
            "resources": ["batchjobs", "batchjobs/status"],
            "verbs": ["get", "list", "watch"],
        },
    ),
}  # fmt: skip


@pytest.mark.parametrize(("name", "role"), USER_ROLES.items(), ids=USER_ROLES)
def test_user_role_is_aggregated(name: str, role: tuple[set[str], Object], render: Render) -> None:
    aggregated_to, rule = role
    cluster_role = select(render(REPO / "crds"), {"kind": "ClusterRole", "name": name})
    labels = cluster_role["metadata"]["labels"]
    prefix = "rbac.authorization.k8s.io/aggregate-to-"
    assert {key.removeprefix(prefix) for key in labels if key.startswith(prefix)} == aggregated_to
    assert all(labels[f"{prefix}{role}"] == "true" for role in aggregated_to)
    assert cluster_role["rules"] == [rule]


# --- (e) the Dockerfile ---------------------------------------------------------------------


def test_dockerfile_passes_hadolint() -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    result = subprocess.run(
        [str(hadolint), "--no-color", "Dockerfile"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


DOCKERFILE = (REPO / "Dockerfile").read_text()


def dockerfile_stages() -> list[list[str]]:
    """The Dockerfile's instructions, continuation lines joined and comments dropped, by stage."""
    stages: list[list[str]] = []
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE)
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith("FROM "):
            stages.append([])
        stages[-1].append(line)
    return stages


@pytest.mark.parametrize(
    "line",
    [
        pytest.param("FROM python:3.11-slim-bookworm AS build", id="builder"),
        pytest.param("COPY requirements.lock /tmp/requirements.lock", id="copy-lock"),
        pytest.param("FROM python:3.11-slim-bookworm", id="base"),
        pytest.param("COPY --from=build /opt/hpcbridge /opt/hpcbridge", id="copy-venv"),
        pytest.param("WORKDIR /app", id="workdir"),
        pytest.param("COPY hooks/ hooks/", id="copy-hooks"),
        pytest.param("USER 65532:65532", id="user"),
        pytest.param("EXPOSE 8080 9090", id="expose"),
        pytest.param(
            'CMD ["gunicorn", "-c", "python:hooks.gunicorn_conf", "hooks.app:create_app()"]',
            id="cmd",
        ),
    ],
)
def test_dockerfile_line(line: str) -> None:
    assert line in DOCKERFILE.splitlines()


def test_builder_installs_the_lock_file_by_hash_alone() -> None:
    builder, _ = dockerfile_stages()
    (install,) = (line for line in builder if " install " in line)
    for option in ("--require-hashes", "--no-deps", "--only-binary=:all:"):
        assert option in install.split()
    assert install.endswith("-r /tmp/requirements.lock")
    assert "python -m venv --without-pip /opt/hpcbridge" in install


def test_final_image_has_no_pip_and_runs_the_virtualenv() -> None:
    _, final = dockerfile_stages()
    assert not any(" install " in line for line in final)
    (uninstall,) = (line for line in final if "pip uninstall" in line)
    assert uninstall.split()[-3:] == ["pip", "setuptools", "wheel"]
    # pip goes before the virtualenv arrives, so that `python` is still the base image's
    assert final.index(uninstall) < final.index("COPY --from=build /opt/hpcbridge /opt/hpcbridge")
    assert "ENV PATH=/opt/hpcbridge/bin:$PATH" in " ".join(final)


def test_final_image_has_oci_labels() -> None:
    _, final = dockerfile_stages()
    (label,) = (line for line in final if line.startswith("LABEL "))
    keys = re.findall(r"(org\.opencontainers\.image\.[a-z]+)=", label)
    assert keys == [
        f"org.opencontainers.image.{key}" for key in ("title", "description", "version", "revision")
    ]
    assert 'org.opencontainers.image.version="${VERSION}"' in label


def test_dockerignore_admits_what_the_dockerfile_copies() -> None:
    admitted = {
        line[1:].rstrip("/")
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    }
    copied = {
        line.split()[1].rstrip("/")
        for stage in dockerfile_stages()
        for line in stage
        if line.startswith("COPY ") and "--from=" not in line
    }
    assert copied == admitted


def requirement_pins(text: str) -> dict[str, str]:
    """``name==version`` lines by normalised name (PEP 503)."""
    pins = {}
    for name, version in re.findall(r"^([A-Za-z0-9._-]+)==([^\s;\\]+)", text, re.MULTILINE):
        pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    return pins


def test_requirements_pin_exact_versions() -> None:
    lines = [
        line
        for line in (REPO / "requirements.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines and all(re.fullmatch(r"[A-Za-z0-9._-]+==[^\s]+", line) for line in lines)


def test_lock_file_has_every_requirement_at_its_version() -> None:
    """requirements.lock (`make lock`) holds each requirements.txt pin at the same version."""
    wanted = requirement_pins((REPO / "requirements.txt").read_text())
    locked = requirement_pins((REPO / "requirements.lock").read_text())
    assert {name: locked.get(name) for name in wanted} == wanted


def test_lock_file_pins_every_package_with_hashes() -> None:
    entries = re.split(r"\n(?=[A-Za-z0-9])", (REPO / "requirements.lock").read_text())
    packages = [entry for entry in entries if not entry.startswith("#")]
    assert len(packages) == len(requirement_pins((REPO / "requirements.lock").read_text()))
    for entry in packages:
        assert re.match(r"[A-Za-z0-9._-]+==\S+ \\\n", entry), entry.splitlines()[0]
        assert re.search(r"--hash=sha256:[0-9a-f]{64}", entry), entry.splitlines()[0]


# --- (f) saved hook requests ----------------------------------------------------------------

COMPOSITE_KEYS = ["controller", "parent", "children", "related", "finalizing"]
DECORATOR_KEYS = ["controller", "object", "attachments", "related", "finalizing"]
REQUEST_SHAPES = {  # file: (controller kind, top-level keys in wire order, hook version)
    "customize.json": ("CompositeController", ["controller", "parent"], "v1"),
    "sync-first.json": ("CompositeController", COMPOSITE_KEYS, "v1"),
    "sync-running.json": ("CompositeController", COMPOSITE_KEYS, "v1"),
    "sync-v2.json": ("CompositeController", COMPOSITE_KEYS, "v2"),
    "finalize.json": ("CompositeController", COMPOSITE_KEYS, "v1"),
    "decorator-sync.json": ("DecoratorController", DECORATOR_KEYS, "v1"),
}


def test_every_saved_request_is_checked() -> None:
    assert sorted(path.name for path in REQUESTS.iterdir()) == sorted(REQUEST_SHAPES)


@pytest.mark.parametrize(
    ("file_name", "kind", "keys", "version"),
    [pytest.param(name, *shape, id=name) for name, shape in REQUEST_SHAPES.items()],
)
def test_saved_request(file_name: str, kind: str, keys: list[str], version: str) -> None:
    body = json.loads((REQUESTS / file_name).read_text())
    assert list(body) == keys
    parent = body.get("parent") or body["object"]
    assert batchjob_violations(parent) == []
    assert body.get("finalizing", False) == ("deletionTimestamp" in parent["metadata"])

    controller = body["controller"]
    assert controller["kind"] == kind
    assert schema_violations(controller, controller_schema(kind)) == []
    (manifest,) = load_all(REPO / "metacontroller" / CONTROLLER_FILES[kind])
    for hook in manifest["spec"]["hooks"].values():
        hook["version"] = version
    assert controller["metadata"]["name"] == manifest["metadata"]["name"]
    assert controller["spec"] == manifest["spec"]


@pytest.mark.parametrize(
    ("file_name", "version"),
    [pytest.param(name, version, id=name) for name, (_, _, version) in REQUEST_SHAPES.items()],
)
def test_saved_request_object_keys(file_name: str, version: str) -> None:
    """Children, attachments and related objects are keyed as the hook version says: v1 by
    bare name (same-namespace objects), v2 by namespace/name."""
    body = json.loads((REQUESTS / file_name).read_text())
    for section in ("children", "attachments", "related"):
        for group in body.get(section, {}).values():
            for key, obj in group.items():
                name, namespace = obj["metadata"]["name"], obj["metadata"]["namespace"]
                assert key == (name if version == "v1" else f"{namespace}/{name}")
