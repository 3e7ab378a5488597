"""Object-store endpoints: which ones a BatchJob may name in ``spec.storage.s3.endpoint``, and
the allow-lists that let it name others. Pure: no I/O (``ipaddress`` only).

The mover Pods fetch whatever the endpoint answers and write it into the job's directory on
the cluster, and with path-style addressing a BatchJob chooses every path it asks for. So by
default an endpoint must name a store on the public Internet: one whose host is an address
that is not global unicast (loopback, link-local — a cloud's metadata service —, private,
shared, unique-local, multicast, unspecified, reserved, or an IPv4-mapped form of those), an
address in any spelling but its canonical one (``2130706433``, ``0x7f000001``, ``0177.0.0.1``,
``127.1``: the resolver reads them all), or a name of the cluster's own (a single label, which
a Pod's DNS search path turns into a Service; ``.svc``, ``.cluster.local``, ``.local``,
``.internal`` and the like; a Service of a namespace every cluster has, ``kubernetes.default``)
is refused. The installation (``HPCBRIDGE_S3_ENDPOINTS``) and a BatchCluster
(``spec.storage.allowedEndpoints``, for the BatchJobs routed through it) allow the stores their
users may use: an endpoint exactly on either list (scheme, host, port) is accepted, private or
not. The mover checks the address it actually connects to as well (``hooks.pods.movers.peer``),
by ``address_kind``, so that a public name that resolves inward is caught too.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass

from hooks.core.values.fields import SpecError
from hooks.core.values.text import shown

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

FORM = re.compile(r"(https?)://([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::([0-9]{1,5}))?/?")
"""An endpoint as the CRD allows it: a scheme, a host (a name, or an IPv6 address in
brackets) and an optional port, without user, path or query."""
MAX_LENGTH = 2048
DEFAULT_PORTS = {"http": 80, "https": 443}
NUMERIC_LABEL = re.compile(r"[0-9]+|0[xX][0-9a-fA-F]*")
"""A last label that makes a host an IPv4 address to the resolver, whatever the rest."""
AT_PART = re.compile(r"0[xX][0-9a-fA-F]*|0[0-7]*|[1-9][0-9]*")
"""One part of an address as inet_aton reads it: hexadecimal, octal or decimal."""
INTERNAL_SUFFIXES = (
    "svc", "local", "internal", "localhost", "localdomain", "lan", "home", "corp", "intranet",
    "private", "arpa", "default", "kube-system", "kube-public", "kube-node-lease",
)
"""Last labels of names that lead inside: a cluster's Services (``<service>.<namespace>.svc``,
``.cluster.local``, and ``<service>.<namespace>`` for the namespaces every cluster has), mDNS
(``.local``), names a cloud or a network keeps to itself (``.internal``, ``.lan``, ``.corp``...)
and ``localhost`` itself."""
SHARED = ipaddress.IPv4Network("100.64.0.0/10")
THIS_NETWORK = ipaddress.IPv4Network("0.0.0.0/8")
SPECIAL_V4 = (ipaddress.IPv4Network("192.0.0.0/24"), ipaddress.IPv4Network("192.88.99.0/24"))
"""IETF protocol assignments and the 6to4 relays, whatever the Python's ``is_global`` says."""
UNIQUE_LOCAL = ipaddress.IPv6Network("fc00::/7")
NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
LOCAL_NAT64 = ipaddress.IPv6Network("64:ff9b:1::/48")
GLOBAL_UNICAST_V6 = ipaddress.IPv6Network("2000::/3")
PRIVATE_V4 = (ipaddress.IPv4Network("10.0.0.0/8"), ipaddress.IPv4Network("172.16.0.0/12"),
              ipaddress.IPv4Network("192.168.0.0/16"))
ALLOW_LISTS = ("HPCBRIDGE_S3_ENDPOINTS on the hook server, or the BatchCluster's "
               "spec.storage.allowedEndpoints")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """An endpoint as it is compared with the allow-lists: the scheme, the host in lower case
    (an IPv6 address without its brackets) and the port, the scheme's when none is written."""

    scheme: str
    host: str
    port: int


def parse(text: object, where: str) -> Endpoint:
    """``text`` as an endpoint, or ``SpecError`` naming ``where``: the form, the port, and an
    address written in any spelling but its canonical one."""
    found = FORM.fullmatch(text) if isinstance(text, str) and len(text) <= MAX_LENGTH else None
    if found is None:
        raise SpecError(f"{where} must be an http:// or https:// URL of a host and an optional "
                        f"port, without a path, not {shown(text)}.")
    scheme, host, port = found.group(1), found.group(2).lower(), found.group(3)
    if port is not None and not 0 < int(port) < 65536:
        raise SpecError(f"{where}: port {port} is not a TCP port.")
    if host.startswith("["):
        host = _ipv6(host[1:-1], where)
    elif NUMERIC_LABEL.fullmatch(host.removesuffix(".").rpartition(".")[2]):
        _ipv4(host, where)
    return Endpoint(scheme, host, DEFAULT_PORTS[scheme] if port is None else int(port))


