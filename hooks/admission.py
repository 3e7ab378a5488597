"""Shares of the hook threads: by route and by namespace.

A hook call that reaches a cluster holds its thread for as long as the cluster takes to answer,
up to the whole call's budget. So that a cluster that stalls never starves the others, and no
namespace slows another, such a call runs only while its route (every jump host's
``host:port`` and the login node's, in order) holds fewer than ``HPCBRIDGE_CLUSTER_THREADS``
calls and its namespace fewer than ``HPCBRIDGE_NAMESPACE_THREADS``. Beyond either share it is
not queued: the executor answers it at once with the BatchJob's status as it was and a resync
soon (``hooks.core.decide.answer.busy``). Calls that reach no cluster (an invalid spec, a finished
BatchJob) take no share.

The route is the whole route, never the login node alone: BatchJobs that name another
namespace's healthy login node behind a jump host that never answers take their own route's
share and their own namespace's, never the login node's.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hooks.core.spec.batchjob import Placement

Route = tuple[str, ...]


def route_of(placement: Placement) -> Route:
    """Every jump host's ``host:port`` and then the login node's, as the spec names them."""
    cluster = placement.cluster
    return (*(f"{hop.host.lower()}:{hop.port}" for hop in cluster.jump),
            f"{cluster.host.lower()}:{cluster.port}")


class Admission:
    """How many calls each route and each namespace run now, against their shares."""

    def __init__(self, *, route_share: int, namespace_share: int) -> None:
        self.route_share = route_share
        self.namespace_share = namespace_share
        self._routes: Counter[Route] = Counter()
        self._namespaces: Counter[str] = Counter()
        self._lock = threading.Lock()

    @contextmanager
    def slot(self, route: Route, namespace: str) -> Iterator[bool]:
        """Whether a call on ``route`` from ``namespace`` may run now; its slot is held until
        the block ends."""
        with self._lock:
            admitted = (self._routes[route] < self.route_share
                        and self._namespaces[namespace] < self.namespace_share)
            if admitted:
                self._routes[route] += 1
                self._namespaces[namespace] += 1
        try:
            yield admitted
        finally:
            if admitted:
                with self._lock:
                    _leave(self._routes, route)
                    _leave(self._namespaces, namespace)


def _leave(counts: Counter[Any], key: object) -> None:
    """One call fewer under ``key``; a key no call holds is forgotten."""
    counts[key] -= 1
    if counts[key] <= 0:
        del counts[key]
