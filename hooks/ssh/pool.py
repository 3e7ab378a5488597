"""SSH connections shared across hook calls: one per (host, port, whole credential set).

A connection is reused by every call whose BatchJob has the same host, port and credential
fingerprint (username, key or password, passphrase, known_hosts) — never across different
credential sets. Each connection carries at most ``max_channels`` concurrent commands, below
OpenSSH's default ``MaxSessions 10``; a dead connection is dropped and the next call
reconnects. Connecting is single-flight per key: concurrent calls wait for one handshake, and
a failed one answers every call for the next ``FAILED_SECONDS`` at once (a blackholed host
would otherwise hold a thread per sync for the whole connect timeout). ``evict_idle`` closes
connections nobody used for a while (a rotated key's, say), so the pool holds only what is in
use.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Protocol

from hooks.core.secret import Credentials
from hooks.deadline import Deadline
from hooks.metrics import Metrics
from hooks.ssh import errors
from hooks.ssh.client import OVERRUN, Completed, Connection, Remote, Target
from hooks.ssh.login import connect

Connector = Callable[[Target, Credentials, Deadline], Connection]
FAILED_SECONDS = 10.0
"""How long a failed connect answers for its key without another attempt."""


def pool_key(target: Target, credentials: Credentials) -> str:
    """The key of a pooled connection and of the answers shared over it: host, port, the
    host-key choice and the whole credential set."""
    return credentials.fingerprint(target.host, target.port,
                                   target.insecure_skip_host_key_check)


class Connections(Protocol):
    """What the hooks need of a pool (``Pool``, or a stand-in in tests)."""

    def open(
        self, target: Target, credentials: Credentials, *, deadline: Deadline
    ) -> AbstractContextManager[Remote]: ...

    def evict_idle(self, idle_seconds: float) -> int: ...

    def close(self) -> None: ...


def connect_pooled(target: Target, credentials: Credentials, deadline: Deadline) -> Connection:
    return connect(target, credentials, deadline=deadline)


class PooledConnection:
    """A shared connection: commands wait for a free channel (within their own deadline)."""

    def __init__(self, conn: Connection, credential_key: str, max_channels: int,
                 metrics: Metrics) -> None:
        self.conn = conn
        self.credential_key = credential_key
        """Host, port and credential fingerprint: shared answers are keyed by it."""
        self.target = conn.target
        self.cluster = f"{conn.target.host}:{conn.target.port}"
        self._channels = threading.BoundedSemaphore(max_channels)
        self._metrics = metrics

    def run(self, argv: Sequence[str], *, stdin: bytes = b"", deadline: Deadline) -> Completed:
        with self._channel(argv, deadline):
            return self.conn.run(argv, stdin=stdin, deadline=deadline)

    def stream(
        self, argv: Sequence[str], sink: Callable[[bytes], None], *, stdin: bytes = b"",
        deadline: Deadline,
    ) -> tuple[int, bytes]:
        with self._channel(argv, deadline):
            return self.conn.stream(argv, sink, stdin=stdin, deadline=deadline)

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
class _Slot:
    lock: threading.Lock = field(default_factory=threading.Lock)
    conn: PooledConnection | None = None
    used: float = 0.0
    failure: errors.SSHError | None = None
    failed_at: float = 0.0


class Pool:
    def __init__(self, metrics: Metrics, *, max_channels: int = 8,
                 connector: Connector = connect_pooled) -> None:
        self.max_channels = max_channels
        self._metrics = metrics
        self._connector = connector
        self._slots: dict[str, _Slot] = {}
        self._lock = threading.Lock()

    @contextmanager
    def open(
        self, target: Target, credentials: Credentials, *, deadline: Deadline
    ) -> Iterator[PooledConnection]:
        """The pooled connection for this target and credential set; dropped on SSH errors."""
        key = pool_key(target, credentials)
        with self._lock:
            slot = self._slots.setdefault(key, _Slot())
            slot.used = time.monotonic()
        if not slot.lock.acquire(timeout=deadline.left()):
            raise errors.ClusterUnreachable(target.host, f"connecting to {target.host} stalled")
        try:
            if slot.conn is None or not slot.conn.conn.alive:
                slot.conn = self._reopen(slot, target, credentials, key, deadline)
            conn = slot.conn
        finally:
            slot.lock.release()
        try:
            yield conn
        except errors.SSHError as err:
            if not isinstance(err, errors.CommandTimeout) or not conn.conn.alive:
                self._drop(slot, conn)
            raise

    def _reopen(
        self, slot: _Slot, target: Target, credentials: Credentials, key: str,
        deadline: Deadline,
    ) -> PooledConnection:
        """A new connection, or the failure of the last attempt while it is recent."""
        if slot.failure is not None and time.monotonic() - slot.failed_at < FAILED_SECONDS:
            raise slot.failure
        cluster = f"{target.host}:{target.port}"
        try:
            conn = self._connector(target, credentials, deadline)
        except errors.SSHError as err:
            # A copy without the traceback, which would keep every frame of the attempt alive.
            slot.failure, slot.failed_at = type(err)(err.host, err.message), time.monotonic()
            self._metrics.ssh_connect(cluster, ok=False)
            raise
        slot.failure = None
        self._metrics.ssh_connect(cluster, ok=True)
        return PooledConnection(conn, key, self.max_channels, self._metrics)

    def _drop(self, slot: _Slot, conn: PooledConnection) -> None:
        with slot.lock:
            if slot.conn is conn:
                slot.conn = None
        conn.conn.close()

    def evict_idle(self, idle_seconds: float) -> int:
        """Close the connections no call has opened for ``idle_seconds``, and forget the
        clusters no connection is left to; how many connections closed."""
        cutoff = time.monotonic() - idle_seconds
        with self._lock:
            idle = {key: slot for key, slot in self._slots.items() if slot.used < cutoff}
            for key in idle:
                del self._slots[key]
            kept = {slot.conn.cluster for slot in self._slots.values() if slot.conn}
        for slot in idle.values():
            if slot.conn is not None:
                slot.conn.conn.close()
                if slot.conn.cluster not in kept:
                    self._metrics.forget_cluster(slot.conn.cluster)
        return len(idle)

    def __len__(self) -> int:
        return len(self._slots)

    def close(self) -> None:
        with self._lock:
            slots = list(self._slots.values())
            self._slots.clear()
        for slot in slots:
            if slot.conn is not None:
                slot.conn.conn.close()