def parse_list(values: Iterable[object], where: str) -> tuple[Endpoint, ...]:
    """An allow-list's entries, each checked as an endpoint (private ones are what it is for)."""
    return tuple(parse(value, f"{where}[{i}]") for i, value in enumerate(values))


def refusal(endpoint: Endpoint, where: str) -> str:
    """Why ``endpoint`` may not be named unless an allow-list names it; empty when it may."""
    what = _inward(endpoint.host)
    if not what:
        return ""
    return (f"{where} names {what}, which the mover Pods reach only when the endpoint is "
            f"allowed ({ALLOW_LISTS}); name the store by a public name, or have it allowed.")


def address_kind(address: Address) -> str:
    """What kind of address ``address`` is when it is not global unicast (``loopback``,
    ``link-local``, ``private``...); empty when it is."""
    if isinstance(address, ipaddress.IPv6Address):
        return _kind_v6(address)
    if address in THIS_NETWORK:
        return "unspecified"
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if address in SHARED:
        return "shared (carrier-grade NAT)"
    if address.is_multicast:
        return "multicast"
    if address.is_reserved:
        return "reserved"
    if any(address in network for network in PRIVATE_V4):
        return "private"
    if not address.is_global or any(address in network for network in SPECIAL_V4):
        return "special-purpose"
    return ""


def _kind_v6(address: ipaddress.IPv6Address) -> str:
    mapped = address.ipv4_mapped
    if mapped is not None:
        kind = address_kind(mapped)
        return f"IPv4-mapped {kind}" if kind else ""
    if address in NAT64:
        kind = address_kind(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
        return f"NAT64-translated {kind}" if kind else ""
    if address.sixtofour is not None:
        kind = address_kind(address.sixtofour)
        return f"6to4 {kind}" if kind else ""
    for kind, test in (("unspecified", address.is_unspecified),
                       ("loopback", address.is_loopback),
                       ("link-local", address.is_link_local),
                       ("site-local", address.is_site_local),
                       ("unique-local", address in UNIQUE_LOCAL),
                       ("multicast", address.is_multicast),
                       ("special-purpose", address in LOCAL_NAT64 or address.teredo is not None),
                       ("reserved", address not in GLOBAL_UNICAST_V6),
                       ("special-purpose", not address.is_global)):
        if test:
            return kind
    return ""


def _inward(host: str) -> str:
    """What ``host`` (as ``parse`` keeps it) names when it leads inside; empty otherwise."""
    if ":" in host:
        kind = address_kind(ipaddress.IPv6Address(host))
        return f"the {kind} address {host}" if kind else ""
    name = host.removesuffix(".")
    if NUMERIC_LABEL.fullmatch(name.rpartition(".")[2]):
        kind = address_kind(ipaddress.IPv4Address(name))
        return f"the {kind} address {name}" if kind else ""
    if "." not in name:
        return (f"the single-label name {shown(name)} (a Pod's DNS search path makes it a "
                "Service of the cluster)")
    last = name.rpartition(".")[2]
    if last in INTERNAL_SUFFIXES or name.endswith(".home.arpa"):
        return f"the cluster-internal name {shown(name)} (.{last})"
    return ""


def _ipv6(text: str, where: str) -> str:
    try:
        address = ipaddress.IPv6Address(text)
    except ValueError:
        raise SpecError(f"{where}: [{text}] is not an IPv6 address.") from None
    mapped = address.ipv4_mapped
    canonical = f"::ffff:{mapped}" if mapped is not None else address.compressed
    if text != canonical:
        raise SpecError(f"{where}: [{text}] is {address} written in another form than its "
                        f"canonical one, [{canonical}]; it is refused.")
    return canonical


def _ipv4(host: str, where: str) -> None:
    """Refuse an IPv4 address in any spelling but ``a.b.c.d`` (decimal, no leading zero, no
    trailing dot): the resolver reads ``2130706433``, ``0x7f000001``, ``0177.0.0.1`` and
    ``127.1`` as 127.0.0.1."""
    try:
        if str(ipaddress.IPv4Address(host)) == host:
            return
    except ValueError:
        pass
    read = _as_resolver_reads(host.removesuffix("."))
    also = f" (the resolver reads it as {read})" if read is not None else ""
    raise SpecError(f"{where}: {shown(host)} is a numeric address in another form than a.b.c.d"
                    f"{also}; it is refused.")


def _as_resolver_reads(text: str) -> ipaddress.IPv4Address | None:
    """``text`` as inet_aton reads it (one to four parts, each hexadecimal, octal or decimal,
    the last filling the bytes left), or None when it reads no address."""
    parts = text.split(".")
    if len(parts) > 4 or not all(AT_PART.fullmatch(part) for part in parts):
        return None
    values = [int(p[2:] or "0", 16) if p[:2].lower() == "0x" else int(p, 8 if p[0] == "0" else 10)
              for p in parts]
    *head, last = values
    if any(value > 255 for value in head) or last >= 256 ** (4 - len(head)):
        return None
    number = 0
    for value in head:
        number = number * 256 + value
    return ipaddress.IPv4Address(number * 256 ** (4 - len(head)) + last)
