"""Metacontroller requests: the one place that knows the wire shapes.

CompositeController hooks send ``parent``/``children``; DecoratorController hooks send
``object``/``attachments``. Hook version v1 keys children and related objects by bare name,
v2 by ``namespace/name``. Both arrive here and leave as one ``Call``: the parent's identity, the
spec read once, the previous status, the Secrets, the observed log Pod and the clock.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from hooks.core.sites.batchcluster import SiteError, parse_site
from hooks.core.sites.routing import parse_routed
from hooks.core.spec.batchjob import Logs, ParsedSpec, logs_choice
from hooks.core.spec.endpoints import Endpoint
from hooks.core.spec.layout import DNS_SUBDOMAIN
from hooks.core.status import record
from hooks.core.status.record import Status
from hooks.core.values.sdk import Rules
from hooks.core.wire import log_pod, response

POD_GROUP = "Pod.v1"
SECRET_GROUP = "Secret.v1"
CONFIG_MAP_GROUP = "ConfigMap.v1"
SITE_GROUP = "BatchCluster.hpcbridge.io/v1alpha1"
NAMESPACE_GROUP = "Namespace.v1"
BATCHJOB_GROUP = "BatchJob.hpcbridge.io/v1alpha1"
MAX_NAMED = 256
"""The most entries of one list read for the names of related objects (the spec allows
fewer)."""
API_VERSION = "hpcbridge.io/v1alpha1"
KIND = "BatchJob"
Shape = Literal["composite", "decorator"]
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
"""The API server's forms of a name, a namespace and a uid. They become remote paths
(``~/.hpcbridge/<namespace>/<name>/<uid>/``), so nothing else is ever accepted."""


class BadHookRequest(ValueError):
    """The body is not a Metacontroller request; answered with a JSON 400."""


@dataclass(frozen=True, slots=True)
class Policy:
    """The hook server's settings that decisions depend on."""

    log_image: str
    finalize_grace: float
    guard_stale: int
    direct_clusters: bool = True
    """Whether a BatchJob may name its host itself (``HPCBRIDGE_DIRECT_CLUSTERS``) rather
    than a BatchCluster."""
    status_ttl: float = 5.0
    """Seconds one batched scheduler answer is shared (``HPCBRIDGE_STATUS_TTL``): an active
    BatchJob synced more often than that would find nothing new."""
    s3_endpoints: tuple[Endpoint, ...] = ()
    """The object stores any BatchJob may name whatever their address
    (``HPCBRIDGE_S3_ENDPOINTS``; ``hooks.core.spec.endpoints``)."""


@dataclass(frozen=True, slots=True)
class Call:
    """One sync or finalize call, parsed once."""

    shape: Shape
    namespace: str
    name: str
    uid: str
    generation: int
    annotations: Mapping[str, Any]
    deletion_timestamp: object
    finalizing: bool
    parsed: ParsedSpec
    logs: Logs
    created: datetime.datetime | None
    """The BatchJob's ``metadata.creationTimestamp``, when it reads as one."""
    """``spec.logs``, read even when the rest of the spec is not."""
    previous: Status
    previous_raw: Mapping[str, Any]
    secrets: Mapping[str, Mapping[str, Any]]
    site_keys: Mapping[str, str]
    """The ``knownHosts`` of each valid BatchCluster handed over, by name."""
    config_maps: Mapping[str, Mapping[str, Any]]
    log_pod: Mapping[str, Any] | None
    now: datetime.datetime
    rules: Rules
    policy: Policy
    movers: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    """The observed mover Pods by direction (``inputs``, ``outputs``)."""
    batchjobs: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    """The BatchJobs of the namespace that ``spec.dependsOn`` names, by name."""


