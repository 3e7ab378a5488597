"""A BatchCluster's limits cannot be reached around: a free-form option of the scheduler
(``spec.slurm.extraArgs``, the script's ``#SBATCH`` directives, ``spec.htcondor.submitOptions``)
that sets a limited quantity is refused, naming the option and the limit; one that sets no
limited quantity, or one the BatchCluster does not limit, is kept."""

from __future__ import annotations

from typing import Any

import pytest

from hooks.core.values.reasons import Reason
from hooks.schedulers.slurm.limited import KNOWN_LONG, LIMITED_LONG, LIMITED_SHORT
from hooks.schedulers.slurm.options import SBATCH_SHORT_WITH_VALUE
from tests.unit.sites.test_batchcluster import NAMESPACE, SITE, named, routed, site_with

CONDOR_SITE = site_with(
    backend="htcondor", defaults={"resources": {"timeLimit": "1h", "memory": "1Gi"}},
    namespaceSelector={},
    limits={"maxTimeLimit": "48h", "maxCpus": 16, "maxMemory": "64Gi", "maxGpus": 1})
ALL_LIMITS = site_with(limits={"maxTimeLimit": "48h", "maxCpus": 256, "maxMemory": "1Ti",
                               "maxGpus": 8, "maxNodes": 16, "partitions": ["batch", "gpu"]})


def script(*lines: str) -> str:
    return "\n".join(("#!/bin/sh", *lines, "srun true")) + "\n"


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        pytest.param(named(slurm={"extraArgs": ["--partition=debug"]}),
                     ["'--partition=debug'", "limits.partitions", "spec.slurm.partition"],
                     id="extra-partition"),
        pytest.param(named(slurm={"extraArgs": ["-pdebug"]}), ["-p", "limits.partitions"],
                     id="extra-short-partition"),
        pytest.param(named(slurm={"extraArgs": ["--ti=99:00:00"]}),
                     ["--time", "limits.maxTimeLimit ('48h')"], id="extra-time-abbreviated"),
        pytest.param(named(slurm={"extraArgs": ["--mem-per-cpu=64G"]}),
                     ["--mem-per-cpu", "limits.maxMemory"], id="extra-memory"),
        pytest.param(named(slurm={"extraArgs": ["--exclusive"]}),
                     ["--exclusive", "limits.maxCpus"], id="extra-exclusive"),
        pytest.param(named(slurm={"extraArgs": ["--ntasks=512"]}),
                     ["--ntasks", "limits.maxCpus"], id="extra-ntasks"),
        pytest.param(named(slurm={"extraArgs": ["--gres=gpu:64"]}),
                     ["--gres", "limits.maxGpus"], id="extra-gres"),
        pytest.param(named(slurm={"extraArgs": ["-vN64"]}), ["-N", "limits.maxNodes"],
                     id="extra-bundled-nodes"),
        pytest.param(named(slurm={"extraArgs": ["--nodelist=n[1-64]"]}),
                     ["--nodelist", "limits.maxNodes"], id="extra-nodelist"),
        pytest.param(named(script=script("#SBATCH --time=30-00:00:00")),
                     ["spec.script line 2", "--time", "limits.maxTimeLimit"],
                     id="directive-time"),
        pytest.param(named(script=script("#SBATCH -v -t 30-0", "# a comment")),
                     ["line 2", "-t", "maxTimeLimit"], id="directive-short-time"),
        pytest.param(named(script=script("", "#SBATCH --partition debug")),
                     ["line 3", "--partition", "limits.partitions"], id="directive-partition"),
        pytest.param(named(script=script("#SBATCH -c 1024")), ["-c", "limits.maxCpus"],
                     id="directive-cpus"),
        pytest.param(named(script=script("#SBATCH -G 64")), ["-G", "limits.maxGpus"],
                     id="directive-gpus"),
        pytest.param(named(script=script("#SBATCH --mem=4T")), ["--mem", "limits.maxMemory"],
                     id="directive-memory"),
        pytest.param(named(script=script("#SBATCH --constraint=x", "#SBATCH hetjob")),
                     ["line 3", "heterogeneous job", "limits."], id="directive-hetjob"),
        pytest.param(named(script=script("#SBATCH packjob")), ["heterogeneous job"],
                     id="directive-packjob"),
        pytest.param(named(slurm={"extraArgs": ["--clusters=other"]}),
                     ["--clusters", "limits.partitions"], id="extra-other-cluster"),
        pytest.param(named(script=script("#SBATCH -M other")), ["-M", "limits.partitions"],
                     id="directive-other-cluster"),
    ],
)
def test_slurm_free_form_options_that_set_a_limited_quantity_are_refused(
        spec: dict[str, Any], words: list[str]) -> None:
    parsed = routed(spec, ALL_LIMITS)
    assert parsed.spec is None and parsed.reason == Reason.INVALID_SPEC
    assert all(word in parsed.error for word in words), parsed.error
    assert "BatchCluster hpc-a" in parsed.error and "\n" not in parsed.error


