"""The object store's address, checked on every connection the mover opens to it.

The hooks refuse endpoints that name an inward address or name (``hooks.core.spec.endpoints``),
but a public name may still resolve inward, now or at the next lookup (DNS rebinding), and a
Pod's DNS search path may turn a name into a Service of the cluster. So unless the endpoint is
on an allow-list (the hooks pass ``--endpoint-allowed``), every connection of the S3 client is
made by the classes below: right after the TCP connection is made, before TLS or any byte of a
request, the address the socket is actually connected to (``getpeername``) must be global
unicast, or the socket is closed and the run fails with ``StorageAccessDenied``, naming the
endpoint and the address. Checking the connected peer, not a lookup of the name, leaves no gap
between the check and the use.
"""

from __future__ import annotations

import ipaddress
import socket

from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from hooks.core.spec.endpoints import ALLOW_LISTS, address_kind
from hooks.core.values.reasons import Reason
from hooks.pods.movers.errors import MoveError


class PeerRefused(MoveError):
    """The object store's connection led to an address that is not global unicast."""


def check(sock: socket.socket, scheme: str, host: str, port: int) -> None:
    """Close ``sock`` and refuse it when the address it is connected to is not global
    unicast."""
    peer = sock.getpeername()
    text = str(peer[0]) if isinstance(peer, tuple) else str(peer)
    try:
        kind = address_kind(ipaddress.ip_address(text.partition("%")[0]))
    except ValueError:
        kind = "non-IP"
    if not kind:
        return
    sock.close()
    shown = f"[{host}]" if ":" in host else host
    raise PeerRefused(
        Reason.STORAGE_ACCESS_DENIED,
        f"The object store {scheme}://{shown}:{port} (spec.storage.s3.endpoint) is at the "
        f"{kind} address {text}; the mover reaches a store at an address that is not public "
        f"only when the endpoint is allowed ({ALLOW_LISTS}).")


class PublicHTTPConnection(HTTPConnection):
    """An HTTP connection to a global unicast address only."""

    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        check(sock, "http", self.host, self.port)
        return sock


class PublicHTTPSConnection(HTTPSConnection):
    """An HTTPS connection to a global unicast address only, checked before the handshake."""

    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        check(sock, "https", self.host, self.port)
        return sock


class PublicHTTPConnectionPool(HTTPConnectionPool):
    ConnectionCls = PublicHTTPConnection


class PublicHTTPSConnectionPool(HTTPSConnectionPool):
    ConnectionCls = PublicHTTPSConnection


POOLS: dict[str, type[HTTPConnectionPool]] = {
    "http": PublicHTTPConnectionPool, "https": PublicHTTPSConnectionPool}
"""urllib3's ``PoolManager.pool_classes_by_scheme`` for a store that must be public."""