def parse_call(
    body: object, *, rules: Rules, policy: Policy, now: datetime.datetime
) -> Call:
    """Parse a sync or finalize request of either controller shape. Pure: no I/O."""
    if not isinstance(body, dict):
        raise BadHookRequest("the request body must be a JSON object")
    shape: Shape = "decorator" if "object" in body else "composite"
    parent = _parent(body, "object" if shape == "decorator" else "parent")
    metadata = parent["metadata"]
    namespace = metadata["namespace"]
    finalizing = _finalizing(body)
    annotations = metadata.get("annotations")
    previous = parent.get("status") or {}
    related = body.get("related") or {}
    pods = _group(body.get("attachments" if shape == "decorator" else "children") or {},
                  POD_GROUP, namespace)
    return Call(
        shape=shape, namespace=namespace, name=metadata["name"], uid=metadata["uid"],
        generation=metadata.get("generation") or 1,
        annotations=annotations if isinstance(annotations, dict) else {},
        deletion_timestamp=metadata.get("deletionTimestamp"),
        finalizing=finalizing,
        parsed=parse_routed(parent.get("spec"), rules,
                            sites=_group(related, SITE_GROUP, namespace),
                            namespace=_group(related, NAMESPACE_GROUP, namespace).get(namespace),
                            direct=policy.direct_clusters, endpoints=policy.s3_endpoints),
        logs=logs_choice(parent.get("spec")),
        created=response.parse_time(metadata.get("creationTimestamp")),
        previous=record.from_raw(previous, rules),
        previous_raw=previous,
        secrets=_group(related, SECRET_GROUP, namespace),
        site_keys=_site_keys(_group(related, SITE_GROUP, namespace), rules),
        config_maps=_group(related, CONFIG_MAP_GROUP, namespace),
        log_pod=pods.get(log_pod.pod_name(metadata["name"])),
        now=now, rules=rules, policy=policy,
        movers={d: pods[f"{metadata['name']}-{d}"] for d in ("inputs", "outputs")
                if f"{metadata['name']}-{d}" in pods},
        batchjobs=_group(related, BATCHJOB_GROUP, namespace),
    )


def customize(body: object) -> dict[str, Any]:
    """The customize answer: exactly the Secrets and ConfigMaps the spec names (the route's
    logins, env values, input files, the image's pull Secrets) and those the current attempt
    was submitted with; with a BatchCluster named (in the spec, or by the current attempt),
    that BatchCluster and the BatchJob's Namespace, both cluster-scoped (hook version v2 hands
    them over); and the BatchJobs of its namespace that ``spec.dependsOn`` names, whose every
    change syncs it again. Pure: no I/O."""
    if not isinstance(body, dict):
        raise BadHookRequest("the request body must be a JSON object")
    parent = _parent(body, "parent")
    spec = parent.get("spec") or {}
    secrets, config_maps = named_objects(spec)
    sites = _names([_dict(spec.get("cluster")).get("name")])
    attempt = record.from_raw(parent.get("status"), {}).cluster  # the cluster needs no rules
    if attempt is not None:
        secrets |= set(attempt.secret_names)
        sites |= _names([attempt.site])
    namespace = parent["metadata"]["namespace"]
    rules = [{"apiVersion": "v1", "resource": resource, "namespace": namespace,
              "names": sorted(names)}
             for resource, names in (("secrets", secrets), ("configmaps", config_maps)) if names]
    dependencies = _names([_dict(item).get("name") for item in _list(spec.get("dependsOn"))])
    if dependencies:
        rules.append({"apiVersion": API_VERSION, "resource": "batchjobs", "namespace": namespace,
                      "names": sorted(dependencies)})
    if sites:
        rules += [{"apiVersion": API_VERSION, "resource": "batchclusters", "names": sorted(sites)},
                  {"apiVersion": "v1", "resource": "namespaces", "names": [namespace]}]
    return {"relatedResources": rules}


