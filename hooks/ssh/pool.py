"""SSH connections shared across hook calls: one per (host, port, whole credential set, route).

A connection is reused by every call whose BatchJob has the same host, port and credential
fingerprint (username, key or password, passphrase, known_hosts, certificate) and the same jump
hosts with the same credentials — never across different credential sets or routes. Each
connection carries at most ``max_channels`` concurrent commands, below OpenSSH's default
``MaxSessions 10``; a dead connection is dropped and the next call reconnects. Connecting is
single-flight per key: concurrent calls wait for one handshake, and a failed one answers every
call for the next ``FAILED_SECONDS`` at once (a blackholed host would otherwise hold a thread
per sync for the whole connect timeout). A host that did not answer as an SSH server before
any login (``errors.HostUnreachable``) is remembered for every credential set of the same
route as well: one BatchJob's wait for a dead login node answers the others at once.
``evict_idle`` closes connections nobody used for a while (a rotated key's, say), so the pool
holds only what is in use.

Jump hosts are pooled too: the connection to a jump host (keyed like a target, by its host,
port, host-key choice, credentials and its own jump hosts) carries the tunnels of every pooled
target behind it, with the same single-flight connect and failure memory. A target's
connection is alive only while its jump host's is; a jump host's connection stays open as long
as a pooled target routes through it, and closes with the last of them.
"""

from __future__ import annotations

import hashlib
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
from hooks.ssh.login import connect_leg, jump_target

Connector = Callable[[Target, Credentials, Deadline, Connection | None, str | None], Connection]
"""Opens one leg of a route: ``(target, credentials, deadline, via, toward)`` as
``hooks.ssh.login.connect_leg`` takes them."""
FAILED_SECONDS = 10.0
"""How long a failed connect answers for its key without another attempt."""
Address = tuple[str, int, tuple[str, ...]]
"""A host, its port, and the pool keys of the jump hosts it is reached through."""


def pool_key(target: Target, credentials: Credentials) -> str:
    """The key of a pooled connection and of the answers shared over it: host, port, the
    host-key choice, the whole credential set and the route, each jump host's host, port,
    host-key choice and credentials included."""
    own = credentials.fingerprint(target.host, target.port,
                                  target.insecure_skip_host_key_check)
    if not target.jump:
        return own
    route = tuple(jump.credentials.fingerprint(jump.host, jump.port,
                                               jump.insecure_skip_host_key_check)
                  for jump in target.jump)
    return hashlib.sha256(repr((own, *route)).encode()).hexdigest()[:32]


def route_keys(target: Target) -> tuple[str, ...]:
    """The pool keys of the connections to the target's jump hosts, first to last."""
    return tuple(pool_key(jump_target(target, number), jump.credentials)
                 for number, jump in enumerate(target.jump))


class Connections(Protocol):
    """What the hooks need of a pool (``Pool``, or a stand-in in tests)."""

    def open(
        self, target: Target, credentials: Credentials, *, deadline: Deadline
    ) -> AbstractContextManager[Remote]: ...

    def evict_idle(self, idle_seconds: float) -> int: ...

    def close(self) -> None: ...


def connect_pooled(
    target: Target, credentials: Credentials, deadline: Deadline, via: Connection | None,
    toward: str | None,
) -> Connection:
    return connect_leg(target, credentials, deadline=deadline, via=via, toward=toward)


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
class _Failed:
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
class _Slot(_Failed):
    """One key's single-flight connect, its connection, and its login's last failure."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    used: float = 0.0
    conn: PooledConnection | None = None
    route: tuple[str, ...] = ()
    """The keys of the jump host connections the target is reached through."""


@dataclass
class _HopSlot(_Failed):
    """A jump host's single-flight connect, its connection, and its login's last failure (it
    stays as long as a pooled target routes through it)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    hop: Connection | None = None
    """The connection to a jump host, tunnelling for the targets behind it."""


