"""The env values and input files of an attempt, read from the Secrets and ConfigMaps of the
request: literal and referenced values, optional objects and keys, every key or selected
items, sub-directories, binary data; what is missing (the attempt waits) and what cannot be
used (InvalidSpec); the limits; and that no value ever shows in a message or a repr."""

from __future__ import annotations

import tracemalloc
from collections.abc import Mapping
from typing import Any

import pytest

from hooks.core.spec.batchjob import parse_spec
from hooks.core.spec.payload import MAX_FILES, MAX_PAYLOAD, Payload, Unresolved, resolve
from hooks.core.values.job import InputFile, JobRequest
from hooks.core.values.reasons import Reason
from hooks.schedulers.registry import REGISTRY
from tests.unit.builders import LOGIN, b64, config_map, secret
from tests.unit.conftest import UID, raw_spec, spec_of

SECRET_VALUE = "s3cr3t-Value-that-must-not-leak"


def resolved(
    *, env: list[dict[str, Any]] | None = None, inputs: list[dict[str, Any]] | None = None,
    secrets: Mapping[str, Any] | None = None, config_maps: Mapping[str, Any] | None = None,
) -> Payload | Unresolved:
    spec = spec_of(raw_spec(env=env, inputs=inputs))
    return resolve(spec, namespace="research", secrets=secrets or {},
                   config_maps=config_maps or {}, writes_file=REGISTRY["slurm"].writes_file)


def payload(**kw: Any) -> Payload:
    found = resolved(**kw)
    assert isinstance(found, Payload), found
    return found


def unresolved(**kw: Any) -> Unresolved:
    found = resolved(**kw)
    assert isinstance(found, Unresolved), found
    return found


def from_secret(name: str, key: str, *, optional: bool = False, var: str = "V") -> dict[str, Any]:
    return {"name": var, "valueFrom": {"secretKeyRef": {"name": name, "key": key,
                                                        "optional": optional}}}


def from_config_map(name: str, key: str, *, optional: bool = False,
                    var: str = "V") -> dict[str, Any]:
    return {"name": var, "valueFrom": {"configMapKeyRef": {"name": name, "key": key,
                                                           "optional": optional}}}


def files(found: Payload) -> dict[str, bytes]:
    return {item.path: item.content for item in found.inputs}


# --- env -----------------------------------------------------------------------------------------


def test_nothing_to_resolve() -> None:
    assert payload() == Payload((), ())


def test_env_in_spec_order_from_values_secrets_and_config_maps() -> None:
    found = payload(
        env=[{"name": "MODE", "value": "fast"}, from_secret("api", "token", var="TOKEN"),
             from_config_map("settings", "level", var="LEVEL"), {"name": "E", "value": ""}],
        secrets={"api": secret(token=SECRET_VALUE)},
        config_maps={"settings": config_map(level="3\n")},
    )
    assert found.environment == (("MODE", "fast"), ("TOKEN", SECRET_VALUE), ("LEVEL", "3\n"),
                                 ("E", ""))


def test_a_config_maps_binary_data_is_read_too() -> None:
    found = payload(env=[from_config_map("c", "blob")],
                    config_maps={"c": config_map({"blob": "caf\u00e9".encode()})})
    assert found.environment == (("V", "caf\u00e9"),)


@pytest.mark.parametrize(
    ("env", "objects"),
    [
        pytest.param([from_secret("gone", "k", optional=True)], {}, id="secret-missing"),
        pytest.param([from_secret("api", "gone", optional=True)], {"api": secret(k="v")},
                     id="secret-key-missing"),
    ],
)
def test_an_optional_missing_secret_or_key_leaves_the_variable_unset(
    env: list[dict[str, Any]], objects: dict[str, Any]
) -> None:
    found = payload(env=[{"name": "A", "value": "1"}, *env], secrets=objects)
    assert found.environment == (("A", "1"),)


def test_an_optional_missing_config_map_leaves_the_variable_unset() -> None:
    assert payload(env=[from_config_map("gone", "k", optional=True)]).environment == ()
    assert payload(env=[from_config_map("c", "gone", optional=True)],
                   config_maps={"c": config_map(k="v")}).environment == ()


