"""Everything a hook server keeps between calls, built once by ``create_app`` and injected.

The scheduler registry, the transports its schedulers name (the SSH connection pool), the
shared status cache, the shares of the hook threads, the metrics and the clocks live in one
``Runtime``; nothing module-level holds state. Idle connections and the shared status of
clusters nobody asks about any more are dropped on one schedule (``sweep``, run by the calls
themselves at most every ``SWEEP_EVERY`` seconds, or every half ``HPCBRIDGE_IDLE_SECONDS``
when that is shorter).
"""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hooks.admission import Admission
from hooks.core.wire.request import Policy
from hooks.metrics import Metrics
from hooks.schedulers.base import Registry, Scheduler, Transport, TransportKind
from hooks.schedulers.registry import REGISTRY
from hooks.settings import Settings
from hooks.status_cache import StatusCache

SWEEP_EVERY = 60.0


def sweep_every(settings: Settings) -> float:
    """Seconds between sweeps: ``SWEEP_EVERY``, or half ``HPCBRIDGE_IDLE_SECONDS`` when that is
    shorter."""
    return min(SWEEP_EVERY, settings.idle_seconds / 2)


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC).replace(microsecond=0)


@dataclass
class Runtime:
    settings: Settings
    schedulers: Registry
    metrics: Metrics
    transports: Mapping[TransportKind, Transport[Any]]
    """One transport of each kind the schedulers name."""
    cache: StatusCache
    admission: Admission
    clock: Callable[[], datetime.datetime] = utcnow
    """The wall clock of status times; deadlines and ages use the monotonic clock."""
    _next_sweep: float = field(default=0.0, repr=False)
    _sweeping: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def build(
        cls, settings: Settings, *, schedulers: Registry = REGISTRY,
        clock: Callable[[], datetime.datetime] = utcnow,
        transports: Mapping[TransportKind, Transport[Any]] | None = None,
    ) -> Runtime:
        """The runtime of ``settings``; tests hand in stand-in schedulers, clock and transports
        (by the kind they stand in for)."""
        metrics = Metrics()
        given = transports or {}
        kinds = dict.fromkeys(scheduler.transport for scheduler in schedulers.values())
        return cls(
            settings=settings,
            schedulers=schedulers,
            metrics=metrics,
            transports={kind: given.get(kind) or kind(settings, metrics) for kind in kinds},
            cache=StatusCache(metrics, ttl=settings.status_ttl, forget=settings.idle_seconds),
            admission=Admission(route_share=settings.cluster_threads,
                                namespace_share=settings.namespace_threads),
            clock=clock,
            _next_sweep=time.monotonic() + sweep_every(settings),
        )

    @property
    def policy(self) -> Policy:
        s = self.settings
        return Policy(log_image=s.log_image, finalize_grace=s.finalize_grace,
                      guard_stale=s.guard_stale, direct_clusters=s.direct_clusters,
                      status_ttl=s.status_ttl, s3_endpoints=s.s3_endpoints)

    def transport(self, scheduler: Scheduler[Any]) -> Transport[Any]:
        """The transport ``scheduler``'s operations go over."""
        return self.transports[scheduler.transport]

    def sweep(self) -> None:
        """Drop idle connections and the shared status nobody asked about for a while."""
        for transport in self.transports.values():
            transport.evict_idle(self.settings.idle_seconds)
        self.cache.evict_idle()

    def sweep_if_due(self) -> None:
        now = time.monotonic()
        if now < self._next_sweep or not self._sweeping.acquire(blocking=False):
            return
        try:
            self._next_sweep = now + sweep_every(self.settings)
            self.sweep()
        finally:
            self._sweeping.release()

    def close(self) -> None:
        for transport in self.transports.values():
            transport.close()
