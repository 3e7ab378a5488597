"""Spec validation of jump hosts, workDir, env, inputs, suspend and activeDeadlineSeconds: what
each accepts, and the one sentence naming the field for what it refuses; the digest that
makes an attempt; the names an input may not take."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field, make_dataclass
from pathlib import Path
from typing import Any

import pytest

from hooks.core.fields import SpecError
from hooks.core.layout import MAX_JUMPS, relative_path, reserved_file
from hooks.core.model import DEFAULT_WORK_DIR, ClusterRef, EnvVar, Hop, Input, ObjectKey
from hooks.core.spec import MAX_ENV, MAX_INPUTS, _essence, digest, parse
from hooks.schedulers import REGISTRY
from tests.unit.conftest import raw_spec, spec_of
from tests.unit.test_spec import one_sentence_naming

REPO = Path(__file__).resolve().parents[2]
LOGIN = {"host": "login.hpc.example.org", "secretRef": {"name": "hpc-login"}}


def cluster(**fields: Any) -> dict[str, Any]:
    return {**LOGIN, **fields}


def refused(**fields: Any) -> str:
    with pytest.raises(SpecError) as caught:
        spec_of(raw_spec(**fields))
    return str(caught.value)


# --- jump hosts ----------------------------------------------------------------------------------


def test_jump_hosts_in_order_with_their_defaults() -> None:
    parsed = spec_of(raw_spec(cluster=cluster(jump=[
        {"host": "bastion.example.org"},
        {"host": "10.0.0.7", "port": 2222, "secretRef": {"name": "inner-hop"},
         "insecureSkipHostKeyCheck": True},
    ]))).cluster
    assert parsed.jump == (
        Hop("bastion.example.org", 22, "hpc-login", False),
        Hop("10.0.0.7", 2222, "inner-hop", True),
    )
    assert parsed.secret_names == ("hpc-login", "inner-hop")


def test_no_jump_is_an_empty_route() -> None:
    assert spec_of(raw_spec()).cluster.jump == ()
    assert spec_of(raw_spec(cluster=cluster(jump=[]))).cluster.jump == ()


def test_secret_names_list_each_secret_once_the_login_nodes_first() -> None:
    ref = ClusterRef("h", 22, "login", False, jump=(
        Hop("a", 22, "hop"), Hop("b", 22, "login"), Hop("c", 22, "hop")))
    assert ref.secret_names == ("login", "hop")


def test_three_jump_hosts_are_allowed() -> None:
    hops = [{"host": f"hop{i}.example.org"} for i in range(MAX_JUMPS)]
    assert len(spec_of(raw_spec(cluster=cluster(jump=hops))).cluster.jump) == MAX_JUMPS


@pytest.mark.parametrize(
    ("jump", "field"),
    [
        pytest.param([{"host": f"h{i}"} for i in range(4)], "spec.cluster.jump", id="four-hops"),
        pytest.param({"host": "h"}, "spec.cluster.jump", id="an-object"),
        pytest.param("bastion", "spec.cluster.jump", id="a-string"),
        pytest.param(["bastion"], "spec.cluster.jump[0]", id="hop-not-an-object"),
        pytest.param([{"port": 22}], "spec.cluster.jump[0].host", id="no-host"),
        pytest.param([{"host": "a"}, {"host": "user@b"}], "spec.cluster.jump[1].host",
                     id="host-with-user"),
        pytest.param([{"host": "a,b"}], "spec.cluster.jump[0].host", id="host-with-comma"),
        pytest.param([{"host": "a b"}], "spec.cluster.jump[0].host", id="host-with-space"),
        pytest.param([{"host": "a\nb"}], "spec.cluster.jump[0].host", id="host-with-newline"),
        pytest.param([{"host": ""}], "spec.cluster.jump[0].host", id="empty-host"),
        pytest.param([{"host": "a", "port": 0}], "spec.cluster.jump[0].port", id="port-zero"),
        pytest.param([{"host": "a", "port": 65536}], "spec.cluster.jump[0].port",
                     id="port-too-big"),
        pytest.param([{"host": "a", "port": "22"}], "spec.cluster.jump[0].port",
                     id="port-text"),
        pytest.param([{"host": "a", "port": True}], "spec.cluster.jump[0].port",
                     id="port-bool"),
        pytest.param([{"host": "a", "port": 10**30}], "spec.cluster.jump[0].port",
                     id="port-huge"),
        pytest.param([{"host": "a", "secretRef": {"name": "Not_A_Name"}}],
                     "spec.cluster.jump[0].secretRef.name", id="secret-name-invalid"),
        pytest.param([{"host": "a", "secretRef": {}}], "spec.cluster.jump[0].secretRef.name",
                     id="secret-ref-without-name"),
        pytest.param([{"host": "a", "secretRef": "hop"}], "spec.cluster.jump[0].secretRef",
                     id="secret-ref-a-string"),
        pytest.param([{"host": "a", "insecureSkipHostKeyCheck": "yes"}],
                     "spec.cluster.jump[0].insecureSkipHostKeyCheck", id="insecure-not-bool"),
    ],
)
def test_invalid_jump_hosts(jump: object, field: str) -> None:
    one_sentence_naming(refused(cluster=cluster(jump=jump)), field)


def test_an_invalid_route_leaves_no_placement() -> None:
    parsed = parse(raw_spec(cluster=cluster(jump=[{"host": "a", "port": 0}])), REGISTRY)
    assert (parsed.placement, parsed.spec) == (None, None)
    assert parsed.error.startswith("spec.cluster.jump[0].port")


def test_an_invalid_env_leaves_the_placement() -> None:
    parsed = parse(raw_spec(env=[{"name": "1A", "value": "x"}]), REGISTRY)
    assert parsed.spec is None
    assert parsed.placement is not None and parsed.placement.cluster.host == LOGIN["host"]


# --- workDir -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "kept"),
    [
        pytest.param(None, DEFAULT_WORK_DIR, id="default"),
        pytest.param("~/.hpcbridge", DEFAULT_WORK_DIR, id="the-default-spelled-out"),
        pytest.param(".hpcbridge/", DEFAULT_WORK_DIR, id="trailing-slash"),
        pytest.param("/scratch/alice/hpcbridge", "/scratch/alice/hpcbridge", id="absolute"),
        pytest.param("/scratch/alice/", "/scratch/alice", id="absolute-trailing-slash"),
        pytest.param("~/jobs/bridge", "jobs/bridge", id="home-relative-with-tilde"),
        pytest.param("jobs", "jobs", id="home-relative"),
        pytest.param("/a", "/a", id="one-component"),
        pytest.param("my jobs", "my jobs", id="a-space"),
    ],
)
def test_work_dir(written: str | None, kept: str) -> None:
    fields = {} if written is None else {"workDir": written}
    assert spec_of(raw_spec(cluster=cluster(**fields))).cluster.work_dir == kept


@pytest.mark.parametrize(
    "work_dir",
    [
        pytest.param("/", id="root"),
        pytest.param("~", id="home"),
        pytest.param("~/", id="home-slash"),
        pytest.param("", id="empty"),
        pytest.param("../elsewhere", id="parent"),
        pytest.param("jobs/../../etc", id="parent-inside"),
        pytest.param("/scratch/../etc", id="absolute-parent"),
        pytest.param("~/..", id="home-parent"),
        pytest.param("./jobs", id="dot"),
        pytest.param("/scratch/./jobs", id="dot-inside"),
        pytest.param("jobs//deep", id="empty-component"),
        pytest.param("//scratch", id="double-slash-root"),
        pytest.param("jobs\nrm -rf", id="newline"),
        pytest.param("jobs\x00x", id="nul"),
        pytest.param("jobs\x1b[31m", id="escape"),
        pytest.param("a" * 1025, id="too-long"),
        pytest.param(7, id="a-number"),
        pytest.param(["/scratch"], id="a-list"),
    ],
)
def test_invalid_work_dir(work_dir: object) -> None:
    one_sentence_naming(refused(cluster=cluster(workDir=work_dir)), "spec.cluster.workDir")


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
    one_sentence_naming(refused(env=[*env, {"name": "ONE_MORE", "value": "x"}]), "spec.env")


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
    one_sentence_naming(refused(env=env), field)


def test_the_message_of_an_invalid_env_value_does_not_show_it() -> None:
    message = refused(env=[{"name": "PASSWORD", "value": "hunter2\x00"}])
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
    one_sentence_naming(refused(inputs=[*inputs, {"configMap": {"name": "more"}}]),
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
    one_sentence_naming(refused(inputs=inputs), field)


def test_two_inputs_writing_one_file_are_both_named() -> None:
    message = refused(inputs=[
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


# --- suspend and activeDeadlineSeconds -----------------------------------------------------------


def test_suspend_and_deadline() -> None:
    parsed = spec_of(raw_spec(suspend=True, activeDeadlineSeconds=1))
    assert (parsed.suspend, parsed.active_deadline_seconds) == (True, 1)
    default = spec_of(raw_spec())
    assert (default.suspend, default.active_deadline_seconds) == (False, None)
    assert spec_of(raw_spec(activeDeadlineSeconds=2**63 - 1)).active_deadline_seconds == 2**63 - 1


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        pytest.param({"suspend": "true"}, "spec.suspend", id="suspend-text"),
        pytest.param({"suspend": 1}, "spec.suspend", id="suspend-number"),
        pytest.param({"suspend": None}, "spec.suspend", id="suspend-null"),
        pytest.param({"activeDeadlineSeconds": 0}, "spec.activeDeadlineSeconds", id="zero"),
        pytest.param({"activeDeadlineSeconds": -60}, "spec.activeDeadlineSeconds",
                     id="negative"),
        pytest.param({"activeDeadlineSeconds": "60"}, "spec.activeDeadlineSeconds", id="text"),
        pytest.param({"activeDeadlineSeconds": 1.5}, "spec.activeDeadlineSeconds",
                     id="fraction"),
        pytest.param({"activeDeadlineSeconds": True}, "spec.activeDeadlineSeconds", id="bool"),
        pytest.param({"activeDeadlineSeconds": 2**63}, "spec.activeDeadlineSeconds",
                     id="beyond-int64"),
        pytest.param({"activeDeadlineSeconds": 10**400}, "spec.activeDeadlineSeconds",
                     id="too-long-to-print"),
    ],
)
def test_invalid_suspend_and_deadline(fields: dict[str, Any], field: str) -> None:
    message = refused(**fields)
    one_sentence_naming(message, field)
    assert len(message) < 200


# --- digest --------------------------------------------------------------------------------------


def test_digest_is_sixteen_hex_digits() -> None:
    assert re.fullmatch(r"[0-9a-f]{16}", digest(spec_of(raw_spec())))


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"suspend": True}, id="suspend"),
        pytest.param({"activeDeadlineSeconds": 60}, id="deadline"),
        pytest.param({"suspend": True, "activeDeadlineSeconds": 1}, id="both"),
    ],
)
def test_digest_leaves_out_suspend_and_the_deadline(fields: dict[str, Any]) -> None:
    assert digest(spec_of(raw_spec(**fields))) == digest(spec_of(raw_spec()))


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"script": "#!/bin/sh\necho other\n"}, id="script"),
        pytest.param({"env": [{"name": "A", "value": "1"}]}, id="env"),
        pytest.param({"env": [{"name": "A", "valueFrom": {"secretKeyRef": {
            "name": "s", "key": "k"}}}]}, id="env-from"),
        pytest.param({"inputs": [{"configMap": {"name": "c"}}]}, id="inputs"),
        pytest.param({"cluster": cluster(workDir="/scratch")}, id="work-dir"),
        pytest.param({"cluster": cluster(jump=[{"host": "bastion"}])}, id="jump"),
        pytest.param({"backoffLimit": 2}, id="backoff-limit"),
        pytest.param({"resources": {"cpus": 2}}, id="resources"),
        pytest.param({"logs": {"follow": True}}, id="logs"),
    ],
)
def test_digest_changes_with_anything_else(fields: dict[str, Any]) -> None:
    assert digest(spec_of(raw_spec(**fields))) != digest(spec_of(raw_spec()))


def test_env_values_change_the_digest() -> None:
    one = spec_of(raw_spec(env=[{"name": "A", "value": "1"}]))
    two = spec_of(raw_spec(env=[{"name": "A", "value": "2"}]))
    assert digest(one) != digest(two)


DIGEST_PROGRAM = """
from hooks.core.spec import digest
from tests.unit.conftest import raw_spec, spec_of
print(digest(spec_of(raw_spec("htcondor", env=[{"name": "A", "value": "x"}],
    htcondor={"queue": 2, "submitOptions": {"+ProjectName": '"demo"', "rank": "Memory"}},
    inputs=[{"configMap": {"name": "c"}, "items": [{"key": "k", "path": "p"}]}]))))