@pytest.mark.parametrize(
    ("env", "secrets", "config_maps", "reason", "named"),
    [
        pytest.param([from_secret("api", "token")], {}, {}, Reason.SECRET_NOT_FOUND,
                     ("'api'", "research", "spec.env[0]"), id="secret"),
        pytest.param([from_secret("api", "token")], {"api": secret(other="x")}, {},
                     Reason.SECRET_NOT_FOUND, ("'api'", "'token'", "spec.env[0]"),
                     id="secret-key"),
        pytest.param([{"name": "A", "value": "x"}, from_config_map("settings", "level")], {}, {},
                     Reason.CONFIG_MAP_NOT_FOUND, ("'settings'", "spec.env[1]"),
                     id="config-map"),
        pytest.param([from_config_map("settings", "level")], {},
                     {"settings": config_map(other="x")}, Reason.CONFIG_MAP_NOT_FOUND,
                     ("'settings'", "'level'"), id="config-map-key"),
        pytest.param([from_config_map("settings", "level")], {"settings": secret(level="x")},
                     {}, Reason.CONFIG_MAP_NOT_FOUND, ("'settings'",),
                     id="a-secret-is-no-config-map"),
    ],
)
def test_a_missing_object_or_key_waits_naming_it(
    env: list[dict[str, Any]], secrets: dict[str, Any], config_maps: dict[str, Any],
    reason: Reason, named: tuple[str, ...],
) -> None:
    found = unresolved(env=env, secrets=secrets, config_maps=config_maps)
    assert found.reason is reason
    for text in named:
        assert text in found.message, found.message


@pytest.mark.parametrize(
    ("objects", "words"),
    [
        pytest.param({"api": {"data": {"k": b64(b"\xff\xfe")}}}, "not UTF-8", id="not-utf8"),
        pytest.param({"api": secret(k="a\x00b")}, "NUL", id="nul"),
        pytest.param({"api": {"data": {"k": "***not base64***"}}}, "not base64", id="not-base64"),
        pytest.param({"api": {"data": {"k": 7}}}, "not base64 text", id="not-text"),
        pytest.param({"api": {"data": ["k"]}}, "malformed", id="data-a-list"),
    ],
)
def test_an_unusable_value_is_an_invalid_spec(objects: dict[str, Any], words: str) -> None:
    found = unresolved(env=[from_secret("api", "k")], secrets=objects)
    assert found.reason is Reason.INVALID_SPEC
    assert found.message.startswith("spec.env[0]"), found.message
    assert words in found.message


def test_an_unusable_config_map_value_is_an_invalid_spec() -> None:
    found = unresolved(env=[from_config_map("c", "k")], config_maps={"c": {"data": {"k": 5}}})
    assert found.reason is Reason.INVALID_SPEC
    assert found.message.startswith("spec.env[0]") and "not text" in found.message


# --- inputs --------------------------------------------------------------------------------------


def test_every_key_becomes_a_file_of_its_name_in_key_order_binary_data_too() -> None:
    found = payload(inputs=[{"configMap": {"name": "params"}}],
                    config_maps={"params": config_map({"b.bin": b"\x00\x01"},
                                                      **{"z.json": "{}", "a.txt": "A"})})
    assert [f.path for f in found.inputs] == ["a.txt", "b.bin", "z.json"]
    assert files(found) == {"a.txt": b"A", "z.json": b"{}", "b.bin": b"\x00\x01"}


def test_items_select_and_rename_keys_below_the_path() -> None:
    found = payload(
        inputs=[{"secret": {"name": "tokens"}, "path": "auth",
                 "items": [{"key": "api", "path": "keys/api.token"}]}],
        secrets={"tokens": secret(api=SECRET_VALUE, unused="x")},
    )
    assert found.inputs == (InputFile("auth/keys/api.token", SECRET_VALUE.encode()),)


def test_a_secrets_binary_content_is_kept_byte_for_byte() -> None:
    content = bytes(range(256))
    found = payload(inputs=[{"secret": {"name": "blob"}}],
                    secrets={"blob": {"data": {"all.bin": b64(content)}}})
    assert files(found) == {"all.bin": content}


def test_an_empty_object_gives_no_files() -> None:
    assert payload(inputs=[{"configMap": {"name": "c"}}],
                   config_maps={"c": {"metadata": {}}}).inputs == ()


