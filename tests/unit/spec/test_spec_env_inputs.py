"""Spec validation of env and inputs: what each accepts, and the one sentence naming the field
for what it refuses; the names an input may not take."""

from __future__ import annotations

import pytest

from hooks.core.spec.batchjob import parse
from hooks.core.spec.env_inputs import MAX_ENV, MAX_INPUTS
from hooks.core.spec.layout import relative_path, reserved_file
from hooks.core.values.fields import SpecError
from hooks.core.values.job import EnvVar, Input, ObjectKey
from hooks.schedulers.registry import REGISTRY
from tests.unit.conftest import raw_spec, refusal, spec_of
from tests.unit.spec.test_spec import one_sentence_naming

# --- env -----------------------------------------------------------------------------------------


def test_env_values_and_references() -> None:
    parsed = spec_of(raw_spec(env=[
        {"name": "MODE", "value": "fast"},
        {"name": "EMPTY", "value": ""},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "api", "key": "token"}}},
        {"name": "_level2", "valueFrom": {"configMapKeyRef": {
            "name": "settings", "key": "level.v2", "optional": True}}},
    ]))
    assert parsed.env == (
        EnvVar("MODE", "fast"),
        EnvVar("EMPTY", ""),
        EnvVar("TOKEN", source=ObjectKey("Secret", "api", "token")),
        EnvVar("_level2", source=ObjectKey("ConfigMap", "settings", "level.v2", True)),
    )


def test_an_env_value_may_hold_any_text_but_nul() -> None:
    value = "line one\nline 'two' $(not expanded) \"quoted\"\t\u00e9"
    (var,) = spec_of(raw_spec(env=[{"name": "V", "value": value}])).env
    assert var.value == value


def test_at_most_the_maximum_of_variables() -> None:
    env = [{"name": f"V{i}", "value": "x"} for i in range(MAX_ENV)]
    assert len(spec_of(raw_spec(env=env)).env) == MAX_ENV
    one_sentence_naming(refusal(env=[*env, {"name": "ONE_MORE", "value": "x"}]), "spec.env")


SECRET_REF = {"secretKeyRef": {"name": "api", "key": "token"}}


@pytest.mark.parametrize(
    ("env", "field"),
    [
        pytest.param({"name": "A"}, "spec.env", id="an-object"),
        pytest.param(["A=1"], "spec.env[0]", id="entry-a-string"),
        pytest.param([{"name": "1A", "value": "x"}], "spec.env[0].name", id="name-digit-first"),
        pytest.param([{"name": "A-B", "value": "x"}], "spec.env[0].name", id="name-dash"),
        pytest.param([{"name": "A B", "value": "x"}], "spec.env[0].name", id="name-space"),
        pytest.param([{"name": "", "value": "x"}], "spec.env[0].name", id="name-empty"),
        pytest.param([{"value": "x"}], "spec.env[0].name", id="no-name"),
        pytest.param([{"name": "A\n", "value": "x"}], "spec.env[0].name", id="name-newline"),
        pytest.param([{"name": "A", "value": "x"}, {"name": "A", "value": "y"}],
                     "spec.env[1].name", id="duplicate"),
        pytest.param([{"name": "A"}], "spec.env[0]", id="neither-value-nor-from"),
        pytest.param([{"name": "A", "value": "x", "valueFrom": SECRET_REF}], "spec.env[0]",
                     id="value-and-from"),
        pytest.param([{"name": "A", "value": 5}], "spec.env[0].value", id="value-a-number"),
        pytest.param([{"name": "A", "value": "a\x00b"}], "spec.env[0].value", id="value-nul"),
        pytest.param([{"name": "A", "valueFrom": {}}], "spec.env[0].valueFrom",
                     id="from-nothing"),
        pytest.param([{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}],
                     "spec.env[0].valueFrom", id="from-field-ref"),
        pytest.param([{"name": "A", "valueFrom": {
            **SECRET_REF, "configMapKeyRef": {"name": "c", "key": "k"}}}],
            "spec.env[0].valueFrom", id="from-both"),
        pytest.param([{"name": "A", "valueFrom": "api"}], "spec.env[0].valueFrom",
                     id="from-a-string"),
        pytest.param([{"name": "A", "valueFrom": {"secretKeyRef": {"name": "API", "key": "k"}}}],
                     "spec.env[0].valueFrom.secretKeyRef.name", id="secret-name-invalid"),
        pytest.param([{"name": "A", "valueFrom": {"configMapKeyRef": {"key": "k"}}}],
                     "spec.env[0].valueFrom.configMapKeyRef.name", id="config-map-no-name"),
        pytest.param([{"name": "A", "valueFrom": {"secretKeyRef": {"name": "api",
                                                                   "key": "a/b"}}}],
                     "spec.env[0].valueFrom.secretKeyRef.key", id="key-with-slash"),
        pytest.param([{"name": "A", "valueFrom": {"secretKeyRef": {"name": "api"}}}],
                     "spec.env[0].valueFrom.secretKeyRef.key", id="no-key"),
        pytest.param([{"name": "A", "valueFrom": {"secretKeyRef": {
            "name": "api", "key": "k", "optional": "true"}}}],
            "spec.env[0].valueFrom.secretKeyRef.optional", id="optional-text"),
    ],
)
def test_invalid_env(env: object, field: str) -> None:
    one_sentence_naming(refusal(env=env), field)