def named_objects(spec: Mapping[str, Any]) -> tuple[set[str], set[str]]:
    """The names of the Secrets and of the ConfigMaps a spec refers to, read leniently (an
    invalid spec still gets the objects it names, so its answer can say what else is wrong);
    only names of the API server's form."""
    secrets: list[object] = []
    config_maps: list[object] = []
    cluster = _dict(spec.get("cluster"))
    secrets.append(_dict(cluster.get("secretRef")).get("name"))
    secrets.append(_dict(cluster.get("jumpSecretRef")).get("name"))
    secrets += [_dict(_dict(hop).get("secretRef")).get("name")
                for hop in _list(cluster.get("jump"))]
    for var in _list(spec.get("env")):
        value_from = _dict(_dict(var).get("valueFrom"))
        secrets.append(_dict(value_from.get("secretKeyRef")).get("name"))
        config_maps.append(_dict(value_from.get("configMapKeyRef")).get("name"))
    for item in _list(spec.get("inputs")):
        secrets.append(_dict(_dict(item).get("secret")).get("name"))
        config_maps.append(_dict(_dict(item).get("configMap")).get("name"))
    secrets += [_dict(item).get("name")
                for item in _list(_dict(spec.get("container")).get("imagePullSecrets"))]
    return _names(secrets), _names(config_maps)


def _site_keys(sites: Mapping[str, Mapping[str, Any]], rules: Rules) -> dict[str, str]:
    keys: dict[str, str] = {}
    for name, obj in sites.items():
        try:
            site = parse_site(obj, rules)
        except SiteError:
            continue
        if site.name == name:
            keys[name] = site.known_hosts
    return keys


def _names(values: list[object]) -> set[str]:
    return {v for v in values if isinstance(v, str) and DNS_SUBDOMAIN.fullmatch(v)}


def _finalizing(body: Mapping[str, Any]) -> bool:
    """The request's ``finalizing``: true or false, nothing else."""
    finalizing = body.get("finalizing", False)
    if not isinstance(finalizing, bool):
        raise BadHookRequest("'finalizing' must be true or false")
    return finalizing


def _dict(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[Any]:
    return value[:MAX_NAMED] if isinstance(value, list) else []


def _parent(body: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    parent = body.get(key)
    if not isinstance(parent, dict):
        raise BadHookRequest(f"the request has no '{key}' object")
    if parent.get("apiVersion") != API_VERSION or parent.get("kind") != KIND:
        raise BadHookRequest(f"'{key}' must be a {KIND} of {API_VERSION}")
    metadata = parent.get("metadata")
    if not isinstance(metadata, dict):
        raise BadHookRequest(f"'{key}' has no metadata")
    for field, form, what in (("name", DNS_SUBDOMAIN, "a DNS-1123 subdomain"),
                              ("namespace", DNS_LABEL, "a DNS-1123 label"),
                              ("uid", UID, "a UUID")):
        if not isinstance(metadata.get(field), str) or not form.fullmatch(metadata[field]):
            raise BadHookRequest(f"'{key}.metadata.{field}' must be {what}")
    generation = metadata.get("generation", 1)
    if isinstance(generation, bool) or not isinstance(generation, int) or not (
            0 <= generation < 2**63):
        raise BadHookRequest(f"'{key}.metadata.generation' must be an integer of int64")
    for field in ("spec", "status"):
        if parent.get(field) is not None and not isinstance(parent[field], dict):
            raise BadHookRequest(f"'{key}.{field}' must be an object")
    return parent


def _group(
    objects: object, group: str, namespace: str
) -> Mapping[str, Mapping[str, Any]]:
    """Objects of one group keyed by bare name, whatever the hook version's key form."""
    if not isinstance(objects, dict):
        raise BadHookRequest("children and related must be objects keyed by group")
    members = objects.get(group) or {}
    if not isinstance(members, dict):
        raise BadHookRequest(f"'{group}' must be an object keyed by name")
    found: dict[str, Mapping[str, Any]] = {}
    for key, obj in members.items():
        if not isinstance(obj, dict):
            raise BadHookRequest(f"'{group}[{key}]' must be an object")
        obj_namespace, _, name = str(key).rpartition("/")
        if obj_namespace and obj_namespace != namespace:
            continue
        found[name] = obj
    return found
