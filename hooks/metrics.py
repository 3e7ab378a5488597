"""Prometheus metrics of the hook server, served at ``GET /metrics``.

What a platform engineer watches: hook calls and their latency by outcome, every remote
command by cluster and verb with its latency, submissions by outcome, the status cache's hits
and misses, SSH connects, and finalize calls that gave up. One ``Metrics`` object per server
owns its collectors in its own registry (with the process and Python collectors), so that the
label sets it can create are the ones listed here and nothing else.

The ``cluster`` label is a BatchJob's host and port, which anyone who can create a BatchJob
chooses: a cluster gets a label value of its own only once a login to it succeeded, for at
most ``MAX_CLUSTERS`` clusters at a time; anything else is counted as ``unverified``. A cluster
whose connections were all closed as idle is forgotten, series and all. An address is one label
however it is written (``cluster_label``).
"""

from __future__ import annotations

import contextlib
import ipaddress
import platform
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)

from hooks import __version__, logformat

disable_created_metrics()  # type: ignore[no-untyped-call]
"""Counters and histograms have no ``_created`` series: each replica's would only say when it
started, and every series doubles the scrape."""

HOOKS = ("customize", "sync", "finalize")
HOOK_OUTCOMES = ("ok", "bad_request", "unauthorized", "error")
CACHE_RESULTS = ("hit", "miss", "wait", "single", "failed")
SUBMIT_OUTCOMES = ("submitted", "existing", "inflight", "refused", "transient")
MAX_CLUSTERS = 200
UNVERIFIED = "unverified"


def cluster_label(cluster: str) -> str:
    """``host:port`` with an address written one way: IPv4 in dotted decimal, whichever form
    the resolver took it in (inet_aton's: ``127.1``, ``127.0.0.01``, ``0x7f.0.0.1`` and
    ``2130706433`` are ``127.0.0.1``), IPv6 compressed and bracketed (an IPv4-mapped one as its
    IPv4 address). A host name stays as it is.

    >>> [cluster_label(c) for c in ("127.1:22", "2130706433:22", "127.0.0.01:22", "login:22")]
    ['127.0.0.1:22', '127.0.0.1:22', '127.0.0.1:22', 'login:22']
    >>> [cluster_label(c) for c in ("::1:22", "0:0:0:0:0:0:0:1:22", "[::FFFF:7f00:1]:22")]
    ['[::1]:22', '[::1]:22', '127.0.0.1:22']
    """
    host, _, port = cluster.rpartition(":")
    try:
        address = ipaddress.ip_address(host.removeprefix("[").removesuffix("]"))
    except ValueError:
        try:
            return f"{socket.inet_ntoa(socket.inet_aton(host))}:{port}"
        except OSError:
            return cluster
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        return f"{address.ipv4_mapped}:{port}"
    return f"[{address.compressed}]:{port}" if address.version == 6 else f"{address}:{port}"


def hook_outcome(status_code: int) -> str:
    """A hook call's outcome by its answer's status: ``ok``; ``unauthorized`` (401: no bearer
    token, or not the hooks' one); ``bad_request`` (any other 4xx: a request the hooks
    refuse); ``error`` (a 5xx: the hooks' own failure).

    >>> [hook_outcome(code) for code in (200, 400, 401, 404, 413, 500)]
    ['ok', 'bad_request', 'unauthorized', 'bad_request', 'bad_request', 'error']
    """
    if status_code < 400:
        return "ok"
    if status_code == 401:
        return "unauthorized"
    return "bad_request" if status_code < 500 else "error"


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


