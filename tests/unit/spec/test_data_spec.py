"""spec.storage, the s3 and persistentVolumeClaim inputs and spec.outputs: parsed into the
spec, refused with a sentence naming the field (InvalidSpec), and accepted or refused by the
CRD alike where it can say so."""

from __future__ import annotations

from typing import Any

import pytest

from hooks.core.spec.batchjob import digest, parse
from hooks.core.spec.data import matches
from hooks.core.values.storage import DataInput, Output, S3Object, S3Storage, Volume, When
from hooks.schedulers.registry import REGISTRY
from tests.static.admission import MINIMAL_SPEC, batchjob_violations
from tests.unit.conftest import raw_spec, spec_of

STORAGE = {"s3": {"endpoint": "https://s3.example.org", "region": "us-east-1",
                  "secretRef": {"name": "s3-creds"}}}
DATA = {
    "storage": STORAGE,
    "inputs": [
        {"s3": {"bucket": "datasets", "key": "runs/42/params.json"}, "path": "data/params.json"},
        {"s3": {"bucket": "datasets", "prefix": "runs/42/raw/"}, "path": "data/raw/"},
        {"persistentVolumeClaim": {"claimName": "prepared", "subPath": "run-42"},
         "path": "data/prepared/"},
        {"configMap": {"name": "params"}, "path": "conf"},
    ],
    "outputs": [
        {"path": "results/*.h5", "s3": {"bucket": "results", "prefix": "alice/run-42/"},
         "when": "OnSuccess"},
        {"path": "summary.json",
         "persistentVolumeClaim": {"claimName": "results", "subPath": "run-42"},
         "optional": True},
    ],
}


def batchjob(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "hpcbridge.io/v1alpha1", "kind": "BatchJob",
            "metadata": {"name": "data", "namespace": "research"},
            "spec": {**MINIMAL_SPEC, **spec}}


def error_of(**fields: Any) -> str:
    parsed = parse(raw_spec(**fields), REGISTRY)
    assert parsed.spec is None
    return parsed.error


def test_the_whole_data_spec_is_parsed() -> None:
    spec = spec_of(raw_spec(**DATA))
    assert spec.storage == S3Storage("https://s3.example.org", "s3-creds", "us-east-1")
    assert spec.data_inputs == (
        DataInput("data/params.json", s3=S3Object("datasets", key="runs/42/params.json")),
        DataInput("data/raw/", s3=S3Object("datasets", prefix="runs/42/raw/")),
        DataInput("data/prepared/", volume=Volume("prepared", "run-42")),
    )
    assert [i.name for i in spec.inputs] == ["params"]
    assert spec.outputs == (
        Output("results/*.h5", s3=S3Object("results", prefix="alice/run-42/")),
        Output("summary.json", volume=Volume("results", "run-42"), optional=True),
    )
    assert batchjob_violations(batchjob(DATA)) == []


def test_a_spec_without_data_keeps_its_digest() -> None:
    plain = spec_of(raw_spec())
    assert plain.storage is None and plain.data_inputs == () and plain.outputs == ()
    assert digest(plain) == digest(spec_of(raw_spec(outputs=[])))


