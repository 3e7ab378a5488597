"""The keys of pooled SSH connections: what makes two BatchJobs share one connection, and the
keys of the jump hosts a route goes through."""

from __future__ import annotations

import hashlib

from hooks.core.sites.secret import Credentials
from hooks.ssh.client import Target
from hooks.ssh.login import jump_target


def pool_key(target: Target, credentials: Credentials) -> str:
    """The key of a pooled connection and of the answers shared over it: host, port, the
    host-key choice, the whole credential set, the route, each jump host's host, port,
    host-key choice and credentials included, and the BatchCluster the route comes from (two
    with the same host and logins share no connection, whose ``cluster`` label and messages
    name one of them)."""
    own = credentials.fingerprint(target.host, target.port,
                                  target.insecure_skip_host_key_check)
    if not target.jump and not target.site:
        return own
    route = tuple(jump.credentials.fingerprint(jump.host, jump.port,
                                               jump.insecure_skip_host_key_check)
                  for jump in target.jump)
    return hashlib.sha256(repr((own, target.site, *route)).encode()).hexdigest()[:32]


def route_keys(target: Target) -> tuple[str, ...]:
    """The pool keys of the connections to the target's jump hosts, first to last."""
    return tuple(pool_key(jump_target(target, number), jump.credentials)
                 for number, jump in enumerate(target.jump))


