"""The connections of a registry resolution: TLS verified against the system's authorities and
the installation's own, and, unless the registry is one the BatchCluster lists, only to global
unicast addresses, checked right after the TCP connection and before the handshake (as the
movers check theirs, ``hooks.pods.movers.peer``). I/O: sockets.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
from typing import Any

from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPSConnection
from urllib3.connectionpool import HTTPSConnectionPool

from hooks.core.spec import endpoints
from hooks.registry.answers import RegistryError


class Inward(Exception):
    """A connection led to an address that is not global unicast; the client, which knows
    what it was asking, words it."""

    def __init__(self, kind: str, address: str) -> None:
        super().__init__(kind, address)
        self.kind, self.address = kind, address


class PublicConnection(HTTPSConnection):
    """An HTTPS connection to a global unicast address only, checked before the handshake."""

    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        peer = sock.getpeername()
        address = str(peer[0] if isinstance(peer, tuple) else peer).partition("%")[0]
        try:
            kind = endpoints.address_kind(ipaddress.ip_address(address))
        except ValueError:
            kind = "non-IP"
        if kind:
            sock.close()
            raise Inward(kind, address)
        return sock


class PublicPool(HTTPSConnectionPool):
    ConnectionCls = PublicConnection


class Adapter(HTTPAdapter):
    """requests' adapter with the resolution's TLS trust, without retries; a public one
    connects to global unicast addresses only."""

    def __init__(self, context: ssl.SSLContext, *, public: bool) -> None:
        self.context, self.public = context, public
        super().__init__()

    def init_poolmanager(self, connections: int, maxsize: int, block: bool = False,
                         **pool_kwargs: Any) -> None:
        pool_kwargs["ssl_context"] = self.context
        super().init_poolmanager(connections, maxsize, block, **pool_kwargs)
        if self.public:
            self.poolmanager.pool_classes_by_scheme = {"https": PublicPool}


def tls_context(ca_bundle: str | None) -> ssl.SSLContext:
    """The TLS trust: the system's certificate authorities (where a site installs its own
    registry's), and ``ca_bundle`` besides."""
    context = ssl.create_default_context()
    if not ca_bundle:
        return context
    try:
        context.load_verify_locations(cafile=ca_bundle)
    except OSError:
        raise RegistryError(f"The hook server's registry authorities ({ca_bundle}, "
                            "HPCBRIDGE_REGISTRY_CA) do not read as PEM certificates.",
                            retryable=False) from None
    return context