@pytest.mark.parametrize(
    ("inputs", "secrets", "config_maps"),
    [
        pytest.param([{"secret": {"name": "gone", "optional": True}}], {}, {},
                     id="secret-missing"),
        pytest.param([{"configMap": {"name": "gone", "optional": True}}], {}, {},
                     id="config-map-missing"),
        pytest.param([{"configMap": {"name": "c", "optional": True},
                       "items": [{"key": "gone", "path": "x"}]}], {},
                     {"c": config_map(other="y")}, id="item-key-missing"),
    ],
)
def test_optional_missing_inputs_give_no_files(
    inputs: list[dict[str, Any]], secrets: dict[str, Any], config_maps: dict[str, Any]
) -> None:
    assert payload(inputs=inputs, secrets=secrets, config_maps=config_maps).inputs == ()


@pytest.mark.parametrize(
    ("inputs", "secrets", "config_maps", "reason", "named"),
    [
        pytest.param([{"secret": {"name": "tokens"}}], {}, {}, Reason.SECRET_NOT_FOUND,
                     ("'tokens'", "spec.inputs[0]"), id="secret"),
        pytest.param([{"configMap": {"name": "a"}}, {"configMap": {"name": "params"}}], {},
                     {"a": config_map(x="1")}, Reason.CONFIG_MAP_NOT_FOUND,
                     ("'params'", "spec.inputs[1]"), id="config-map"),
        pytest.param([{"configMap": {"name": "params"},
                       "items": [{"key": "gone", "path": "x"}]}], {},
                     {"params": config_map(k="1")}, Reason.CONFIG_MAP_NOT_FOUND,
                     ("'params'", "'gone'"), id="item-key"),
    ],
)
def test_missing_inputs_wait_naming_them(
    inputs: list[dict[str, Any]], secrets: dict[str, Any], config_maps: dict[str, Any],
    reason: Reason, named: tuple[str, ...],
) -> None:
    found = unresolved(inputs=inputs, secrets=secrets, config_maps=config_maps)
    assert found.reason is reason
    for text in named:
        assert text in found.message, found.message


@pytest.mark.parametrize(
    ("inputs", "config_maps", "words"),
    [
        pytest.param([{"configMap": {"name": "c"}}], {"c": config_map(script="#!/bin/sh")},
                     "'script' is a name the hooks use", id="key-named-script"),
        pytest.param([{"configMap": {"name": "c"}}], {"c": config_map(**{"4242.out": "x"})},
                     "'4242.out' is a name the hooks use", id="key-like-an-output"),
        pytest.param([{"configMap": {"name": "c"}}], {"c": config_map(**{"jobid.tmp": "x"})},
                     "'jobid.tmp' is a name the hooks use", id="key-jobid-tmp"),
        pytest.param([{"configMap": {"name": "c"}}], {"c": config_map(**{"..": "x"})},
                     "relative path", id="key-dot-dot"),
        pytest.param([{"configMap": {"name": "a"}}, {"configMap": {"name": "b"}}],
                     {"a": config_map(x="1"), "b": config_map(x="2")},
                     "'x' is written by spec.inputs[0] too", id="two-objects-one-key"),
        pytest.param([{"configMap": {"name": "a"}, "items": [{"key": "k", "path": "d"}]},
                      {"configMap": {"name": "b"}, "path": "d"}],
                     {"a": config_map(k="1"), "b": config_map(x="2")},
                     "'d/x' is written by another input too", id="file-then-directory"),
        pytest.param([{"configMap": {"name": "b"}, "path": "d"},
                      {"configMap": {"name": "a"}, "items": [{"key": "k", "path": "d"}]}],
                     {"a": config_map(k="1"), "b": config_map(x="2")},
                     "'d' is written by another input too", id="directory-then-file"),
    ],
)
def test_inputs_that_cannot_be_written_are_an_invalid_spec(
    inputs: list[dict[str, Any]], config_maps: dict[str, Any], words: str
) -> None:
    found = unresolved(inputs=inputs, config_maps=config_maps)
    assert found.reason is Reason.INVALID_SPEC
    assert found.message.startswith("spec.inputs["), found.message
    assert words in found.message, found.message


def test_at_most_the_maximum_of_files() -> None:
    many = config_map(**{f"f{i}": "" for i in range(MAX_FILES)})
    assert len(payload(inputs=[{"configMap": {"name": "c"}}],
                       config_maps={"c": many}).inputs) == MAX_FILES
    found = unresolved(inputs=[{"configMap": {"name": "c"}},
                               {"configMap": {"name": "d"}, "path": "more"}],
                       config_maps={"c": many, "d": config_map(one="1")})
    assert found.reason is Reason.INVALID_SPEC
    assert found.message.startswith("spec.inputs") and str(MAX_FILES + 1) in found.message


