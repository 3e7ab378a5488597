"""What the SSH pool (``hooks.ssh.pool``) keeps per key: the shared connection with its bounded
channels, the single-flight connect slots of targets and jump hosts, and the memory of a failed
connect."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from hooks.deadline import Deadline
from hooks.metrics import Metrics
from hooks.ssh import errors
from hooks.ssh.client import OVERRUN, Completed, Connection

FAILED_SECONDS = 10.0
"""How long a failed connect answers for its key without another attempt."""


class PooledConnection:
    """A shared connection (``connection``, the SSH connection itself): commands wait for a
    free channel (within their own deadline)."""

    def __init__(self, connection: Connection, credential_key: str, max_channels: int,
                 metrics: Metrics) -> None:
        self.connection = connection
        self.credential_key = credential_key
        """Host, port and credential fingerprint: shared answers are keyed by it."""
        self.target = connection.target
        self.cluster = connection.target.cluster
        self._channels = threading.BoundedSemaphore(max_channels)
        self._metrics = metrics

    def run(self, argv: Sequence[str], *, stdin: bytes = b"", deadline: Deadline) -> Completed:
        with self._channel(argv, deadline):
            return self.connection.run(argv, stdin=stdin, deadline=deadline)

    def stream(
        self, argv: Sequence[str], sink: Callable[[bytes], None], *, stdin: bytes = b"",
        deadline: Deadline,
    ) -> tuple[int, bytes]:
        with self._channel(argv, deadline):
            return self.connection.stream(argv, sink, stdin=stdin, deadline=deadline)

    @contextmanager
    def _channel(self, argv: Sequence[str], deadline: Deadline) -> Iterator[None]:
        """A free channel, waited for as long as the deadline leaves time for the command."""
        with self._metrics.remote_command(self.cluster, argv):
            if not self._channels.acquire(timeout=max(0.0, deadline.left() - OVERRUN - 1)):
                raise errors.CommandTimeout(self.target.host,
                                            f"no free SSH channel to {self.target.host}")
            try:
                yield
            finally:
                self._channels.release()


@dataclass
class Failed:
    """The memory of the last failed connect, answered while it is recent."""

    failure: errors.SSHError | None = None
    failed_at: float = 0.0

    def recent_failure(self, host: str) -> errors.SSHError | None:
        """The last attempt's failure while it is recent, for a call to ``host``."""
        if self.failure is None or time.monotonic() - self.failed_at >= FAILED_SECONDS:
            return None
        return type(self.failure)(host, self.failure.message)

    def failed(self, err: errors.SSHError) -> None:
        # A copy without the traceback, which would keep every frame of the attempt alive.
        self.failure, self.failed_at = type(err)(err.host, err.message), time.monotonic()


@dataclass
class TargetSlot(Failed):
    """A target's single-flight connect (one per pool key), its connection, and its login's
    last failure."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    used: float = 0.0
    users: int = 0
    """How many calls hold the slot now: a slot in use is never evicted."""
    pooled: PooledConnection | None = None
    """The target's shared connection, once opened."""
    route: tuple[str, ...] = ()
    """The keys of the jump host connections the target is reached through."""


@dataclass
class HopSlot(Failed):
    """A jump host's single-flight connect, its connection, and its login's last failure (it
    stays as long as a pooled target routes through it)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    hop: Connection | None = None
    """The connection to a jump host, tunnelling for the targets behind it."""
