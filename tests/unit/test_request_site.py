"""The customize answer with jump hosts, env and inputs: exactly the Secrets and ConfigMaps the
spec names anywhere, plus those of the current attempt's route; and the ConfigMaps a sync
request carries."""

from __future__ import annotations

from typing import Any

import pytest

from hooks.core.request import customize, named_objects
from tests.unit.builders import config_map, request, secret
from tests.unit.conftest import UID, call

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
