"""Which route a BatchJob takes: a BatchCluster it names (``spec.cluster.name``), or the host it
names itself (``spec.cluster.host``) where the installation allows that.

With a name, the BatchCluster Metacontroller handed over (``hooks.core.sites.batchcluster``)
gives the route — host, port, jump hosts and the only host keys trusted along it — and the
default work directory; its defaults fill the fields the BatchJob leaves out, field by field,
and its limits bound the result. The BatchJob's Namespace, handed over too, must be one the
BatchCluster's ``namespaceSelector`` selects. A BatchJob waits (``Pending``) for a BatchCluster
that is missing, invalid or not for its namespace, since a change of either re-syncs it; a spec
that breaks a rule of the BatchCluster is invalid until an edit fixes it. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from hooks.core.sites.batchcluster import Site, SiteError, parse_site
from hooks.core.sites.containers import SiteContainers, apply
from hooks.core.sites.limits import beyond, free_form_beyond
from hooks.core.spec.batchjob import ParsedSpec, Placement, digest, parse
from hooks.core.spec.endpoints import Endpoint
from hooks.core.spec.layout import DNS_SUBDOMAIN
from hooks.core.values.fields import SpecError
from hooks.core.values.reasons import Reason
from hooks.core.values.sdk import Rules
from hooks.core.values.text import shown

OWN_ROUTE = ("port", "jump", "insecureSkipHostKeyCheck")
"""Fields of ``spec.cluster`` the BatchCluster decides alone."""
OUTSIDE = object()
"""A BatchJob's ``workDir`` outside its BatchCluster's."""
DIRECT_REFUSED = (
    "spec.cluster.host names a host directly, which this installation does not allow "
    "(HPCBRIDGE_DIRECT_CLUSTERS=false); name a BatchCluster in spec.cluster.name instead "
    "(kubectl get batchclusters lists them).")


def parse_routed(
    raw: object, rules: Rules, *, sites: Mapping[str, Mapping[str, Any]],
    namespace: Mapping[str, Any] | None, direct: bool, endpoints: Sequence[Endpoint] = (),
) -> ParsedSpec:
    """Read the BatchJob's ``spec`` with its route: through the BatchCluster it names (one of
    ``sites``, by name, for the BatchJob's ``namespace`` object), or the host it names. The
    object stores allowed whatever their address are the installation's ``endpoints`` and, on
    a BatchCluster's route, the BatchCluster's too: either list allows."""
    spec = raw if isinstance(raw, dict) else {}
    cluster = spec.get("cluster")
    written = spec.get("backend")
    backend = written if isinstance(written, str) else ""
    if not isinstance(cluster, dict) or cluster.get("name") is None:
        if not direct and isinstance(cluster, dict) and cluster.get("host") is not None:
            return ParsedSpec(backend, None, None, DIRECT_REFUSED)
        return _contained(parse(raw, rules, endpoints=endpoints), None, "")
    name = cluster["name"]
    if cluster.get("host") is not None:
        return ParsedSpec(backend, None, None, "spec.cluster.name and spec.cluster.host "
                          "exclude each other: a BatchCluster gives the host; remove one.")
    if not isinstance(name, str) or not DNS_SUBDOMAIN.fullmatch(name):
        return ParsedSpec(backend, None, None,
                          f"spec.cluster.name must name a BatchCluster, not {shown(name)}.")
    found = sites.get(name)
    if found is None or _dict(found.get("metadata")).get("name") != name:
        return ParsedSpec(backend, None, None, _not_found(name),
                          reason=Reason.BATCH_CLUSTER_NOT_FOUND)
    try:
        site = parse_site(found, rules)
    except SiteError as err:
        return ParsedSpec(backend, None, None, f"{err} The BatchJob waits until its platform "
                          "team fixes it.", reason=Reason.INVALID_BATCH_CLUSTER)
    refusal = _not_allowed(site, namespace)
    if refusal:
        return ParsedSpec(backend, None, None, refusal, reason=Reason.CLUSTER_NOT_ALLOWED)
    merged = _merged(spec, cluster, site)
    if isinstance(merged, str):
        return ParsedSpec(backend, None, None, merged)
    return _checked(parse(merged, rules, endpoints=(*endpoints, *site.endpoints)), site, merged,
                    rules)


def _dict(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _not_found(name: str) -> str:
    return (f"BatchCluster {name} was not handed over by Metacontroller: it does not exist "
            "(kubectl get batchclusters lists those that do), or the controller's hooks are "
            "not version v2, which Metacontroller needs to hand a cluster-scoped object to a "
            "BatchJob; the BatchJob waits for it.")


def _not_allowed(site: Site, namespace: Mapping[str, Any] | None) -> str:
    """Why the BatchJob's namespace may not use ``site``; empty when it may."""
    metadata = namespace.get("metadata") if namespace is not None else None
    if not isinstance(metadata, dict):
        return (f"The BatchJob's Namespace was not handed over by Metacontroller, so whether "
                f"BatchCluster {site.name} allows it cannot be told; the BatchJob waits.")
    labels = metadata.get("labels")
    labels = labels if isinstance(labels, dict) else {}
    if site.selector is not None and site.selector.matches(labels):
        return ""
    which = ("has no namespaceSelector, so it allows no namespace" if site.selector is None
             else "has a namespaceSelector that does not select this namespace")
    return (f"BatchCluster {site.name} {which}; the BatchJob waits until the namespace's "
            "labels (or the BatchCluster) allow it.")


