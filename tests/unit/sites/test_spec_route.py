"""Spec validation of the route to the cluster, jump hosts and workDir: what each accepts, and
the one sentence naming the field for what it refuses."""

from __future__ import annotations

import pytest

from hooks.core.spec import layout
from hooks.core.spec.batchjob import parse
from hooks.core.spec.layout import MAX_JUMPS
from hooks.core.status import record
from hooks.core.values.fields import SpecError
from hooks.core.values.job import DEFAULT_WORK_DIR, ClusterRef, Hop
from hooks.schedulers.registry import REGISTRY
from tests.unit.builders import STORED_ROUTE
from tests.unit.conftest import login_cluster, raw_spec, refusal, spec_of
from tests.unit.spec.test_spec import one_sentence_naming


def test_jump_hosts_in_order_with_their_defaults() -> None:
    parsed = spec_of(raw_spec(cluster=login_cluster(jump=[
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
    assert spec_of(raw_spec(cluster=login_cluster(jump=[]))).cluster.jump == ()


def test_secret_names_list_each_secret_once_the_login_nodes_first() -> None:
    ref = ClusterRef("h", 22, "login", False, jump=(
        Hop("a", 22, "hop"), Hop("b", 22, "login"), Hop("c", 22, "hop")))
    assert ref.secret_names == ("login", "hop")


def test_three_jump_hosts_are_allowed() -> None:
    hops = [{"host": f"hop{i}.example.org"} for i in range(MAX_JUMPS)]
    assert len(spec_of(raw_spec(cluster=login_cluster(jump=hops))).cluster.jump) == MAX_JUMPS


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
    one_sentence_naming(refusal(cluster=login_cluster(jump=jump)), field)


def test_an_invalid_route_leaves_no_placement() -> None:
    parsed = parse(raw_spec(cluster=login_cluster(jump=[{"host": "a", "port": 0}])), REGISTRY)
    assert (parsed.placement, parsed.spec) == (None, None)
    assert parsed.error.startswith("spec.cluster.jump[0].port")


def test_an_invalid_env_leaves_the_placement() -> None:
    parsed = parse(raw_spec(env=[{"name": "1A", "value": "x"}]), REGISTRY)
    assert parsed.spec is None
    assert parsed.placement is not None and parsed.placement.cluster.host == login_cluster()["host"]


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
    assert spec_of(raw_spec(cluster=login_cluster(**fields))).cluster.work_dir == kept


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
    one_sentence_naming(refusal(cluster=login_cluster(workDir=work_dir)), "spec.cluster.workDir")


def test_an_empty_component_after_the_home_is_refused() -> None:
    """``~//x`` became the absolute ``/x``; the CRD refuses it as an empty component."""
    with pytest.raises(SpecError):
        layout.work_dir("~//x", "spec.cluster.workDir")
    assert layout.work_dir("~/x", "spec.cluster.workDir") == "x"
    stored = {"cluster": {**STORED_ROUTE, "workDir": "~//x"}}
    assert record.from_raw(stored, REGISTRY).cluster is None
