"""The CRD's rules of the site features (jump hosts, workDir, env, inputs, suspend, deadline), on
the smallest valid spec changed one field at a time."""

from __future__ import annotations

import copy

import pytest

from tests.static.admission import MINIMAL_SPEC, batchjob_violations
from tests.static.kube import Object, merge

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
            {"inputs": [{**INPUT, "path": "conf/"}]},
            ["spec.inputs: the path of a configMap or secret input is a directory named without "
             "a trailing /"], id="path-trailing"
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