class Metrics:
    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry()
        for collector in (ProcessCollector, PlatformCollector, GCCollector):
            collector(registry=registry)
        self._hook_requests = Counter("hpcbridge_hook_requests_total", "Hook calls answered",
                                      ["hook", "outcome"], registry=registry)
        self._hook_latency = Histogram(
            "hpcbridge_hook_duration_seconds", "Hook call latency", ["hook"], registry=registry,
            buckets=(.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30))
        self._remote_commands = Counter("hpcbridge_remote_commands_total",
                                        "Commands run on clusters",
                                        ["cluster", "verb", "outcome"], registry=registry)
        self._remote_latency = Histogram(
            "hpcbridge_remote_command_duration_seconds", "Remote command latency",
            ["cluster", "verb"], registry=registry,
            buckets=(.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30))
        cache = Counter("hpcbridge_status_cache_total", "Status lookups by result", ["result"],
                        registry=registry)
        self._connects = Counter("hpcbridge_ssh_connects_total", "SSH connections opened",
                                 ["cluster", "outcome"], registry=registry)
        self._gave_up = Counter("hpcbridge_finalize_gave_up_total",
                                "Deletions finished without reaching the cluster",
                                registry=registry)
        submissions = Counter("hpcbridge_submissions_total",
                              "Guarded submissions by the guard's answer", ["outcome"],
                              registry=registry)
        Gauge("hpcbridge_build_info", "The hook server's version", ["version", "python"],
              registry=registry).labels(__version__, platform.python_version()).set(1)
        # Every series a hook call, a cache lookup or a submission can touch exists from the
        # start (at 0), so that rates over them are defined before the first event; the bound
        # children also spare each call the label lookup.
        self._hooks = {(hook, outcome): self._hook_requests.labels(hook, outcome)
                       for hook in HOOKS for outcome in HOOK_OUTCOMES}
        self._latency = {hook: self._hook_latency.labels(hook) for hook in HOOKS}
        self._cache = {result: cache.labels(result) for result in CACHE_RESULTS}
        self._submissions = {outcome: submissions.labels(outcome) for outcome in SUBMIT_OUTCOMES}
        self._clusters: dict[str, set[tuple[str, ...]]] = {}
        """Admitted clusters, with the label sets each has in the per-cluster metrics."""
        self._clusters_lock = threading.Lock()

    def hook_answered(self, hook: str, status_code: int, seconds: float) -> None:
        """Count one answered hook call (``hook`` is customize, sync or finalize)."""
        self._hooks[hook, hook_outcome(status_code)].inc()
        self._latency[hook].observe(seconds)

    def cache_lookup(self, result: str) -> None:
        """Count one status-cache lookup: hit, miss (led a refresh), wait (joined one),
        single (asked for its attempt alone) or failed (answered with a recent refresh's
        failure)."""
        self._cache[result].inc()

    def submission(self, outcome: str) -> None:
        """Count one guarded submission by the guard's answer."""
        self._submissions[outcome].inc()

    def ssh_connect(self, cluster: str, *, ok: bool, refused: bool = False,
                    invalid_secret: bool = False) -> None:
        """Count one SSH connect: ``ok``; ``refused`` when the host answered but would not
        take this login (its credentials or host key: one user's trouble); ``invalid_secret``
        when the Secret's key could not be used (unreadable, encrypted without its passphrase,
        a certificate of another key), so that it was never offered to the host; else
        ``failed`` (the host could not be reached)."""
        cluster = cluster_label(cluster)
        if ok:
            self._admit(cluster)
        outcome = ("ok" if ok else "invalid_secret" if invalid_secret
                   else "refused" if refused else "failed")
        self._connects.labels(self._label(cluster, ("connect", outcome)), outcome).inc()

    def forget_cluster(self, cluster: str) -> None:
        """Drop an admitted cluster's series (its connections were closed as idle)."""
        cluster = cluster_label(cluster)
        with self._clusters_lock:
            used = self._clusters.pop(cluster, set())
        for labels in used:
            kind, *rest = labels
            metric = {"connect": self._connects, "command": self._remote_commands,
                      "latency": self._remote_latency}[kind]
            with contextlib.suppress(KeyError):
                metric.remove(cluster, *rest)

    def _admit(self, cluster: str) -> None:
        with self._clusters_lock:
            if cluster not in self._clusters and len(self._clusters) < MAX_CLUSTERS:
                self._clusters[cluster] = set()

    def _label(self, cluster: str, labels: tuple[str, ...]) -> str:
        """``cluster`` if admitted (noting the series it gets), else ``unverified``."""
        with self._clusters_lock:
            used = self._clusters.get(cluster)
            if used is None:
                return UNVERIFIED
            used.add(labels)
            return cluster

    def finalize_gave_up(self) -> None:
        self._gave_up.inc()

    @contextmanager
    def remote_command(self, cluster: str, argv: Sequence[str]) -> Iterator[None]:
        name, cluster = verb(argv), cluster_label(cluster)
        started = time.perf_counter()
        outcome = "error"
        try:
            yield
            outcome = "ok"
        finally:
            label = self._label(cluster, ("latency", name))
            self._remote_latency.labels(label, name).observe(time.perf_counter() - started)
            self._label(cluster, ("command", name, outcome))
            self._remote_commands.labels(label, name, outcome).inc()
            logformat.remote_command(name, outcome)