@pytest.mark.parametrize(
    ("key", "words"),
    [
        pytest.param("request_cpus", ["'request_cpus'", "limits.maxCpus (16)"], id="cpus"),
        pytest.param("RequestCpus", ["'RequestCpus'", "limits.maxCpus"], id="cpus-other-name"),
        pytest.param("+RequestMemory", ["'+RequestMemory'", "limits.maxMemory"],
                     id="memory-attribute"),
        pytest.param("MY.RequestGPUs", ["limits.maxGpus"], id="gpus-my"),
        pytest.param("request_GPUs", ["limits.maxGpus"], id="gpus-case"),
        pytest.param("periodic_release", ["limits.maxTimeLimit"], id="release-restarts"),
        pytest.param("on_exit_remove", ["limits.maxTimeLimit"], id="rerun-on-exit"),
        pytest.param("max_retries", ["limits.maxTimeLimit"], id="retries"),
        pytest.param("+JobCurrentStartDate", ["limits.maxTimeLimit"], id="start-date"),
    ],
)
def test_htcondor_submit_options_that_set_a_limited_quantity_are_refused(
        key: str, words: list[str]) -> None:
    parsed = routed(named(htcondor={"submitOptions": {key: "4"}}), CONDOR_SITE)
    assert parsed.spec is None and parsed.reason == Reason.INVALID_SPEC
    assert all(word in parsed.error for word in words), parsed.error


@pytest.mark.parametrize(
    ("spec", "site"),
    [
        pytest.param(named(slurm={"extraArgs": ["--constraint=haswell", "--time-min=10",
                                                "--mem-bind=local", "-vxn1", "--exclude=n2"]}),
                     ALL_LIMITS, id="slurm-unlimited-options"),
        pytest.param(named(script=script("#SBATCH --constraint=haswell"), slurm={
            "extraArgs": ["--gres=gpu:2"]}), SITE, id="slurm-quantity-not-limited"),
        pytest.param(named(script=script("srun -p debug true")), ALL_LIMITS,
                     id="slurm-option-after-the-directives"),
        pytest.param(named(htcondor={"submitOptions": {"request_disk": "1G",
                                                        "periodic_remove": "NumJobStarts > 2",
                                                        "+ProjectName": '"a"'}}),
                     CONDOR_SITE, id="htcondor-unlimited-options"),
    ],
)
def test_free_form_options_that_set_no_limited_quantity_are_kept(
        spec: dict[str, Any], site: dict[str, Any]) -> None:
    parsed = routed(spec, site)
    assert parsed.error == "" and parsed.spec is not None, parsed.error


@pytest.mark.parametrize(("site", "left_out", "limit"), [
    pytest.param(site_with(defaults={"slurm": {"partition": "batch"}}), "timeLimit",
                 "limits.maxTimeLimit ('48h')", id="slurm-time"),
    pytest.param(site_with(defaults={"resources": {"timeLimit": "1h"},
                                     "slurm": {"partition": "batch"}}),
                 "memory", "limits.maxMemory ('1Ti')", id="slurm-memory"),
    pytest.param(site_with(backend="htcondor", defaults={}, limits={"maxTimeLimit": "1h"}),
                 "timeLimit", "limits.maxTimeLimit ('1h')", id="htcondor-time"),
])
def test_a_time_limit_or_memory_left_out_under_its_limit_is_refused(
        site: dict[str, Any], left_out: str, limit: str) -> None:
    """The scheduler's default (a partition's DefaultTime, a node's whole memory, HTCondor's
    no time limit) is not bounded by the limit."""
    parsed = routed(named(), site)
    assert parsed.reason == Reason.INVALID_SPEC and parsed.spec is None
    assert f"spec.resources.{left_out} is left out" in parsed.error and limit in parsed.error
    own = routed(named(resources={"timeLimit": "2h", "memory": "1Gi"}), site)
    assert "left out" not in own.error


def test_a_host_named_directly_has_no_limits_to_reach_around() -> None:
    spec = {"cluster": {"host": "h", "secretRef": {"name": "login"}}, "backend": "slurm",
            "script": script("#SBATCH --time=30-0"), "slurm": {"extraArgs": ["-pdebug"]}}
    assert routed(spec, None, None).error == ""


def test_a_batchcluster_whose_defaults_reach_around_its_limits_is_invalid() -> None:
    site = site_with(defaults={"slurm": {"partition": "batch",
                                         "extraArgs": ["--time=99-0"]}})
    parsed = routed(named(), site, NAMESPACE)
    assert parsed.reason == Reason.INVALID_BATCH_CLUSTER
    assert "spec.defaults" in parsed.error and "limits.maxTimeLimit" in parsed.error


def test_every_short_limited_option_takes_a_value_and_every_long_one_is_sbatchs() -> None:
    assert set(LIMITED_SHORT) <= SBATCH_SHORT_WITH_VALUE
    assert set(LIMITED_SHORT.values()) <= set(LIMITED_LONG) <= KNOWN_LONG
