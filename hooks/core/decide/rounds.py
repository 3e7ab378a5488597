"""One round of a decision: the attempt it acts on, where that attempt is, with which logins.

A sync plays a round for the planned attempt (and at most one more, for an attempt resubmitted
after an infrastructure failure); a ``Round`` carries what each of its parts needs and makes
its effects. ``attempt_placement`` and ``credentials`` serve finalize too. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hooks.core.decide.effects import Access, Action, Effect, Trouble
from hooks.core.sites.openssh import SecretError
from hooks.core.sites.secret import Credentials, parse_secret
from hooks.core.spec.batchjob import Placement
from hooks.core.status import lifecycle
from hooks.core.status.lifecycle import Plan
from hooks.core.status.record import Status
from hooks.core.values.job import ClusterRef
from hooks.core.values.reasons import Reason
from hooks.core.wire.request import Call


@dataclass(frozen=True, slots=True)
class Round:
    """The attempt ``plan`` names, decided from the last status ``prev``, on the cluster of
    ``where``, reached with ``access``."""

    call: Call
    prev: Status
    plan: Plan
    where: Placement
    access: Access

    def effect(self, action: Action) -> Effect:
        """``action`` on the attempt's cluster."""
        return Effect(self.where, self.access, action)

    def unreachable(self, trouble: Trouble) -> Status:
        """The status when the cluster could not be asked: the last known state, and why."""
        return lifecycle.unreachable(self.prev, self.plan, trouble.reason, trouble.message,
                                     backend=self.where.backend, cluster=self.where.cluster)


def generation(call: Call, prev: Status) -> int:
    """The spec's generation as attempts count it: an edit that leaves the attempt's digest
    as it was (``suspend``, ``activeDeadlineSeconds``) is no new spec."""
    if prev.spec_hash and prev.spec_hash == call.parsed.digest:
        return min(call.generation, prev.attempt_generation or call.generation)
    return call.generation


def attempt_placement(call: Call, prev: Status) -> Placement | None:
    """Where the current attempt was submitted: an edit of the spec's backend or cluster
    applies to the next attempt. Before the first submission, where the spec says."""
    placement = call.parsed.placement
    if prev.cluster is None:
        return placement
    if prev.backend in call.rules:
        return Placement(prev.backend, prev.cluster)
    return Placement(placement.backend, prev.cluster) if placement else None


def credentials(call: Call, cluster: ClusterRef) -> Access | Trouble:
    """The logins of the route to the cluster (each jump host's, then the login node's) from
    the Secrets it names, or why there are none. On a BatchCluster's route the host keys
    trusted are its own, never a Secret's. Pure: no I/O."""
    trusted = trusted_keys(call, cluster)
    login = _login(call, cluster.secret_name, cluster.insecure_skip_host_key_check, "",
                   trusted)
    if isinstance(login, Trouble):
        return login
    hops: list[Credentials] = []
    for hop in cluster.jump:
        found = _login(call, hop.secret_name, hop.insecure_skip_host_key_check,
                       f" (jump host {hop.host})", trusted)
        if isinstance(found, Trouble):
            return found
        hops.append(found)
    return Access(login, tuple(hops))


def trusted_keys(call: Call, cluster: ClusterRef) -> str | None:
    """The host keys a BatchCluster's route trusts: the BatchCluster's ``knownHosts`` as they
    are now (a rotated key counts at once), then those the attempt was submitted with (for a
    host the BatchCluster no longer lists, so that its edit or deletion strands no job); None
    for a route the BatchJob names itself, which trusts its Secrets' ``known_hosts``."""
    if not cluster.site:
        return None
    current = call.site_keys.get(cluster.site, "")
    kept = cluster.known_hosts if cluster.known_hosts != current else ""
    return "\n".join(keys for keys in (current, kept) if keys)


def _login(call: Call, name: str, insecure: bool, role: str,
           trusted: str | None) -> Credentials | Trouble:
    secret = call.secrets.get(name)
    if secret is None:
        return Trouble(Reason.SECRET_NOT_FOUND,
                       f"Secret {name!r}{role} was not found in namespace {call.namespace}.")
    try:
        login = parse_secret(secret, insecure_host_keys=insecure or trusted is not None,
                             now=call.now)
    except SecretError as err:
        return Trouble(Reason.INVALID_SECRET, f"Secret {name!r}{role}: {err}")
    return login if trusted is None else replace(login, known_hosts=trusted)


@dataclass(frozen=True, slots=True)
class Reached:
    """Where a round left the attempt, and lines for the log; the sync may go on from it."""

    status: Status
    notes: tuple[str, ...] = ()
