"""Metacontroller requests (examples/requests/*.json): hook versions v1 and v2, the composite and
decorator shapes and the first sync all become the same Call; malformed bodies raise
BadHookRequest, which the app answers with a JSON 400.

The customize answer with jump hosts, env and inputs: exactly the Secrets and ConfigMaps the
spec names anywhere, plus those of the current attempt's route; and the ConfigMaps a sync
request carries."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from hooks.core.status import record
from hooks.core.wire.request import BadHookRequest, Call, customize, named_objects
from tests.unit.builders import config_map, request, secret
from tests.unit.conftest import UID, call
from tests.unit.conftest import call as parse_sync

REQUESTS = Path(__file__).resolve().parents[3] / "examples" / "requests"


def load(name: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((REQUESTS / f"{name}.json").read_text())
    return body


def identity(req: Call) -> tuple[Any, ...]:
    return (req.name, req.namespace, req.uid, req.generation, req.finalizing, req.parsed,
            req.previous, req.previous_raw)


def test_v1_and_v2_keys_give_the_same_request() -> None:
    v1, v2 = parse_sync(load("sync-running")), parse_sync(load("sync-v2"))
    assert identity(v1) == identity(v2)
    assert v1.log_pod == v2.log_pod is not None
    assert dict(v1.secrets) == dict(v2.secrets)
    assert v2.log_pod["metadata"]["name"] == "hello-logs"
    assert list(v2.secrets) == ["hpc-login"]


def test_v2_drops_objects_of_other_namespaces() -> None:
    body = load("sync-v2")
    pod = body["children"]["Pod.v1"]["research/hello-logs"]
    body["children"]["Pod.v1"]["elsewhere/hello-logs"] = {**pod, "marker": "foreign"}
    body["related"]["Secret.v1"]["elsewhere/hpc-login"] = {"data": {}}
    req = parse_sync(body)
    assert req.log_pod is not None and "marker" not in req.log_pod
    assert req.secrets["hpc-login"]["data"]


def test_composite_and_decorator_shapes_give_the_same_request() -> None:
    composite, decorator = parse_sync(load("sync-first")), parse_sync(load("decorator-sync"))
    assert (composite.shape, decorator.shape) == ("composite", "decorator")
    assert identity(composite) == identity(decorator)
    assert dict(composite.secrets) == dict(decorator.secrets)
    assert composite.log_pod is decorator.log_pod is None


def test_first_sync() -> None:
    body = load("sync-first")
    assert body["children"] == {"Pod.v1": {}}
    req = parse_sync(body)
    assert (req.log_pod, req.finalizing, req.generation) == (None, False, 1)
    assert req.previous_raw == {}
    assert req.previous == record.Status()


def test_finalize() -> None:
    req = parse_sync(load("finalize"))
    assert req.finalizing is True
    assert req.deletion_timestamp == "2026-11-22T10:03:00Z"


def test_parse_sync_does_not_change_the_body() -> None:
    body = load("sync-v2")
    before = copy.deepcopy(body)
    parse_sync(body)
    assert body == before


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        pytest.param({"children": None}, "pods", id="children-null"),
        pytest.param({"children": {}}, "pods", id="group-missing"),
        pytest.param({"children": {"Pod.v1": None}}, "pods", id="group-null"),
        pytest.param({"related": None}, "secrets", id="related-null"),
    ],
)
def test_absent_groups_are_empty(change: dict[str, Any], expected: str) -> None:
    req = parse_sync({**load("sync-running"), **change})
    if expected == "pods":
        assert req.log_pod is None
    else:
        assert dict(req.secrets) == {}


def test_generation_defaults_to_one() -> None:
    body = load("sync-first")
    del body["parent"]["metadata"]["generation"]
    assert parse_sync(body).generation == 1


def broken(name: str, path: str, value: Any) -> dict[str, Any]:
    """``name``'s body with the value at dotted ``path`` replaced (``...`` deletes it)."""
    body = load(name)
    *parents, last = path.split(".")
    node = body
    for key in parents:
        node = node[key]
    if value is ...:
        del node[last]
    else:
        node[last] = value
    return body


