"""SSH connections shared across hook calls: one per (host, port, whole credential set).

A connection is reused by every call whose BatchJob has the same host, port and credential
fingerprint (username, key or password, passphrase, known_hosts) — never across different
credential sets. Each connection carries at most ``max_channels`` concurrent commands, below
OpenSSH's default ``MaxSessions 10``; a dead connection is dropped and the next call
reconnects. Connecting is single-flight per key: concurrent calls wait for one handshake.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from hooks import metrics
from hooks.core.secret import Credentials
from hooks.ssh import errors
from hooks.ssh.client import Completed, Connection, Target, connect


class Limited:
    """A pooled connection: commands wait for a free channel (up to their own deadline)."""

    def __init__(self, conn: Connection, key: str, channels: threading.BoundedSemaphore) -> None:
        self.conn = conn
        self.key = key
        """The pool key: host, port and credential fingerprint; shared answers are keyed by it."""
        self.target = conn.target
        self._channels = channels

    def run(self, argv: Sequence[str], *, stdin: bytes = b"", timeout: float) -> Completed:
        with self._channel(timeout) as left:
            return self.conn.run(argv, stdin=stdin, timeout=left)

    def stream(
        self, argv: Sequence[str], sink: Callable[[bytes], None], *, stdin: bytes = b"",
        timeout: float,
    ) -> tuple[int, bytes]:
        with self._channel(timeout) as left:
            return self.conn.stream(argv, sink, stdin=stdin, timeout=left)

    @contextmanager
    def _channel(self, timeout: float) -> Iterator[float]:
        started = time.monotonic()
        if not self._channels.acquire(timeout=timeout):
            raise errors.CommandTimeout(self.target.host,
                                        f"no free SSH channel to {self.target.host}")
        try:
            yield max(1.0, timeout - (time.monotonic() - started))
        finally:
            self._channels.release()


@dataclass
class _Slot:
    lock: threading.Lock = field(default_factory=threading.Lock)
    conn: Limited | None = None


class Pool:
    def __init__(self, *, max_channels: int = 8) -> None:
        self.max_channels = max_channels
        self._slots: dict[str, _Slot] = {}
        self._lock = threading.Lock()

    @contextmanager
    def open(
        self, target: Target, credentials: Credentials, *, timeout: float
    ) -> Iterator[Limited]:
        """The pooled connection for this target and credential set; dropped on SSH errors."""
        key = credentials.fingerprint(target.host, target.port,
                                      target.insecure_skip_host_key_check)
        with self._lock:
            slot = self._slots.setdefault(key, _Slot())
        if not slot.lock.acquire(timeout=timeout):
            raise errors.ClusterUnreachable(target.host, f"connecting to {target.host} stalled")
        try:
            if slot.conn is None or not slot.conn.conn.alive:
                slot.conn = self._connect(target, credentials, key, timeout)
            conn = slot.conn
        finally:
            slot.lock.release()
        try:
            yield conn
        except errors.SSHError as err:
            if not isinstance(err, errors.CommandTimeout) or not conn.conn.alive:
                self._drop(slot, conn)
            raise

    def _connect(
        self, target: Target, credentials: Credentials, key: str, timeout: float
    ) -> Limited:
        cluster = f"{target.host}:{target.port}"
        try:
            conn = connect(target, credentials, timeout=timeout)
        except errors.SSHError:
            metrics.SSH_CONNECTS.labels(cluster, "failed").inc()
            raise
        metrics.SSH_CONNECTS.labels(cluster, "ok").inc()
        return Limited(conn, key, threading.BoundedSemaphore(self.max_channels))

    def _drop(self, slot: _Slot, conn: Limited) -> None:
        with slot.lock:
            if slot.conn is conn:
                slot.conn = None
        conn.conn.close()

    def close(self) -> None:
        with self._lock:
            slots = list(self._slots.values())
            self._slots.clear()
        for slot in slots:
            if slot.conn is not None:
                slot.conn.conn.close()