def _merged(spec: Mapping[str, Any], cluster: Mapping[str, Any], site: Site
            ) -> dict[str, Any] | str:
    """The BatchJob's spec with the BatchCluster's route and defaults, or why it cannot have
    them."""
    for key in OWN_ROUTE:
        value = cluster.get(key)
        if value is None or (key == "port" and value == site.port) or (
                key == "insecureSkipHostKeyCheck" and value is False):
            continue
        return (f"spec.cluster.{key} is set, but BatchCluster {site.name} decides it; remove "
                "it (a BatchCluster's hosts are checked against its knownHosts alone).")
    backend = spec.get("backend", site.backend)
    if backend != site.backend:
        return (f"spec.backend is {shown(backend)}, but BatchCluster {site.name} is "
                f"{site.backend}; write {site.backend} or leave spec.backend out.")
    secret = cluster.get("secretRef")
    jump_secret = cluster.get("jumpSecretRef") or secret
    route: dict[str, Any] = {
        "host": site.host, "port": site.port, "secretRef": secret,
        "jump": [{"host": hop.host, "port": hop.port,
                  "secretRef": {"name": hop.secret_name} if hop.secret_name else jump_secret}
                 for hop in site.jump],
    }
    place = _work_dir(cluster.get("workDir"), site)
    if place is OUTSIDE:
        return (f"spec.cluster.workDir must be inside BatchCluster {site.name}'s workDir "
                f"{site.work_dir}: an absolute path below it, or a relative one, taken below "
                "it.")
    if place is not None:
        route["workDir"] = place
    merged = dict(spec, backend=site.backend, cluster=route)
    merged["resources"] = _filled(spec.get("resources"), site.default_resources)
    merged[site.backend] = _filled(spec.get(site.backend), site.default_options)
    return merged


def _filled(own: object, defaults: Mapping[str, Any]) -> object:
    """``own`` with ``defaults`` where it leaves a field out (a non-object stays as it is,
    for the spec's own check to name)."""
    if own is None:
        return dict(defaults)
    if not isinstance(own, dict):
        return own
    return {**defaults, **{k: v for k, v in own.items() if v is not None}}


def _work_dir(own: object, site: Site) -> object:
    """The attempt's work directory: the BatchJob's own inside the BatchCluster's (absolute
    below it, or relative and taken below it), the BatchCluster's, or the BatchJob's own when
    the BatchCluster has none."""
    if site.work_dir is None or own is None:
        return own if site.work_dir is None else site.work_dir
    if not isinstance(own, str):
        return own
    if own.startswith("/"):
        inside = own.rstrip("/").startswith(f"{site.work_dir.rstrip('/')}/")
        return own if inside else OUTSIDE
    if own.startswith("~"):
        return OUTSIDE
    return f"{site.work_dir.rstrip('/')}/{own}"


def _checked(parsed: ParsedSpec, site: Site, merged: Mapping[str, Any], rules: Rules
             ) -> ParsedSpec:
    """``parsed`` on the BatchCluster's route, within its limits, which the scheduler's
    free-form options may not reach around."""
    placement = parsed.placement
    if placement is None:
        return parsed
    routed = Placement(placement.backend, replace(placement.cluster, site=site.name,
                                                  known_hosts=site.known_hosts))
    if parsed.spec is None:
        return replace(parsed, placement=routed)
    options = merged.get(site.backend)
    over = beyond(site.limits, parsed.spec.resources,
                  options if isinstance(options, dict) else {}) or free_form_beyond(
        site.limits, rules[site.backend].free_form_settings(parsed.spec.options,
                                                            parsed.spec.script))
    if over:
        return ParsedSpec(parsed.backend, routed, None,
                          f"{over} (BatchCluster {site.name}); change the spec.")
    spec = replace(parsed.spec, cluster=routed.cluster)
    return _contained(ParsedSpec(parsed.backend, routed, spec, "", digest(spec)),
                      site.containers, site.name,
                      site.backend if rules[site.backend].own_containers else "")


def _contained(parsed: ParsedSpec, site: SiteContainers | None, name: str,
               pool_runtime: str = "") -> ParsedSpec:
    """``parsed`` with its container as the route's site runs it (``name``: the BatchCluster,
    empty for a route the BatchJob names itself; ``pool_runtime``: its scheduler's own
    runtime, if it has one), or invalid when it asks for more."""
    spec = parsed.spec
    if spec is None or spec.container is None:
        return parsed
    try:
        container = apply(spec.container, site, name=name,
                          direct_work_dir=spec.cluster.work_dir, pool_runtime=pool_runtime)
    except SpecError as err:
        return ParsedSpec(parsed.backend, parsed.placement, None, str(err))
    spec = replace(spec, container=container)
    return replace(parsed, spec=spec, digest=digest(spec))