@pytest.mark.parametrize(("fields", "words", "crd_refuses"), [
    pytest.param({"storage": {"s3": {**STORAGE["s3"], "endpoint": "s3.example.org"}}},
                 "spec.storage.s3.endpoint must be an http:// or https:// URL", True,
                 id="endpoint-not-a-url"),
    pytest.param({"storage": {"s3": {**STORAGE["s3"], "endpoint": "https://u:p@s3/x"}}},
                 "spec.storage.s3.endpoint", True, id="endpoint-userinfo-path"),
    pytest.param({"storage": {"s3": {**STORAGE["s3"], "endpoint": "http://s3:99999"}}},
                 "port 99999 is not a TCP port", False, id="endpoint-port"),
    pytest.param({"inputs": [{"s3": {"bucket": "x", "key": "k"}, "path": "k"}]},
                 "spec.inputs[0].s3 needs spec.storage.s3", False, id="s3-without-storage"),
    pytest.param({"storage": STORAGE,
                  "inputs": [{"s3": {"bucket": "Bad_Bucket", "key": "k"}, "path": "k"}]},
                 "spec.inputs[0].s3.bucket must be an S3 bucket name", True, id="bucket"),
    pytest.param({"storage": STORAGE,
                  "inputs": [{"s3": {"bucket": "192.168.1.1", "key": "k"}, "path": "k"}]},
                 "spec.inputs[0].s3.bucket", False, id="bucket-ip"),
    pytest.param({"storage": STORAGE,
                  "inputs": [{"s3": {"bucket": "data", "key": "a/../b"}, "path": "k"}]},
                 "spec.inputs[0].s3.key must be an object key", False, id="key-dot-dot"),
    pytest.param({"storage": STORAGE,
                  "inputs": [{"s3": {"bucket": "data", "key": "/abs"}, "path": "k"}]},
                 "spec.inputs[0].s3.key", False, id="key-absolute"),
    pytest.param({"storage": STORAGE,
                  "inputs": [{"s3": {"bucket": "data", "key": "a\x1bb"}, "path": "k"}]},
                 "spec.inputs[0].s3.key", False, id="key-control"),
    pytest.param({"storage": STORAGE,
                  "inputs": [{"s3": {"bucket": "data", "prefix": "raw"}, "path": "r/"}]},
                 "spec.inputs[0].s3.prefix must be an object key ending in /", False,
                 id="prefix-no-slash"),
    pytest.param({"storage": STORAGE,
                  "inputs": [{"s3": {"bucket": "data", "prefix": "raw/"}, "path": "r"}]},
                 "spec.inputs[0].path must end in /", False, id="prefix-to-a-file"),
    pytest.param({"storage": STORAGE,
                  "inputs": [{"s3": {"bucket": "data", "key": "k"}, "path": "../k"}]},
                 "spec.inputs[0].path must be a relative path", True, id="path-dot-dot"),
    pytest.param({"storage": STORAGE,
                  "inputs": [{"s3": {"bucket": "data", "key": "k"}, "path": "/etc/k"}]},
                 "spec.inputs[0].path must be a relative path", True, id="path-absolute"),
    pytest.param({"storage": STORAGE,
                  "inputs": [{"s3": {"bucket": "data", "key": "k"}, "path": "d/a"},
                             {"persistentVolumeClaim": {"claimName": "c"}, "path": "d/"}]},
                 "write the same files", False, id="two-inputs-overlap"),
    pytest.param({"storage": STORAGE,
                  "inputs": [{"configMap": {"name": "c"}, "items": [{"key": "k", "path": "x"}]},
                             {"s3": {"bucket": "data", "key": "k"}, "path": "x"}]},
                 "write the same files", False, id="configmap-and-s3-same-file"),
    pytest.param({"inputs": [{"persistentVolumeClaim": {"claimName": "c"}, "path": "jobid"}]},
                 "takes a name the hooks use", False, id="reserved-name"),
    pytest.param({"inputs": [{"persistentVolumeClaim": {"claimName": "c", "subPath": "../x"},
                              "path": "x"}]},
                 "spec.inputs[0].persistentVolumeClaim.subPath", False, id="subpath-dot-dot"),
    pytest.param({"outputs": [{"path": "x", "persistentVolumeClaim": {"claimName": "c"}}] * 65},
                 "spec.outputs must be a list of at most 64", True, id="too-many-outputs"),
    pytest.param({"outputs": [{"path": "../x", "persistentVolumeClaim": {"claimName": "c"}}]},
                 "spec.outputs[0].path must be a relative file pattern", False,
                 id="output-dot-dot"),
    pytest.param({"outputs": [{"path": "a b", "persistentVolumeClaim": {"claimName": "c"}}]},
                 "spec.outputs[0].path", False, id="output-space"),
    pytest.param({"outputs": [{"path": "x", "persistentVolumeClaim": {"claimName": "c"},
                               "when": "Sometimes"}]},
                 "spec.outputs[0].when must be OnSuccess, OnFailure or Always", True,
                 id="output-when"),
    pytest.param({"storage": STORAGE,
                  "outputs": [{"path": "x", "s3": {"bucket": "r", "key": "k"}}]},
                 "spec.outputs[0].s3.bucket", True, id="output-bucket-short"),
    pytest.param({"storage": STORAGE,
                  "outputs": [{"path": "x", "s3": {"bucket": "res", "key": "k"}}]},
                 "takes a prefix, not a key", True, id="output-key"),
    pytest.param({"outputs": [{"path": "x", "s3": {"bucket": "res"},
                               "persistentVolumeClaim": {"claimName": "c"}}]},
                 "exactly one of s3 and persistentVolumeClaim", True, id="output-two-targets"),
])
def test_bad_data_fields_are_an_invalid_spec(
    fields: dict[str, Any], words: str, crd_refuses: bool
) -> None:
    """The hooks refuse each; the CRD refuses those it can say (crd_refuses)."""
    assert words in error_of(**fields)
    if crd_refuses:
        assert batchjob_violations(batchjob(fields))


def test_when_defaults_to_on_success() -> None:
    spec = spec_of(raw_spec(outputs=[{"path": "x", "persistentVolumeClaim": {"claimName": "c"},
                                      "when": "Always"}, {"path": "y", "persistentVolumeClaim":
                                                          {"claimName": "c"}}]))
    assert [o.when for o in spec.outputs] == [When.ALWAYS, When.ON_SUCCESS]


@pytest.mark.parametrize(("pattern", "path", "found"), [
    ("results/*.h5", "results/a.h5", True),
    ("results/*.h5", "results/sub/a.h5", False),
    ("results/**/*.h5", "results/a.h5", True),
    ("**/*.csv", "a/b/c.csv", True),
    ("*", ".hidden", False),
    ("f[0-9].txt", "f7.txt", True),
    ("f[!0-9].txt", "f7.txt", False),
    ("summary.json", "summary.json", True),
    ("summary.json", "summary.jsonx", False),
    ("a.?", "a.b", True),
])
def test_output_patterns_match_as_documented(pattern: str, path: str, found: bool) -> None:
    assert matches(pattern, path) is found