"""


def test_digest_is_the_same_in_every_process() -> None:
    """Hook server processes (and restarts) must agree: nothing in it may depend on hash
    randomization."""
    found = set()
    for seed in ("1", "2", "3"):
        done = subprocess.run([sys.executable, "-c", DIGEST_PROGRAM], capture_output=True,
                              check=True, timeout=60, cwd=REPO,
                              env={**os.environ, "PYTHONHASHSEED": seed})
        found.add(done.stdout.decode().strip())
    assert len(found) == 1


# --- secret values -------------------------------------------------------------------------------


def test_env_values_are_not_in_the_specs_repr() -> None:
    parsed = spec_of(raw_spec(env=[{"name": "PASSWORD", "value": "hunter2-literal"}]))
    assert "hunter2-literal" not in repr(parsed)
    assert "PASSWORD" in repr(parsed)


def test_a_field_added_at_its_default_leaves_the_digest_as_it_was() -> None:
    """An upgrade that adds a spec field must not make every running attempt's spec look
    changed: fields at their defaults do not count."""
    @dataclass(frozen=True)
    class Spec:
        script: str
        env: tuple[str, ...] = ()

    newer = make_dataclass("Spec", [("script", str), ("env", tuple, field(default=())),
                                    ("added", int, field(default=0))], frozen=True)
    assert _essence(Spec("#!/bin/sh")) == _essence(newer("#!/bin/sh"))
    assert _essence(Spec("#!/bin/sh")) != _essence(newer("#!/bin/sh", added=1))
