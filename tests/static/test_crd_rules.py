"""The BatchJob spec's schema and CEL rules, on the smallest valid spec changed one field at a
time: what the API server accepts and what it rejects, with the message it gives."""

from __future__ import annotations

import copy

import pytest

from tests.static.admission import MINIMAL_SPEC, batchjob_violations
from tests.static.kube import Object, merge

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
