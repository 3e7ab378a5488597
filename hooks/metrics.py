"""Prometheus metrics of the hook server, served at ``GET /metrics``.

What a platform engineer watches: hook calls and their latency by outcome, every remote
command by cluster and verb with its latency, the status cache's hits and misses, SSH
connects, and the BatchJobs this server last saw in each phase.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from prometheus_client import Counter, Gauge, Histogram

HOOK_REQUESTS = Counter("hpcbridge_hook_requests_total", "Hook calls answered",
                        ["hook", "outcome"])
HOOK_LATENCY = Histogram("hpcbridge_hook_duration_seconds", "Hook call latency", ["hook"],
                         buckets=(.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10,
                                  30))
REMOTE_COMMANDS = Counter("hpcbridge_remote_commands_total", "Commands run on clusters",
                          ["cluster", "verb", "outcome"])
REMOTE_LATENCY = Histogram("hpcbridge_remote_command_duration_seconds",
                           "Remote command latency", ["cluster", "verb"],
                           buckets=(.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30))
CACHE = Counter("hpcbridge_status_cache_total", "Status lookups by result",
                ["result"])
SSH_CONNECTS = Counter("hpcbridge_ssh_connects_total", "SSH connections opened",
                       ["cluster", "outcome"])
FINALIZE_GAVE_UP = Counter("hpcbridge_finalize_gave_up_total",
                           "Deletions finished without reaching the cluster")
JOBS = Gauge("hpcbridge_batchjobs", "BatchJobs by phase, as this server last answered",
             ["phase"])

_phases: dict[str, str] = {}
_phases_lock = threading.Lock()

# Every series a hook call or a cache lookup can touch exists from the start (at 0), so that
# rates over them are defined before the first event; the bound children also spare each call
# the label lookup.
_hook_requests = {(hook, outcome): HOOK_REQUESTS.labels(hook, outcome)
                  for hook in ("customize", "sync", "finalize")
                  for outcome in ("ok", "bad_request", "error")}
_hook_latency = {hook: HOOK_LATENCY.labels(hook) for hook in ("customize", "sync", "finalize")}
_cache_results = {result: CACHE.labels(result) for result in ("hit", "miss", "wait", "single")}


def hook_answered(hook: str, status_code: int, seconds: float) -> None:
    """Count one answered hook call (``hook`` is customize, sync or finalize)."""
    outcome = {200: "ok", 400: "bad_request"}.get(status_code, "error")
    _hook_requests[hook, outcome].inc()
    _hook_latency[hook].observe(seconds)


def cache_lookup(result: str) -> None:
    """Count one status-cache lookup: hit, miss (led a refresh), wait (joined one) or single
    (asked for its attempt alone)."""
    _cache_results[result].inc()


def verb(argv: Sequence[str]) -> str:
    """The command's name for metrics: ``squeue`` for ``env TZ=UTC squeue …``, and the
    program name given as ``$0`` for ``sh -c PROGRAM NAME …``.

    A label value, so it must come from a small fixed set: never a path or a job's name.
    """
    words = list(argv)
    if words[:1] == ["env"]:
        words = words[1:]
        while words and "=" in words[0] and not words[0].startswith("-"):
            words = words[1:]
    if len(words) > 3 and words[0] == "sh" and words[1] == "-c":
        return words[3]
    return words[0] if words else "?"


@contextmanager
def remote_command(cluster: str, argv: Sequence[str]) -> Iterator[None]:
    name = verb(argv)
    started = time.perf_counter()
    outcome = "error"
    try:
        yield
        outcome = "ok"
    finally:
        REMOTE_LATENCY.labels(cluster, name).observe(time.perf_counter() - started)
        REMOTE_COMMANDS.labels(cluster, name, outcome).inc()


def record_phase(uid: str, phase: str | None) -> None:
    """Track the phase this server last answered for a BatchJob; None forgets it."""
    with _phases_lock:
        old = _phases.pop(uid, None)
        if phase is not None:
            _phases[uid] = phase
        if old != phase:
            if old is not None:
                JOBS.labels(old).dec()
            if phase is not None:
                JOBS.labels(phase).inc()
