"""Hook-server settings, read once from the environment by the app factory and by gunicorn's
settings (``hooks.gunicorn_conf``: the threads), and checked.

Some settings bound others: a submission guard with no job id is taken over after
``HPCBRIDGE_GUARD_STALE`` seconds, so that must exceed the longest a remote command can run
(``HPCBRIDGE_COMMAND_TIMEOUT`` plus the SSH layer's ``OVERRUN``), or a second sync would take
over a submission that is still running and submit the job twice. ``Settings`` refuses such
combinations with a message naming the settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

from hooks import __version__
from hooks.core.spec import endpoints
from hooks.core.spec.endpoints import Endpoint
from hooks.core.values.fields import SpecError
from hooks.ssh.client import OVERRUN

ENVIRONMENT = {
    "log_image": ("HPCBRIDGE_LOG_IMAGE", "image of the log Pods (the product's own image)"),
    "finalize_grace": (
        "HPCBRIDGE_FINALIZE_GRACE",
        "seconds after deletion after which finalize gives up on an unavailable cluster",
    ),
    "connect_timeout": ("HPCBRIDGE_CONNECT_TIMEOUT", "seconds to open and log in over SSH"),
    "command_timeout": (
        "HPCBRIDGE_COMMAND_TIMEOUT",
        "seconds one remote command may run; it is killed on the cluster too",
    ),
    "sync_budget": (
        "HPCBRIDGE_SYNC_BUDGET",
        "seconds one hook call may spend on the cluster; keep it below the 30 s hook timeout",
    ),
    "status_ttl": (
        "HPCBRIDGE_STATUS_TTL",
        "seconds a batched scheduler answer is shared by the syncs of one cluster",
    ),
    "max_channels": (
        "HPCBRIDGE_MAX_CHANNELS",
        "concurrent commands per SSH connection; keep it below sshd's MaxSessions (10)",
    ),
    "max_connections": (
        "HPCBRIDGE_MAX_CONNECTIONS",
        "SSH connections kept open; a new one closes the least recently used idle one",
    ),
    "guard_stale": (
        "HPCBRIDGE_GUARD_STALE",
        "seconds after which a submission guard without a job id is taken over",
    ),
    "idle_seconds": (
        "HPCBRIDGE_IDLE_SECONDS",
        "seconds after which unused SSH connections and shared status are dropped",
    ),
    "max_body": (
        "HPCBRIDGE_MAX_BODY",
        "bytes a request body may have; a larger one is answered 413 without being read",
    ),
    "threads": (
        "HPCBRIDGE_THREADS",
        "threads per process that run hook calls: the most that may wait on SSH at once",
    ),
    "cluster_threads": (
        "HPCBRIDGE_CLUSTER_THREADS",
        "of those, the most that calls for one route (its jump hosts and login node) may hold at "
        "once; a call beyond it is answered at once, its status kept, and synced again soon",
    ),
    "namespace_threads": (
        "HPCBRIDGE_NAMESPACE_THREADS",
        "of those, the most that calls for the BatchJobs of one namespace may hold at once; a "
        "call beyond it is answered at once, its status kept, and synced again soon",
    ),
    "direct_clusters": (
        "HPCBRIDGE_DIRECT_CLUSTERS",
        "true or false: whether a BatchJob may name its host itself instead of a BatchCluster",
    ),
    "registry_timeout": (
        "HPCBRIDGE_REGISTRY_TIMEOUT",
        "seconds the hooks may spend asking an image registry which digest one "
        "spec.container.image names",
    ),
    "registry_ca": (
        "HPCBRIDGE_REGISTRY_CA",
        "a PEM file of certificate authorities trusted for image registries besides the "
        "system's",
    ),
    "s3_endpoints": (
        "HPCBRIDGE_S3_ENDPOINTS",
        "comma-separated object-store URLs (scheme, host, port) any BatchJob may name in "
        "spec.storage.s3.endpoint even at a private address",
    ),
}
FLAGS = {"true": True, "false": False}


@dataclass(frozen=True, slots=True)
class Settings:
    log_image: str = f"hpcbridge:{__version__}"
    finalize_grace: float = 600.0
    connect_timeout: float = 8.0
    command_timeout: float = 15.0
    sync_budget: float = 25.0
    status_ttl: float = 5.0
    max_channels: int = 8
    max_connections: int = 200
    """Each is a thread and a file descriptor; far above the clusters and Secrets in use."""
    guard_stale: int = 120
    idle_seconds: float = 600.0
    max_body: int = 8 * 1024 * 1024
    """Far above the largest real request: a 256 KiB script and a few Secrets."""
    threads: int = 64
    cluster_threads: int = 16
    """Above Metacontroller's concurrent syncs (``--workers``, 5 by default), so that only a
    cluster that stalls has its calls answered without running."""
    namespace_threads: int = 16
    """As many: one namespace's calls never hold more than a quarter of the threads."""
    direct_clusters: bool = True
    """Unset means true, so that BatchJobs that name their host keep working; an
    installation that routes every BatchJob through BatchClusters sets false."""
    registry_timeout: float = 10.0
    registry_ca: str = ""
    """Unset: the certificate authorities the hook server's image trusts."""
    s3_endpoints: tuple[Endpoint, ...] = ()
    """Unset, no store is allowed whatever its address: a BatchJob's endpoint must be public
    (``hooks.core.spec.endpoints``)."""

    def __post_init__(self) -> None:
        for spec in fields(self):
            value = getattr(self, spec.name)
            if not isinstance(value, str | bool | tuple) and value <= 0:
                raise ValueError(f"{ENVIRONMENT[spec.name][0]} must be positive, not {value}")
        if self.command_timeout + OVERRUN >= self.guard_stale:
            raise ValueError(
                f"HPCBRIDGE_GUARD_STALE ({self.guard_stale} s) must exceed "
                f"HPCBRIDGE_COMMAND_TIMEOUT ({self.command_timeout:g} s) plus the {OVERRUN} s "
                "a command may overrun it, or a sync could take over a submission that is "
                "still running")
        for share in ("cluster_threads", "namespace_threads"):
            if getattr(self, share) > self.threads:
                raise ValueError(f"{ENVIRONMENT[share][0]} ({getattr(self, share)}) cannot "
                                 f"exceed HPCBRIDGE_THREADS ({self.threads})")
        if self.sync_budget < OVERRUN + 1:
            raise ValueError(f"HPCBRIDGE_SYNC_BUDGET ({self.sync_budget:g} s) leaves no time "
                             f"for a command, which may overrun its limit by {OVERRUN} s")

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        """Settings from ``HPCBRIDGE_*`` variables; unset ones keep their defaults."""
        values: dict[str, object] = {}
        for spec in fields(cls):
            name, _ = ENVIRONMENT[spec.name]
            raw = env.get(name, "")
            if not raw:
                continue
            kind = type(getattr(cls(), spec.name))
            if kind is tuple:
                values[spec.name] = _endpoints(name, raw)
                continue
            if kind is bool:
                if raw.lower() not in FLAGS:
                    raise ValueError(f"{name}={raw!r} must be true or false")
                values[spec.name] = FLAGS[raw.lower()]
                continue
            try:
                values[spec.name] = kind(raw)
            except ValueError as err:
                raise ValueError(f"{name}={raw!r} is not a {kind.__name__}") from err
        return cls(**values)  # type: ignore[arg-type]


def _endpoints(name: str, raw: str) -> tuple[Endpoint, ...]:
    """A comma-separated list of endpoints, each as a BatchJob would write it."""
    try:
        return endpoints.parse_list([item.strip() for item in raw.split(",") if item.strip()],
                                    name)
    except SpecError as err:
        raise ValueError(str(err)) from err
