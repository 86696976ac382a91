"""Address vetting: forbidden ranges, embedded IPv4, literal allowances."""

from __future__ import annotations

import ipaddress
import socket

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore.net.hosts import compile_host_pattern
from agentcore.net.vetting import (
    AddressRefused,
    allowed_literals_for,
    is_forbidden_address,
    resolve_and_vet,
    vet_target,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


FORBIDDEN = [
    "127.0.0.1", "127.255.255.254", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254",
    "169.254.0.1", "100.64.0.1", "100.127.255.254", "0.0.0.0", "0.1.2.3", "224.0.0.1", "239.255.255.250",
    "255.255.255.255", "240.0.0.1", "192.0.2.1", "198.18.0.1", "198.51.100.7", "203.0.113.9", "192.0.0.8",
    "::", "::1", "fe80::1", "fc00::1", "fd00:ec2::254", "ff02::1", "fec0::1", "2001:db8::1", "100::1",
    # IPv4 embedded in IPv6 (Python 3.11 does not call ::ffff:127.0.0.1 loopback)
    "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "::ffff:0.0.0.0",
    "::127.0.0.1", "::8.8.8.8",  # deprecated IPv4-compatible, refused wholesale
    "2002:7f00:1::", "2002:a9fe:a9fe::1", "2002:0a00:0001::",  # 6to4 of private space
    "64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "64:ff9b:1::8.8.8.8",  # NAT64 (local-use /48 always)
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo
]

ALLOWED = [
    "8.8.8.8", "1.1.1.1", "93.184.216.34", "100.63.255.255", "100.128.0.0", "172.32.0.1", "11.0.0.1",
    "2606:4700:4700::1111", "2001:4860:4860::8888", "::ffff:8.8.8.8", "2002:808:808::", "64:ff9b::808:808",
]


@pytest.mark.parametrize("text", FORBIDDEN)
def test_forbidden(text: str) -> None:
    assert is_forbidden_address(ipaddress.ip_address(text)) is True


@pytest.mark.parametrize("text", ALLOWED)
def test_public_addresses_allowed(text: str) -> None:
    assert is_forbidden_address(ipaddress.ip_address(text)) is False


def test_python_blind_spot_is_covered() -> None:
    mapped = ipaddress.IPv6Address("::ffff:127.0.0.1")
    # Whatever this Python says about the mapped form, we refuse it.
    assert is_forbidden_address(mapped)
    assert is_forbidden_address(ipaddress.IPv6Address("fe80::1%eth0"))


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_mapped_nat64_and_6to4_follow_the_embedded_ipv4(value: int) -> None:
    v4 = ipaddress.IPv4Address(value)
    expected = is_forbidden_address(v4)
    assert is_forbidden_address(ipaddress.IPv6Address(f"::ffff:{v4}")) == expected
    assert is_forbidden_address(ipaddress.IPv6Address((0x0064FF9B << 96) | value)) == expected
    assert is_forbidden_address(ipaddress.IPv6Address((0x2002 << 112) | (value << 80))) == expected


async def test_literal_loopback_refused_unless_listed() -> None:
    with pytest.raises(AddressRefused) as info:
        await resolve_and_vet("127.0.0.1", 8123, allowed_literals=frozenset())
    assert info.value.code == "forbidden_address"
    ok = await resolve_and_vet("127.0.0.1", 8123, allowed_literals=frozenset({"127.0.0.1"}))
    assert ok == [ipaddress.IPv4Address("127.0.0.1")]
    # the mapped spelling is the same address: listed means listed, unlisted means refused
    with pytest.raises(AddressRefused):
        await resolve_and_vet("::ffff:127.0.0.1", 8123, allowed_literals=frozenset())
    ok = await resolve_and_vet("::ffff:127.0.0.1", 8123, allowed_literals=frozenset({"127.0.0.1"}))
    assert ok == [ipaddress.IPv4Address("127.0.0.1")]
    with pytest.raises(AddressRefused):
        await resolve_and_vet("::1", 8123, allowed_literals=frozenset({"127.0.0.1"}))


async def test_name_resolving_to_loopback() -> None:
    # 'localhost' comes from /etc/hosts: a real resolution, no network needed.
    with pytest.raises(AddressRefused) as info:
        await resolve_and_vet("localhost", 80, allowed_literals=frozenset())
    assert info.value.code == "forbidden_address"
    answers = {str(a) for a in await resolve_and_vet(
        "localhost", 80, allowed_literals=frozenset({"127.0.0.1", "::1"}))}
    assert answers and answers <= {"127.0.0.1", "::1"}


async def test_unresolvable_name_is_refused() -> None:
    with pytest.raises(AddressRefused) as info:
        await resolve_and_vet("does-not-exist.invalid", 443, allowed_literals=frozenset())
    assert info.value.code == "resolve_failed"


async def test_vet_target_requires_a_pattern_and_a_literal_for_the_port() -> None:
    patterns = (compile_host_pattern("127.0.0.1:8123"), compile_host_pattern("localhost:9000"))
    assert await vet_target("127.0.0.1", 8123, patterns) == [ipaddress.IPv4Address("127.0.0.1")]
    with pytest.raises(AddressRefused) as info:
        await vet_target("127.0.0.1", 8124, patterns)
    assert info.value.code == "host_not_allowed"
    # a name pattern does not license the loopback address it resolves to
    with pytest.raises(AddressRefused) as info:
        await vet_target("localhost", 9000, patterns)
    assert info.value.code == "forbidden_address"
    with pytest.raises(AddressRefused) as info:
        await vet_target("127.0.0.1", 8123, ())
    assert info.value.code == "host_not_allowed"
    assert allowed_literals_for(patterns, 8123) == frozenset({"127.0.0.1"})
    assert allowed_literals_for(patterns, 9000) == frozenset()


def test_getaddrinfo_shape_assumption() -> None:
    # resolve_and_vet reads sockaddr[0]; keep that assumption checked.
    info = socket.getaddrinfo("127.0.0.1", 80, type=socket.SOCK_STREAM)
    assert info[0][4][0] == "127.0.0.1"


async def test_a_resolver_that_does_not_answer_in_time_refuses_the_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """NET-5: resolution is bounded (10 s); past it the name is refused like one that does not resolve."""
    import agentcore.net.vetting as vetting

    # "localhost" resolves from /etc/hosts at once; with no time left at all the lookup cannot finish.
    assert await resolve_and_vet("localhost", 80, allowed_literals=frozenset({"127.0.0.1", "::1"}))
    monkeypatch.setattr(vetting, "RESOLVE_TIMEOUT_S", 0.0)
    with pytest.raises(AddressRefused) as info:
        await resolve_and_vet("localhost", 80, allowed_literals=frozenset({"127.0.0.1", "::1"}))
    assert info.value.code == "resolve_failed" and "within 0 s" in str(info.value)
