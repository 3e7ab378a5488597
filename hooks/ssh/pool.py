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
holds only what is in use; and it holds at most ``max_connections`` targets' connections: a
new one evicts the least recently used that no call holds (when every one is held, the pool
grows beyond the bound until they are given back, which the hook threads bound).

Jump hosts are pooled too: the connection to a jump host (keyed like a target, by its host,
port, host-key choice, credentials and its own jump hosts) carries the tunnels of every pooled
target behind it, with the same single-flight connect and failure memory. A target's
connection is alive only while its jump host's is; a jump host's connection stays open as long
as a pooled target routes through it, and closes with the last of them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol

from hooks.core.sites.secret import Credentials
from hooks.deadline import Deadline
from hooks.metrics import Metrics
from hooks.ssh import errors
from hooks.ssh.client import Connection, Remote, Target
from hooks.ssh.login import connect_leg, jump_target
from hooks.ssh.pool_keys import pool_key, route_keys
from hooks.ssh.slots import Failed, HopSlot, PooledConnection, TargetSlot

Connector = Callable[[Target, Credentials, Deadline, Connection | None, str | None], Connection]
"""Opens one leg of a route: ``(target, credentials, deadline, via, toward)`` as
``hooks.ssh.login.connect_leg`` takes them."""
Address = tuple[str, int, tuple[str, ...]]
"""A host, its port, and the pool keys of the jump hosts it is reached through."""


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


class Pool:
    def __init__(self, metrics: Metrics, *, max_channels: int = 8, max_connections: int = 200,
                 connector: Connector = connect_pooled) -> None:
        self.max_channels = max_channels
        self.max_connections = max_connections
        self._metrics = metrics
        self._connector = connector
        self._slots: dict[str, TargetSlot] = {}
        self._hops: dict[str, HopSlot] = {}
        self._unreachable: dict[Address, Failed] = {}
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
            evicted = self._make_room() if key not in self._slots else {}
            slot = self._slots.setdefault(key, TargetSlot())
            slot.used, slot.route = time.monotonic(), route
            slot.users += 1
            hops = self._unrouted_hops()
        try:
            self._close(evicted, hops)
            yield from self._opened(slot, target, credentials, key, deadline)
        finally:
            with self._lock:
                slot.users -= 1

    def _opened(
        self, slot: TargetSlot, target: Target, credentials: Credentials, key: str,
        deadline: Deadline,
    ) -> Iterator[PooledConnection]:
        if not slot.lock.acquire(timeout=deadline.left()):
            raise errors.ClusterUnreachable(target.host, f"connecting to {target.host} stalled")
        try:
            if slot.pooled is None or not slot.pooled.connection.alive:
                if slot.pooled is not None:
                    slot.pooled.connection.close()  # its jump host's connection died under it
                    slot.pooled = None
                slot.pooled = self._reopen(slot, target, credentials, key, deadline)
            pooled = slot.pooled
        finally:
            slot.lock.release()
        try:
            yield pooled
        except errors.SSHError as err:
            if not isinstance(err, errors.CommandTimeout) or not pooled.connection.alive:
                self._drop(slot, pooled)
            raise

    def _make_room(self) -> dict[str, TargetSlot]:
        """Under the lock, with the pool full: the least recently used slot no call holds,
        taken out of the pool (none when every slot is held)."""
        if len(self._slots) < self.max_connections:
            return {}
        idle = [(slot.used, key) for key, slot in self._slots.items() if not slot.users]
        if not idle:
            return {}
        _, key = min(idle)
        return {key: self._slots.pop(key)}

    def _unrouted_hops(self) -> dict[str, HopSlot]:
        """Under the lock: the jump hosts' slots no pooled target routes through any more,
        taken out of the pool."""
        routed = {hop for slot in self._slots.values() for hop in slot.route}
        unused = {key: slot for key, slot in self._hops.items() if key not in routed}
        for key in unused:
            del self._hops[key]
        return unused

    def _close(self, slots: dict[str, TargetSlot], hops: dict[str, HopSlot]) -> None:
        """Close the connections of slots taken out of the pool; forget the clusters no
        connection is left to."""
        with self._lock:
            kept = {slot.pooled.cluster for slot in self._slots.values() if slot.pooled}
        for slot in slots.values():
            if slot.pooled is not None:
                slot.pooled.connection.close()
                if slot.pooled.cluster not in kept:
                    self._metrics.forget_cluster(slot.pooled.cluster)
        for hop_slot in hops.values():
            if hop_slot.hop is not None:
                hop_slot.hop.close()

    def _reopen(
        self, slot: TargetSlot, target: Target, credentials: Credentials, key: str,
        deadline: Deadline,
    ) -> PooledConnection:
        """A new connection, or the failure of the last attempt while it is recent."""

        def connect() -> Connection:
            via = self._jump_host(target, len(target.jump) - 1, deadline) if target.jump else None
            return self._connector(target, credentials, deadline, via, None)

        cluster = target.cluster
        try:
            connection = self._connect(slot, (target.host, target.port, slot.route),
                                       target.host, connect)
        except errors.SSHError as err:
            # A key the Secret holds but that cannot be used fails before it is offered to
            # any host: no answer of the host's, unlike a refused login.
            self._metrics.ssh_connect(cluster, ok=False,
                                      refused=not isinstance(err, errors.ClusterUnreachable),
                                      invalid_secret=isinstance(err, errors.BadCredentials))
            raise
        self._metrics.ssh_connect(cluster, ok=True)
        return PooledConnection(connection, key, self.max_channels, self._metrics)

    def _jump_host(self, target: Target, number: int, deadline: Deadline) -> Connection:
        """The pooled connection to the target's ``number``-th jump host, opened (through the
        ones before it) if need be. Errors carry the target's host."""
        hop = jump_target(target, number)
        jump = target.jump[number]
        key = pool_key(hop, jump.credentials)
        with self._lock:
            slot = self._hops.setdefault(key, HopSlot())
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
        self, login: Failed, address: Address, host: str, connect: Callable[[], Connection]
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
                self._unreachable.setdefault(address, Failed()).failed(err)
            raise
        except errors.SSHError as err:
            login.failed(err)
            raise
        login.failure = None
        return conn

    def _drop(self, slot: TargetSlot, pooled: PooledConnection) -> None:
        with slot.lock:
            if slot.pooled is pooled:
                slot.pooled = None
        pooled.connection.close()

    def evict_idle(self, idle_seconds: float) -> int:
        """Close the connections no call has opened for ``idle_seconds`` and the jump hosts'
        connections no pooled target routes through any more, and forget the clusters no
        connection is left to; how many connections closed."""
        cutoff = time.monotonic() - idle_seconds
        with self._lock:
            idle = {key: slot for key, slot in self._slots.items()
                    if slot.used < cutoff and not slot.users}
            for key in idle:
                del self._slots[key]
            unused = self._unrouted_hops()
            for address, memory in list(self._unreachable.items()):
                if memory.recent_failure("") is None:
                    del self._unreachable[address]
        self._close(idle, unused)
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
            if slot.pooled is not None:
                slot.pooled.connection.close()
        for hop_slot in hops:
            if hop_slot.hop is not None:
                hop_slot.hop.close()