def test_the_message_of_an_invalid_env_value_does_not_show_it() -> None:
    message = refusal(env=[{"name": "PASSWORD", "value": "hunter2\x00"}])
    assert "hunter2" not in message and "PASSWORD" in message


# --- inputs --------------------------------------------------------------------------------------


def test_inputs() -> None:
    parsed = spec_of(raw_spec(inputs=[
        {"configMap": {"name": "params"}},
        {"secret": {"name": "tokens", "optional": True}, "path": "auth/keys",
         "items": [{"key": "api.token", "path": "api"}, {"key": "db", "path": "sub/db.pw"}]},
    ]))
    assert parsed.inputs == (
        Input("ConfigMap", "params"),
        Input("Secret", "tokens", "auth/keys", (("api.token", "api"), ("db", "sub/db.pw")),
              optional=True),
    )


def test_at_most_the_maximum_of_inputs() -> None:
    inputs = [{"configMap": {"name": f"c{i}"}, "path": f"d{i}"} for i in range(MAX_INPUTS)]
    assert len(spec_of(raw_spec(inputs=inputs)).inputs) == MAX_INPUTS
    one_sentence_naming(refusal(inputs=[*inputs, {"configMap": {"name": "more"}}]),
                        "spec.inputs")


@pytest.mark.parametrize(
    ("inputs", "field"),
    [
        pytest.param({"configMap": {"name": "c"}}, "spec.inputs", id="an-object"),
        pytest.param(["c"], "spec.inputs[0]", id="entry-a-string"),
        pytest.param([{}], "spec.inputs[0]", id="no-source"),
        pytest.param([{"configMap": {"name": "c"}, "secret": {"name": "s"}}], "spec.inputs[0]",
                     id="two-sources"),
        pytest.param([{"configMap": "c"}], "spec.inputs[0].configMap", id="source-a-string"),
        pytest.param([{"secret": {"name": "S"}}], "spec.inputs[0].secret.name",
                     id="secret-name-invalid"),
        pytest.param([{"configMap": {}}], "spec.inputs[0].configMap.name", id="no-name"),
        pytest.param([{"configMap": {"name": "c", "optional": 1}}],
                     "spec.inputs[0].configMap.optional", id="optional-a-number"),
        pytest.param([{"configMap": {"name": "c"}, "path": "../up"}], "spec.inputs[0].path",
                     id="path-escaping"),
        pytest.param([{"configMap": {"name": "c"}, "path": "a/../../up"}],
                     "spec.inputs[0].path", id="path-escaping-inside"),
        pytest.param([{"configMap": {"name": "c"}, "path": "/etc"}], "spec.inputs[0].path",
                     id="path-absolute"),
        pytest.param([{"configMap": {"name": "c"}, "path": ""}], "spec.inputs[0].path",
                     id="path-empty"),
        pytest.param([{"configMap": {"name": "c"}, "path": "a//b"}], "spec.inputs[0].path",
                     id="path-empty-component"),
        pytest.param([{"configMap": {"name": "c"}, "path": "./a"}], "spec.inputs[0].path",
                     id="path-dot"),
        pytest.param([{"configMap": {"name": "c"}, "path": "a\nb"}], "spec.inputs[0].path",
                     id="path-newline"),
        pytest.param([{"configMap": {"name": "c"}, "path": "a" * 1025}], "spec.inputs[0].path",
                     id="path-too-long"),
        pytest.param([{"configMap": {"name": "c"}, "path": "takeover.1"}],
                     "spec.inputs[0].path", id="path-reserved"),
        pytest.param([{"configMap": {"name": "c"}, "path": ".ssh"}], "spec.inputs[0].path",
                     id="path-hidden"),
        pytest.param([{"configMap": {"name": "c"}, "items": []}], "spec.inputs[0].items",
                     id="items-empty"),
        pytest.param([{"configMap": {"name": "c"}, "items": {"k": "p"}}],
                     "spec.inputs[0].items", id="items-an-object"),
        pytest.param([{"configMap": {"name": "c"}, "items": [{"path": "p"}]}],
                     "spec.inputs[0].items[0].key", id="item-without-key"),
        pytest.param([{"configMap": {"name": "c"}, "items": [{"key": "a b", "path": "p"}]}],
                     "spec.inputs[0].items[0].key", id="item-key-invalid"),
        pytest.param([{"configMap": {"name": "c"}, "items": [{"key": "k"}]}],
                     "spec.inputs[0].items[0].path", id="item-without-path"),
        pytest.param([{"configMap": {"name": "c"},
                       "items": [{"key": "k", "path": "x"}, {"key": "l", "path": "../x"}]}],
                     "spec.inputs[0].items[1].path", id="item-path-escaping"),
        pytest.param([{"configMap": {"name": "c"}, "items": [{"key": "k", "path": "script"}]}],
                     "spec.inputs[0].items", id="item-reserved"),
        pytest.param([{"configMap": {"name": "c"}, "path": "d",
                       "items": [{"key": "k", "path": "x"}, {"key": "l", "path": "x"}]}],
                     "spec.inputs[0].items", id="one-input-writing-a-file-twice"),
        pytest.param([{"configMap": {"name": "c"}, "items": [{"key": "k", "path": "d/x"}]},
                      {"secret": {"name": "s"}, "path": "d", "items": [{"key": "k", "path": "x"}]}],
                     "spec.inputs[1].items", id="two-inputs-writing-one-file"),
    ],
)
def test_invalid_inputs(inputs: object, field: str) -> None:
    one_sentence_naming(refusal(inputs=inputs), field)