class Pool:
    def __init__(self, metrics: Metrics, *, max_channels: int = 8,
                 connector: Connector = connect_pooled) -> None:
        self.max_channels = max_channels
        self._metrics = metrics
        self._connector = connector
        self._slots: dict[str, _Slot] = {}
        self._hops: dict[str, _HopSlot] = {}
        self._unreachable: dict[Address, _Failed] = {}
        """By host, port and route (its jump hosts' keys): the last pre-login failure, for
        every login to that host; a slot remembers its own login's other failures."""
        self._lock = threading.Lock()

    @contextmanager
    def open(
        self, target: Target, credentials: Credentials, *, deadline: Deadline
    ) -> Iterator[PooledConnection]:
        """The pooled connection for this target and credential set; dropped on SSH errors."""
        key = pool_key(target, credentials)
        route = route_keys(target)
        with self._lock:
            slot = self._slots.setdefault(key, _Slot())
            slot.used, slot.route = time.monotonic(), route
        if not slot.lock.acquire(timeout=deadline.left()):
            raise errors.ClusterUnreachable(target.host, f"connecting to {target.host} stalled")
        try:
            if slot.conn is None or not slot.conn.conn.alive:
                if slot.conn is not None:
                    slot.conn.conn.close()  # its jump host's connection died under it
                    slot.conn = None
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

        def connect() -> Connection:
            via = self._jump_host(target, len(target.jump) - 1, deadline) if target.jump else None
            return self._connector(target, credentials, deadline, via, None)

        cluster = f"{target.host}:{target.port}"
        try:
            conn = self._connect(slot, (target.host, target.port, slot.route), target.host,
                                 connect)
        except errors.SSHError as err:
            refused = not isinstance(err, errors.ClusterUnreachable)
            self._metrics.ssh_connect(cluster, ok=False, refused=refused)
            raise
        self._metrics.ssh_connect(cluster, ok=True)
        return PooledConnection(conn, key, self.max_channels, self._metrics)

    def _jump_host(self, target: Target, number: int, deadline: Deadline) -> Connection:
        """The pooled connection to the target's ``number``-th jump host, opened (through the
        ones before it) if need be. Errors carry the target's host."""
        hop = jump_target(target, number)
        jump = target.jump[number]
        key = pool_key(hop, jump.credentials)
        with self._lock:
            slot = self._hops.setdefault(key, _HopSlot())
        # Locks are taken from a target towards its first jump host only: no cycle.
        if not slot.lock.acquire(timeout=deadline.left()):
            raise errors.ClusterUnreachable(
                target.host, f"connecting to jump host {jump.host} stalled")
        try:
            if slot.hop is not None and slot.hop.alive:
                return slot.hop
            if slot.hop is not None:
                slot.hop.close()
                slot.hop = None

            def connect() -> Connection:
                via = self._jump_host(target, number - 1, deadline) if number else None
                return self._connector(hop, jump.credentials, deadline, via, target.host)

            slot.hop = self._connect(slot, (hop.host, hop.port, route_keys(hop)), target.host,
                                     connect)
            return slot.hop
        finally:
            slot.lock.release()

    def _connect(
        self, login: _Failed, address: Address, host: str, connect: Callable[[], Connection]
    ) -> Connection:
        """``connect()``, or, while it is recent, the last failure of this login or of any
        login to the host at ``address`` that did not answer as an SSH server
        (``errors.HostUnreachable``), for a call to ``host``; a failure is remembered where it
        belongs."""
        with self._lock:
            unanswered = self._unreachable.get(address)
        failure = login.recent_failure(host) or (
            unanswered.recent_failure(host) if unanswered else None)
        if failure is not None:
            raise failure
        try:
            conn = connect()
        except errors.HostUnreachable as err:
            with self._lock:
                self._unreachable.setdefault(address, _Failed()).failed(err)
            raise
        except errors.SSHError as err:
            login.failed(err)
            raise
        login.failure = None
        return conn

    def _drop(self, slot: _Slot, conn: PooledConnection) -> None:
        with slot.lock:
            if slot.conn is conn:
                slot.conn = None
        conn.conn.close()

    def evict_idle(self, idle_seconds: float) -> int:
        """Close the connections no call has opened for ``idle_seconds`` and the jump hosts'
        connections no pooled target routes through any more, and forget the clusters no
        connection is left to; how many connections closed."""
        cutoff = time.monotonic() - idle_seconds
        with self._lock:
            idle = {key: slot for key, slot in self._slots.items() if slot.used < cutoff}
            for key in idle:
                del self._slots[key]
            routed = {hop for slot in self._slots.values() for hop in slot.route}
            unused = {key: slot for key, slot in self._hops.items() if key not in routed}
            for key in unused:
                del self._hops[key]
            kept = {slot.conn.cluster for slot in self._slots.values() if slot.conn}
            for address, memory in list(self._unreachable.items()):
                if memory.recent_failure("") is None:
                    del self._unreachable[address]
        for slot in idle.values():
            if slot.conn is not None:
                slot.conn.conn.close()
                if slot.conn.cluster not in kept:
                    self._metrics.forget_cluster(slot.conn.cluster)
        for hop_slot in unused.values():
            if hop_slot.hop is not None:
                hop_slot.hop.close()
        return len(idle) + len(unused)

    def __len__(self) -> int:
        """How many targets the pool holds connections for (jump hosts not counted)."""
        return len(self._slots)

    @property
    def jump_hosts(self) -> int:
        """How many jump host connections the pool holds."""
        return len(self._hops)

    def close(self) -> None:
        with self._lock:
            slots = list(self._slots.values())
            hops = list(self._hops.values())
            self._slots.clear()
            self._hops.clear()
        for slot in slots:
            if slot.conn is not None:
                slot.conn.conn.close()
        for hop_slot in hops:
            if hop_slot.hop is not None:
                hop_slot.hop.close()
