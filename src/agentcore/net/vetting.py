"""Address vetting: which resolved addresses a tool may dial.

The list below is deliberately wider than ``ipaddress``'s ``is_global``:
Python 3.11 calls multicast "global" and does not look inside IPv6 forms
that embed an IPv4 address (``::ffff:127.0.0.1`` is not "loopback"), so we
unwrap every embedding and check the embedded address too.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable

import anyio

from agentcore.net.hosts import HostPattern

__all__ = [
    "AddressRefused",
    "IPAddress",
    "allowed_literals_for",
    "is_forbidden_address",
    "matching_pattern",
    "resolve_and_vet",
    "vet_target",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_V4_FORBIDDEN = tuple(
    ipaddress.IPv4Network(n)
    for n in (
        "0.0.0.0/8",  # "this network"
        "10.0.0.0/8",
        "100.64.0.0/10",  # carrier-grade NAT
        "127.0.0.0/8",
        "169.254.0.0/16",  # link-local, includes the 169.254.169.254 metadata service
        "172.16.0.0/12",
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",
        "192.88.99.0/24",  # deprecated 6to4 relay anycast
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, includes broadcast
    )
)

_V6_FORBIDDEN = tuple(
    ipaddress.IPv6Network(n)
    for n in (
        "::/96",  # unspecified, loopback and deprecated IPv4-compatible addresses
        "64:ff9b:1::/48",  # local-use NAT64
        "100::/64",  # discard
        "2001::/23",  # IETF protocol assignments; includes Teredo (2001::/32), refused outright
        "2001:db8::/32",  # documentation
        "fc00::/7",  # unique local, includes the fd00:ec2::254 metadata service
        "fe80::/10",  # link-local
        "fec0::/10",  # deprecated site-local
        "ff00::/8",  # multicast
    )
)

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_SIXTOFOUR = ipaddress.IPv6Network("2002::/16")


class AddressRefused(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """Every IPv4 address that *ip* carries and that some path would reach."""
    found: list[ipaddress.IPv4Address] = []
    if ip.ipv4_mapped is not None:
        found.append(ip.ipv4_mapped)
    if ip in _NAT64:
        found.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    if ip.sixtofour is not None:
        found.append(ip.sixtofour)
    if ip.teredo is not None:
        found.extend(ip.teredo)
    return found


def _v4_forbidden(ip: ipaddress.IPv4Address) -> bool:
    if any(ip in net for net in _V4_FORBIDDEN):
        return True
    # Belt and braces against ranges added to the registries after this list.
    return not ip.is_global or ip.is_multicast or ip.is_reserved


def is_forbidden_address(ip: IPAddress) -> bool:
    """True for anything that is not a plain public unicast address."""
    if isinstance(ip, ipaddress.IPv4Address):
        return _v4_forbidden(ip)
    if not isinstance(ip, ipaddress.IPv6Address):
        return True  # fail closed on anything unexpected
    if ip.scope_id:
        return True
    embedded = _embedded_ipv4(ip)
    if any(_v4_forbidden(v4) for v4 in embedded):
        return True
    if ip.ipv4_mapped is not None or ip in _NAT64 or ip in _SIXTOFOUR:
        # Translation prefixes: the embedded IPv4 address alone decides.
        return False
    if any(ip in net for net in _V6_FORBIDDEN):
        return True
    return not ip.is_global or ip.is_multicast or ip.is_reserved or ip.is_site_local


def _normalise(ip: IPAddress) -> IPAddress:
    # Dial (and compare) IPv4-mapped results as the IPv4 address they denote,
    # matching canonical_host().
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _literal(host: str) -> IPAddress | None:
    try:
        return _normalise(ipaddress.ip_address(host))
    except ValueError:
        return None


RESOLVE_TIMEOUT_S = 10.0  # below web_fetch's and web_search's own timeouts, so theirs stay the outer bound


async def resolve_and_vet(
    host: str, port: int, *, allowed_literals: frozenset[str]
) -> list[IPAddress]:
    """Resolve canonical *host* and return the addresses the caller must dial.

    Refuses the whole name when any answer is forbidden and is not itself
    listed in *allowed_literals* (canonical IP texts that the manifest names
    literally for this port).  One bad answer refuses all: a resolver that
    mixes a public and a private address is an attack, not a fallback.
    """
    literal = _literal(host)
    if literal is not None:
        candidates: list[IPAddress] = [literal]
    else:
        try:
            # Bounded: a resolver that never answers would hold the caller (a proxy slot, a fetch) until the
            # system gives up, which it may never do.
            with anyio.fail_after(RESOLVE_TIMEOUT_S):
                infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except TimeoutError:
            raise AddressRefused("resolve_failed", f"the host name did not resolve within {RESOLVE_TIMEOUT_S:g} s") from None
        except (OSError, UnicodeError):
            raise AddressRefused("resolve_failed", "the host name did not resolve") from None
        candidates = []
        for family, _type, _proto, _canon, sockaddr in infos:
            if family not in (socket.AF_INET, socket.AF_INET6):
                continue
            address = sockaddr[0]
            if not isinstance(address, str) or "%" in address:
                raise AddressRefused("forbidden_address", "the host resolved to a scoped address")
            if family == socket.AF_INET6 and len(sockaddr) >= 4 and sockaddr[3]:
                raise AddressRefused("forbidden_address", "the host resolved to a scoped address")
            ip = _literal(address)
            if ip is None:
                raise AddressRefused("resolve_failed", "the resolver returned an unreadable address")
            if ip not in candidates:
                candidates.append(ip)
        if not candidates:
            raise AddressRefused("resolve_failed", "the host name did not resolve")
    for ip in candidates:
        if is_forbidden_address(ip) and str(ip) not in allowed_literals:
            raise AddressRefused(
                "forbidden_address",
                "the host resolves to a private, loopback or otherwise non-public address "
                "that the manifest does not list literally",
            )
    return candidates


# --------------------------------------------------------------------------
# the combined check used by web_fetch and the filtering proxy


def matching_pattern(patterns: Iterable[HostPattern], host: str, port: int) -> HostPattern | None:
    """The most specific pattern admitting canonical (host, port), if any."""
    best: HostPattern | None = None
    for pattern in patterns:
        if pattern.matches(host, port) and (best is None or pattern.specificity() > best.specificity()):
            best = pattern
    return best


def allowed_literals_for(patterns: Iterable[HostPattern], port: int) -> frozenset[str]:
    """Literal addresses the manifest names for *port*: only these may be
    private or loopback (``127.0.0.1:8123`` allows 127.0.0.1 on 8123 only)."""
    return frozenset(
        p.literal_ip for p in patterns if p.literal_ip is not None and p.port_matches(port)
    )


async def vet_target(host: str, port: int, patterns: tuple[HostPattern, ...]) -> list[IPAddress]:
    """Pattern match, then resolve and vet; returns the addresses to dial.

    *host* must already be canonical.  An empty pattern list admits nothing.
    """
    if matching_pattern(patterns, host, port) is None:
        raise AddressRefused("host_not_allowed", "the host and port are not listed in net.hosts")
    return await resolve_and_vet(host, port, allowed_literals=allowed_literals_for(patterns, port))
