"""BatchClusters in the core: customize asks for exactly the BatchCluster and the Namespace
(cluster-scoped rules, no namespace, no label selector), the route and defaults they give a
BatchJob, the refusals and their reasons, and hostile BatchClusters and BatchJobs answered with
a reason and a sentence, never an error."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from hooks.core.decide.effects import Query
from hooks.core.sites.routing import parse_routed
from hooks.core.values.phases import Outcome, TaskState
from hooks.core.values.reasons import Reason
from hooks.core.wire.request import NAMESPACE_GROUP, SITE_GROUP, customize
from hooks.schedulers.registry import REGISTRY
from tests.unit.builders import HOST_KEY, SUBMITTED, Loop, login_secret, request
from tests.unit.conftest import UID

SITE: dict[str, Any] = {
    "apiVersion": "hpcbridge.io/v1alpha1", "kind": "BatchCluster",
    "metadata": {"name": "hpc-a"},
    "spec": {
        "backend": "slurm", "host": "login.hpc", "port": 2222,
        "jump": [{"host": "bastion"}],
        "knownHosts": f"[login.hpc]:2222 {HOST_KEY}\nbastion {HOST_KEY}\n",
        "workDir": "/scratch/hpcbridge",
        "namespaceSelector": {"matchLabels": {"hpc/a": "enabled"}},
        "defaults": {"resources": {"timeLimit": "1h", "cpus": 1, "memory": "2Gi"},
                     "slurm": {"partition": "batch", "account": "default"}},
        "limits": {"maxTimeLimit": "48h", "maxCpus": 256, "maxMemory": "1Ti",
                   "partitions": ["batch", "gpu"]},
    },
}
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace",
             "metadata": {"name": "research", "labels": {"hpc/a": "enabled"}}}


def routed(spec: dict[str, Any], site: dict[str, Any] | None = SITE,
           namespace: dict[str, Any] | None = NAMESPACE, direct: bool = True) -> Any:
    sites = {} if site is None else {site["metadata"]["name"]: site}
    return parse_routed(spec, REGISTRY, sites=sites, namespace=namespace, direct=direct)


def named(**fields: Any) -> dict[str, Any]:
    cluster = {"name": "hpc-a", "secretRef": {"name": "login"}, **fields.pop("cluster", {})}
    return {"cluster": cluster, "script": "#!/bin/sh\ntrue\n", **fields}


def site_with(**spec: Any) -> dict[str, Any]:
    changed = copy.deepcopy(SITE)
    changed["spec"].update(spec)
    return changed


def test_customize_asks_for_exactly_the_batchcluster_and_the_namespace() -> None:
    body = {"controller": {}, "parent": {
        "apiVersion": "hpcbridge.io/v1alpha1", "kind": "BatchJob",
        "metadata": {"name": "sim", "namespace": "research", "uid": UID},
        "spec": named(cluster={"jumpSecretRef": {"name": "bastion-login"}})}}
    assert customize(body)["relatedResources"] == [
        {"apiVersion": "v1", "resource": "secrets", "namespace": "research",
         "names": ["bastion-login", "login"]},
        {"apiVersion": "hpcbridge.io/v1alpha1", "resource": "batchclusters", "names": ["hpc-a"]},
        {"apiVersion": "v1", "resource": "namespaces", "names": ["research"]},
    ]


def test_customize_asks_for_no_cluster_scoped_object_without_a_name() -> None:
    body = {"controller": {}, "parent": {
        "apiVersion": "hpcbridge.io/v1alpha1", "kind": "BatchJob",
        "metadata": {"name": "sim", "namespace": "research", "uid": UID},
        "spec": {"cluster": {"host": "h", "secretRef": {"name": "login"}, "name": "a/b"}}}}
    resources = {rule["resource"] for rule in customize(body)["relatedResources"]}
    assert resources == {"secrets"}


def test_the_route_defaults_and_work_dir_come_from_the_batchcluster() -> None:
    parsed = routed(named(resources={"timeLimit": "2h"}, cluster={"workDir": "runs"}))
    assert parsed.error == "", parsed.error
    cluster = parsed.spec.cluster
    assert (cluster.host, cluster.port, cluster.site) == ("login.hpc", 2222, "hpc-a")
    assert [(hop.host, hop.secret_name) for hop in cluster.jump] == [("bastion", "login")]
    assert cluster.work_dir == "/scratch/hpcbridge/runs"
    resources = parsed.spec.resources
    assert (resources.time_limit_seconds, resources.memory_mib, resources.cpus) == (
        7200, 2048, 1)
    assert (parsed.spec.options.partition, parsed.spec.options.account) == ("batch", "default")


@pytest.mark.parametrize(
    ("spec", "site", "namespace", "reason", "words"),
    [
        pytest.param(named(), None, NAMESPACE, Reason.BATCH_CLUSTER_NOT_FOUND,
                     "was not handed over", id="not-found"),
        pytest.param(named(), SITE, {"metadata": {"name": "research"}},
                     Reason.CLUSTER_NOT_ALLOWED, "does not select", id="not-selected"),
        pytest.param(named(), site_with(namespaceSelector=None), NAMESPACE,
                     Reason.CLUSTER_NOT_ALLOWED, "allows no namespace", id="no-selector"),
        pytest.param(named(), SITE, None, Reason.CLUSTER_NOT_ALLOWED, "Namespace",
                     id="no-namespace"),
        pytest.param(named(resources={"cpus": 300}), SITE, NAMESPACE, Reason.INVALID_SPEC,
                     "limits.maxCpus (256)", id="limit"),
        pytest.param(named(slurm={"partition": "debug"}), SITE, NAMESPACE, Reason.INVALID_SPEC,
                     "limits.partitions", id="partition"),
        pytest.param(named(cluster={"port": 22}), SITE, NAMESPACE, Reason.INVALID_SPEC,
                     "spec.cluster.port", id="own-port"),
        pytest.param(named(cluster={"jump": [{"host": "x"}]}), SITE, NAMESPACE,
                     Reason.INVALID_SPEC, "spec.cluster.jump", id="own-jump"),
        pytest.param(named(cluster={"insecureSkipHostKeyCheck": True}), SITE, NAMESPACE,
                     Reason.INVALID_SPEC, "insecureSkipHostKeyCheck", id="insecure"),
        pytest.param(named(backend="htcondor"), SITE, NAMESPACE, Reason.INVALID_SPEC,
                     "spec.backend", id="backend"),
        pytest.param(named(cluster={"workDir": "/tmp/x"}), SITE, NAMESPACE,
                     Reason.INVALID_SPEC, "inside BatchCluster", id="work-dir-outside"),
        pytest.param(named(cluster={"workDir": "../x"}), SITE, NAMESPACE,
                     Reason.INVALID_SPEC, "workDir", id="work-dir-up"),
        pytest.param(named(cluster={"host": "h"}), SITE, NAMESPACE, Reason.INVALID_SPEC,
                     "exclude each other", id="name-and-host"),
        pytest.param(named(cluster={"name": "a/b"}), SITE, NAMESPACE, Reason.INVALID_SPEC,
                     "must name a BatchCluster", id="name-with-slash"),
    ],
)
def test_refusals(spec: dict[str, Any], site: dict[str, Any] | None,
                  namespace: dict[str, Any] | None, reason: Reason, words: str) -> None:
    parsed = routed(spec, site, namespace)
    assert (parsed.spec, parsed.reason) == (None, reason), parsed
    assert words in parsed.error


@pytest.mark.parametrize(
    ("change", "words"),
    [
        pytest.param({"namespaceSelector": {"matchLabels": {"a": "b c"}}}, "label value",
                     id="bad-label-value"),
        pytest.param({"namespaceSelector": {"matchExpressions": [{"key": "a",
                                                                  "operator": "Near"}]}},
                     "operator", id="bad-operator"),
        pytest.param({"limits": {"maxMemory": "lots"}}, "maxMemory", id="limit-not-quantity"),
        pytest.param({"limits": {"maxTimeLimit": 48}}, "maxTimeLimit", id="limit-number"),
        pytest.param({"knownHosts": "garbage line\n"}, "knownHosts line 1", id="known-hosts"),
        pytest.param({"knownHosts": ""}, "knownHosts", id="no-known-hosts"),
        pytest.param({"defaults": {"resources": {"cpus": 512}}}, "maxCpus", id="default-over"),
        pytest.param({"defaults": {"htcondor": {}}}, "spec.defaults", id="other-backend"),
        pytest.param({"host": "a b"}, "spec.host", id="host"),
        pytest.param({"backend": "pbs"}, "spec.backend", id="backend"),
    ],
)
def test_a_hostile_batchcluster_is_named_and_the_batchjob_waits(
        change: dict[str, Any], words: str) -> None:
    parsed = routed(named(), site_with(**change))
    assert parsed.reason is Reason.INVALID_BATCH_CLUSTER, parsed
    assert words in parsed.error and parsed.error.startswith("BatchCluster hpc-a is invalid")


def test_a_selector_that_matches_nothing_allows_nothing() -> None:
    site = site_with(namespaceSelector={"matchExpressions": [
        {"key": "hpc/a", "operator": "In", "values": ["never"]}]})
    assert routed(named(), site).reason is Reason.CLUSTER_NOT_ALLOWED
    assert routed(named(), site_with(namespaceSelector={})).error == ""


def test_an_object_under_another_name_is_not_the_batchcluster() -> None:
    other = copy.deepcopy(SITE)
    other["metadata"]["name"] = "hpc-b"
    parsed = parse_routed(named(), REGISTRY, sites={"hpc-a": other}, namespace=NAMESPACE,
                          direct=True)
    assert parsed.reason is Reason.BATCH_CLUSTER_NOT_FOUND


def test_without_direct_clusters_a_host_is_invalid() -> None:
    spec = {"backend": "slurm", "cluster": {"host": "h", "secretRef": {"name": "login"}},
            "script": "#!/bin/sh\n"}
    assert routed(spec, direct=True).error == ""
    parsed = routed(spec, direct=False)
    assert parsed.reason is Reason.INVALID_SPEC and "BatchCluster" in parsed.error


def test_a_deleted_batchcluster_keeps_the_log_pod_where_the_attempt_ran() -> None:
    """The attempt ends where it was submitted, and its log Pod goes there, trusting the host
    keys the attempt was submitted with; its end is marked so a following log Pod stops."""
    body = request(None, secrets={"login": login_secret()})
    body["parent"]["spec"] = named(logs={"follow": True})
    body["related"][SITE_GROUP] = {"hpc-a": SITE}
    body["related"][NAMESPACE_GROUP] = {"research": NAMESPACE}
    loop = Loop(body)
    assert loop.sync(SUBMITTED).kinds == ["Submit", "Track"]
    del body["related"][SITE_GROUP]
    run = loop.sync({Query: [TaskState("500", Outcome.SUCCEEDED, exit_code=0)]})
    assert run.kinds == ["Query", "MarkEnded", "Forget"]
    assert (run.status["phase"], run.status["logsPod"]) == ("Succeeded", "sim-logs")
    (pod,) = run.answer.body["children"]
    args = pod["spec"]["containers"][0]["args"]
    assert "--host=login.hpc" in args and "--port=2222" in args and "--follow" in args
    assert "--batchcluster=hpc-a" in args
    assert f"--known-hosts={SITE['spec']['knownHosts']}" in args
