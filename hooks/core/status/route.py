"""``status.cluster``: where the current attempt was submitted, as the status keeps it (the
route, its work directory, and on a BatchCluster's route its name and the host keys trusted),
read back as the spec reads a route. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hooks.core.spec.layout import DNS_SUBDOMAIN, cluster_ref
from hooks.core.values.fields import SpecError
from hooks.core.values.job import DEFAULT_WORK_DIR, ClusterRef


def from_raw(raw: object) -> ClusterRef | None:
    """Where the attempt was submitted, if the stored status says so in a form the spec takes
    (``hooks.core.spec.layout.cluster_ref``): anything else is no cluster."""
    try:
        route = cluster_ref(raw, "status.cluster")
    except SpecError:
        return None
    assert isinstance(raw, dict)
    site, known_hosts = raw.get("name"), raw.get("knownHosts")
    if site is None:
        return route
    if not isinstance(site, str) or not DNS_SUBDOMAIN.fullmatch(site):
        return None
    # A BatchCluster's route trusts the host keys it was submitted with (none: none).
    return replace(route, site=site, known_hosts=known_hosts if isinstance(
        known_hosts, str) else "", insecure_skip_host_key_check=False,
        jump=tuple(replace(hop, insecure_skip_host_key_check=False) for hop in route.jump))


def to_raw(cluster: ClusterRef | None) -> dict[str, Any] | None:
    if cluster is None:
        return None
    raw = _login(cluster.host, cluster.port, cluster.secret_name,
                     cluster.insecure_skip_host_key_check)
    if cluster.jump:
        raw["jump"] = [_login(hop.host, hop.port, hop.secret_name,
                                  hop.insecure_skip_host_key_check) for hop in cluster.jump]
    if cluster.work_dir != DEFAULT_WORK_DIR:
        raw["workDir"] = cluster.work_dir
    if cluster.site:
        raw["name"] = cluster.site
        raw["knownHosts"] = cluster.known_hosts
    return raw


def _login(host: str, port: int, secret: str, insecure: bool) -> dict[str, Any]:
    return {"host": host, "port": port, "secretRef": {"name": secret},
            "insecureSkipHostKeyCheck": insecure}