def test_at_most_four_mib_of_files_and_values_together() -> None:
    half = "x" * (MAX_PAYLOAD // 2)
    assert isinstance(resolved(inputs=[{"configMap": {"name": "c"}}],
                               config_maps={"c": config_map(a=half[:-10])},
                               env=[{"name": "V", "value": half[:-10]}]), Payload)
    found = unresolved(inputs=[{"configMap": {"name": "c"}}],
                       config_maps={"c": config_map(a=half)},
                       env=[{"name": "V", "value": half}])
    assert found.reason is Reason.INVALID_SPEC
    assert found.message.startswith("spec.env and spec.inputs") and "4 MiB" in found.message


# --- secret values never show --------------------------------------------------------------------


def leaky_cases() -> list[Any]:
    value = {"k": SECRET_VALUE}
    return [
        pytest.param({"env": [from_secret("api", "k")], "secrets": {"api": secret(**value)}},
                     id="env-resolved"),
        pytest.param({"inputs": [{"secret": {"name": "api"}}],
                      "secrets": {"api": secret(**value)}}, id="input-resolved"),
        pytest.param({"env": [from_secret("api", "k"), from_secret("gone", "k", var="W")],
                      "secrets": {"api": secret(**value)}}, id="missing-after-a-value"),
        pytest.param({"env": [from_secret("api", "k")],
                      "secrets": {"api": secret(k=SECRET_VALUE + "\x00")}}, id="nul-value"),
        pytest.param({"inputs": [{"secret": {"name": "api"}}, {"secret": {"name": "api"}}],
                      "secrets": {"api": secret(**value)}}, id="collision"),
        pytest.param({"env": [{"name": "V", "value": SECRET_VALUE * 80000}]}, id="too-big"),
    ]


@pytest.mark.parametrize("kw", leaky_cases())
def test_values_never_show_in_a_repr_or_message(kw: dict[str, Any]) -> None:
    found = resolved(**kw)
    assert SECRET_VALUE not in repr(found)
    assert SECRET_VALUE not in str(found)
    if isinstance(found, Payload):
        job = JobRequest("research", "sim", UID, 1, spec_of(raw_spec()), 120,
                         environment=found.environment, inputs=found.inputs)
        assert SECRET_VALUE not in repr(job)
        assert SECRET_VALUE not in repr(found.inputs)


# --- hostile input paths -------------------------------------------------------------------------


def test_many_deep_input_paths_cost_neither_memory_nor_time() -> None:
    """1400 items of one key, each a path 800 characters deep: a BatchJob etcd takes. Their
    parent directories were all kept (270 MB, 3 s) before the limits refused them."""
    deep = "/".join(["a"] * 400)
    items = [{"key": "k", "path": f"x{i:05d}/{deep}"} for i in range(1400)]
    spec = parse_spec({"backend": "slurm", "script": "#!/bin/sh\n",
                       "cluster": {"host": LOGIN, "secretRef": {"name": "login"}},
                       "inputs": [{"configMap": {"name": "c"}, "items": items}]}, REGISTRY)
    tracemalloc.start()
    try:
        found = resolve(spec, namespace="research", secrets={},
                        config_maps={"c": config_map(k="v")},
                        writes_file=REGISTRY["slurm"].writes_file)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert isinstance(found, Unresolved) and found.reason is Reason.INVALID_SPEC
    assert "at most 1024 files" in found.message
    assert peak < 4 * 1024 * 1024, peak


@pytest.mark.parametrize(("first", "second"), [("d", "d/e/f"), ("d/e/f", "d"),
                                               ("d/e", "d/e/f/g"), ("d-e/x", "d/e")])
def test_a_file_inside_another_file_is_refused_at_any_depth(first: str, second: str) -> None:
    spec = parse_spec({"backend": "slurm", "script": "#!/bin/sh\n",
                       "cluster": {"host": LOGIN, "secretRef": {"name": "login"}},
                       "inputs": [{"configMap": {"name": "c"},
                                   "items": [{"key": "k", "path": first},
                                             {"key": "k", "path": second}]}]}, REGISTRY)
    found = resolve(spec, namespace="research", secrets={},
                    config_maps={"c": config_map(k="v")}, writes_file=REGISTRY["slurm"].writes_file)
    if second.startswith(first + "/") or first.startswith(second + "/"):
        assert isinstance(found, Unresolved), found
        assert f"{second!r} is written by another input too" in found.message
    else:
        assert not isinstance(found, Unresolved), found