@pytest.mark.parametrize(
    "body",
    [
        pytest.param([], id="list"),
        pytest.param("sync", id="string"),
        pytest.param(None, id="null"),
        pytest.param(42, id="number"),
        pytest.param({}, id="empty-object"),
        pytest.param(broken("sync-running", "parent", ...), id="no-parent"),
        pytest.param(broken("sync-running", "parent", []), id="parent-not-an-object"),
        pytest.param(broken("decorator-sync", "object", None), id="decorator-object-null"),
        pytest.param(broken("sync-running", "parent.metadata", ...), id="no-metadata"),
        pytest.param(broken("sync-running", "parent.metadata", "x"), id="metadata-string"),
        pytest.param(broken("sync-running", "parent.metadata.uid", ...), id="no-uid"),
        pytest.param(broken("sync-running", "parent.metadata.uid", ""), id="empty-uid"),
        pytest.param(broken("sync-running", "parent.metadata.uid", 7), id="uid-number"),
        pytest.param(broken("sync-running", "parent.metadata.name", ...), id="no-name"),
        pytest.param(broken("sync-running", "parent.metadata.namespace", ...),
                     id="no-namespace"),
        pytest.param(broken("sync-running", "parent.metadata.generation", "3"),
                     id="generation-string"),
        pytest.param(broken("sync-running", "parent.metadata.generation", True),
                     id="generation-bool"),
        pytest.param(broken("sync-running", "parent.metadata.generation", 1.5),
                     id="generation-float"),
        pytest.param(broken("sync-running", "parent.spec", ["x"]), id="spec-list"),
        pytest.param(broken("sync-running", "parent.status", "Running"), id="status-string"),
        pytest.param(broken("sync-running", "children", "x"), id="children-string"),
        pytest.param(broken("sync-running", "children", ["x"]), id="children-list"),
        pytest.param({**load("sync-running"), "children": {"Pod.v1": ["hello-logs"]}},
                     id="children-group-list"),
        pytest.param({**load("sync-running"), "children": {"Pod.v1": "hello-logs"}},
                     id="children-group-string"),
        pytest.param({**load("sync-running"), "children": {"Pod.v1": {"hello-logs": "x"}}},
                     id="child-not-an-object"),
        pytest.param({**load("sync-running"), "related": {"Secret.v1": ["hpc-login"]}},
                     id="related-group-list"),
        pytest.param({**load("decorator-sync"), "attachments": {"Pod.v1": [1]}},
                     id="attachments-group-list"),
        pytest.param(broken("sync-running", "finalizing", "false"), id="finalizing-string"),
        pytest.param(broken("sync-running", "parent.metadata.namespace", ".."), id="ns-dotdot"),
        pytest.param(broken("sync-running", "parent.metadata.name", "."), id="name-dot"),
        pytest.param(broken("sync-running", "parent.metadata.name", ".."), id="name-dotdot"),
        pytest.param(broken("sync-running", "parent.metadata.name", "a/b"), id="name-slash"),
        pytest.param(broken("sync-running", "parent.metadata.name", "A"), id="name-upper"),
        pytest.param(broken("sync-running", "parent.metadata.name", "a" * 254), id="name-long"),
        pytest.param(broken("sync-running", "parent.metadata.namespace", "a.b"),
                     id="ns-not-a-label"),
        pytest.param(broken("sync-running", "parent.metadata.uid", "precious"),
                     id="uid-word"),
        pytest.param(broken("sync-running", "parent.metadata.uid", "../../../x"),
                     id="uid-traversal"),
        pytest.param(broken("sync-running", "parent.metadata.uid",
                            "2b7e1f6a-5c3d-4e8f-9a0b-1c2d3e4f5a6b\n"), id="uid-newline"),
        pytest.param(broken("sync-running", "parent.kind", "Pod"), id="other-kind"),
        pytest.param(broken("sync-running", "parent.apiVersion", "v1"), id="other-api-version"),
        pytest.param(broken("sync-running", "parent.apiVersion", ...), id="no-api-version"),
    ],
)
def test_malformed_sync(body: Any) -> None:
    with pytest.raises(BadHookRequest) as caught:
        parse_sync(body)
    assert str(caught.value)
    assert "Traceback" not in str(caught.value)


def test_customize() -> None:
    (rule,) = customize(load("customize"))["relatedResources"]
    assert rule["names"] == ["hpc-login"]


@pytest.mark.parametrize(
    "body",
    [
        pytest.param([], id="list"),
        pytest.param({}, id="no-parent"),
        pytest.param(broken("customize", "parent.metadata", ...), id="no-metadata"),
        pytest.param(broken("customize", "parent.metadata.uid", ...), id="no-uid"),
        pytest.param(broken("customize", "parent.metadata.namespace", "../x"), id="ns-path"),
        pytest.param(broken("customize", "parent.kind", "ConfigMap"), id="other-kind"),
    ],
)
def test_malformed_customize(body: Any) -> None:
    with pytest.raises(BadHookRequest):
        customize(body)


def test_annotations_that_are_not_an_object_are_none() -> None:
    for value in (["a"], "hpcbridge.io/skip-cancel", 7):
        body = load("finalize")
        body["parent"]["metadata"]["annotations"] = value
        assert dict(parse_sync(body).annotations) == {}


FULL_SPEC = {
    "cluster": {"host": "login", "secretRef": {"name": "login"},
                "jump": [{"host": "bastion"}, {"host": "inner", "secretRef": {"name": "hop"}}]},
    "env": [
        {"name": "A", "value": "x"},
        {"name": "B", "valueFrom": {"secretKeyRef": {"name": "api", "key": "token"}}},
        {"name": "C", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "level",
                                                        "optional": True}}},
    ],
    "inputs": [
        {"configMap": {"name": "params"}},
        {"secret": {"name": "certs"}, "path": "tls"},
        {"configMap": {"name": "settings"}},
    ],
}


