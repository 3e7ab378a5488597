"""Hook-server settings, read once from the environment by the app factory."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

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
    "status_ttl": (
        "HPCBRIDGE_STATUS_TTL",
        "seconds a batched scheduler answer is shared by the syncs of one cluster",
    ),
    "max_channels": (
        "HPCBRIDGE_MAX_CHANNELS",
        "concurrent commands per SSH connection; keep it below sshd's MaxSessions (10)",
    ),
    "sync_budget": (
        "HPCBRIDGE_SYNC_BUDGET",
        "seconds one hook call may spend on the cluster; keep it below the 30 s hook timeout",
    ),
}


@dataclass(frozen=True, slots=True)
class Settings:
    log_image: str = "hpcbridge:0.1.0"
    finalize_grace: float = 600.0
    connect_timeout: float = 8.0
    command_timeout: float = 15.0
    sync_budget: float = 25.0
    status_ttl: float = 5.0
    max_channels: int = 8

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
            try:
                values[spec.name] = kind(raw)
            except ValueError as err:
                raise ValueError(f"{name}={raw!r} is not a {kind.__name__}") from err
        return cls(**values)  # type: ignore[arg-type]