def test_two_inputs_writing_one_file_are_both_named() -> None:
    message = refusal(inputs=[
        {"configMap": {"name": "a"}, "items": [{"key": "k", "path": "data/x"}]},
        {"configMap": {"name": "b"}, "items": [{"key": "k", "path": "data/x"}]},
    ])
    assert "spec.inputs[1]" in message and "spec.inputs[0]" in message and "data/x" in message


@pytest.mark.parametrize(
    ("path", "reserved"),
    [
        pytest.param("script", True, id="script"),
        pytest.param("script/x", True, id="under-script"),
        pytest.param("submit.sub", True, id="submit-description"),
        pytest.param("submit.out", True, id="submit-out"),
        pytest.param("submit.err", True, id="submit-err"),
        pytest.param("condor_submit.err", True, id="condor-submit-err"),
        pytest.param("job.log", True, id="user-log"),
        pytest.param("jobid", True, id="jobid"),
        pytest.param("jobid.tmp", True, id="jobid-being-written"),
        pytest.param("refused", True, id="refused"),
        pytest.param("ended", True, id="ended"),
        pytest.param("ended.tmp", True, id="ended-being-written"),
        pytest.param(".guard", True, id="guard"),
        pytest.param(".anything", True, id="hidden"),
        pytest.param("takeover.3", True, id="takeover"),
        pytest.param("hpcbridge-env", True, id="env-file"),
        pytest.param("hpcbridge-env.tmp", True, id="env-file-being-written"),
        pytest.param("hpcbridge-run", True, id="wrapper"),
        pytest.param("4242.out", True, id="slurm-output"),
        pytest.param("7_3.err", True, id="array-error"),
        pytest.param("23.0.out", True, id="condor-output"),
        pytest.param("data/.hidden", False, id="hidden-below-the-top"),
        pytest.param("data/script", False, id="script-below-the-top"),
        pytest.param("data/4242.out", False, id="output-name-below-the-top"),
        pytest.param("params.json", False, id="plain"),
        pytest.param("out", False, id="out"),
        pytest.param("result.out", False, id="output-suffix-without-a-digit"),
        pytest.param("4242.txt", False, id="digit-first-other-suffix"),
        pytest.param("scripts", False, id="longer-than-script"),
        pytest.param("takeover", False, id="takeover-without-dot"),
    ],
)
def test_reserved_file(path: str, reserved: bool) -> None:
    """Reserved by one of the product's schedulers, or by the hooks for all of them."""
    assert any(reserved_file(path, s.writes_file) for s in REGISTRY.values()) is reserved


@pytest.mark.parametrize("path", ["submit.sub", "condor_submit.err", "job.log"])
def test_a_scheduler_reserves_only_the_files_it_writes(path: str) -> None:
    assert reserved_file(path, REGISTRY["htcondor"].writes_file)
    assert not reserved_file(path, REGISTRY["slurm"].writes_file)
    assert parse(raw_spec("slurm", inputs=[{"configMap": {"name": "c"}, "items": [
        {"key": "k", "path": path}]}]), REGISTRY).spec is not None


@pytest.mark.parametrize("path", ["a", "a/b/c", "d.e-f_g", "x+y@z=1", "..a", ".rc/b"])
def test_relative_path_accepts(path: str) -> None:
    assert relative_path(path, "x") == path


@pytest.mark.parametrize("path", ["", "/a", "a/", "a//b", ".", "..", "a/./b", "a/..", "a\tb",
                                  "\x7f", None, 3, "with space", "a,b", "$x", "\u00e9t\u00e9",
                                  "it's", "a\\b"])
def test_relative_path_refuses(path: object) -> None:
    with pytest.raises(SpecError, match=r"^where must be a relative path"):
        relative_path(path, "where")