def body(spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"controller": {}, "parent": {
        "apiVersion": "hpcbridge.io/v1alpha1", "kind": "BatchJob",
        "metadata": {"name": "sim", "namespace": "research", "uid": UID},
        "spec": spec, "status": status or {}}}


def related(answer: dict[str, Any]) -> dict[str, list[str]]:
    found = {}
    for rule in answer["relatedResources"]:
        assert (rule["apiVersion"], rule["namespace"]) == ("v1", "research")
        found[rule["resource"]] = rule["names"]
    return found


def test_every_object_the_spec_names_is_asked_for_once_sorted() -> None:
    assert related(customize(body(FULL_SPEC))) == {
        "secrets": ["api", "certs", "hop", "login"],
        "configmaps": ["params", "settings"],
    }


def test_a_spec_without_config_maps_asks_for_none() -> None:
    assert related(customize(body({"cluster": {"secretRef": {"name": "login"}}}))) == {
        "secrets": ["login"]}


def test_an_empty_spec_asks_for_nothing() -> None:
    assert customize(body({})) == {"relatedResources": []}


def test_the_attempts_route_is_asked_for_after_an_edit() -> None:
    stored = {"host": "old", "port": 22, "secretRef": {"name": "old-login"},
              "insecureSkipHostKeyCheck": False,
              "jump": [{"host": "old-bastion", "port": 22, "secretRef": {"name": "old-hop"},
                        "insecureSkipHostKeyCheck": False}]}
    answer = customize(body({"cluster": {"secretRef": {"name": "login"}}},
                            {"cluster": stored, "attempt": 1}))
    assert related(answer) == {"secrets": ["login", "old-hop", "old-login"]}


def test_a_stored_route_the_hooks_could_not_have_written_adds_nothing() -> None:
    stored = {"host": "old", "port": 22, "secretRef": {"name": "old-login"},
              "jump": [{"host": "b", "port": 0, "secretRef": {"name": "sneaky"}}]}
    answer = customize(body({"cluster": {"secretRef": {"name": "login"}}}, {"cluster": stored}))
    assert related(answer) == {"secrets": ["login"]}


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param({"cluster": {"secretRef": {"name": "Bad_Name"}}}, id="not-a-name"),
        pytest.param({"cluster": {"secretRef": {"name": "../kube-system/x"}}}, id="a-path"),
        pytest.param({"cluster": {"secretRef": "login"}}, id="ref-a-string"),
        pytest.param({"cluster": {"jump": "bastion"}}, id="jump-a-string"),
        pytest.param({"cluster": {"jump": ["bastion", {"secretRef": ["x"]}]}}, id="hops-broken"),
        pytest.param({"env": {"name": "A"}}, id="env-an-object"),
        pytest.param({"env": [None, "A", {"valueFrom": "x"},
                              {"valueFrom": {"secretKeyRef": "api"}}]}, id="env-broken"),
        pytest.param({"inputs": [None, {"secret": "s"}, {"configMap": {"name": 7}}]},
                     id="inputs-broken"),
        pytest.param({"cluster": [], "env": 7, "inputs": "x"}, id="all-wrong-types"),
    ],
)
def test_what_is_not_a_name_is_never_asked_for(spec: dict[str, Any]) -> None:
    assert customize(body(spec)) == {"relatedResources": []}


def test_an_invalid_spec_still_gets_the_objects_it_names() -> None:
    spec = {**FULL_SPEC, "backend": "pbs", "script": 7,
            "env": [{"name": "1-bad", "valueFrom": {"secretKeyRef": {"name": "api"}}}]}
    assert related(customize(body(spec)))["secrets"] == ["api", "certs", "hop", "login"]


def test_long_lists_are_read_up_to_a_bound() -> None:
    env = [{"name": f"V{i}", "valueFrom": {"secretKeyRef": {"name": f"s{i}", "key": "k"}}}
           for i in range(1000)]
    secrets, _ = named_objects({"env": env})
    assert 0 < len(secrets) <= 256


# --- the sync request ----------------------------------------------------------------------------


def test_config_maps_and_secrets_arrive_by_bare_name() -> None:
    parsed = call(request(secrets={"api": secret(k="v")},
                          config_maps={"params": config_map(a="1")}))
    assert sorted(parsed.secrets) == ["api", "login"]
    assert dict(parsed.config_maps) == {"params": config_map(a="1")}


def test_v2_keys_of_config_maps_and_other_namespaces() -> None:
    body_v2 = request()
    body_v2["related"]["ConfigMap.v1"] = {
        "research/params": config_map(a="1"),
        "elsewhere/params": config_map(a="foreign"),
        "elsewhere/other": config_map(b="2"),
    }
    parsed = call(body_v2)
    assert dict(parsed.config_maps) == {"params": config_map(a="1")}


def test_a_request_without_config_maps_has_none() -> None:
    body_none = request()
    del body_none["related"]["ConfigMap.v1"]
    assert dict(call(body_none).config_maps) == {}
