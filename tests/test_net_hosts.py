"""Host canonicalisation, URL parsing and host patterns (bypass class 6)."""

from __future__ import annotations

import ipaddress
import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from agentcore.net.hosts import (
    HostRefused,
    canonical_host,
    compile_host_pattern,
    parse_authority,
    parse_url,
)

# ---------------------------------------------------------------- canonical_host

CANONICAL = [
    # numeric IPv4 spellings that inet_aton and browsers accept
    ("127.0.0.1", "127.0.0.1"),
    ("127.1", "127.0.0.1"),
    ("127.0.1", "127.0.0.1"),
    ("2130706433", "127.0.0.1"),
    ("0x7f000001", "127.0.0.1"),
    ("0x7f.1", "127.0.0.1"),
    ("0X7F.0.0.1", "127.0.0.1"),
    ("0177.0.0.1", "127.0.0.1"),
    ("0177.1", "127.0.0.1"),
    ("017700000001", "127.0.0.1"),
    ("127.0.0.010", "127.0.0.8"),
    ("0", "0.0.0.0"),
    ("4294967295", "255.255.255.255"),
    ("169.254.43518", "169.254.169.254"),
    ("１２７.０.０.１", "127.0.0.1"),  # full-width digits map to ASCII first
    ("127.0.0.1.", "127.0.0.1"),
    # IPv6, IPv4-mapped collapses to the IPv4 text
    ("::1", "::1"),
    ("[::1]", "::1"),
    ("[0:0:0:0:0:0:0:1]", "::1"),
    ("::ffff:127.0.0.1", "127.0.0.1"),
    ("[::FFFF:7f00:1]", "127.0.0.1"),
    ("[::ffff:a9fe:a9fe]", "169.254.169.254"),
    ("[FD00:EC2::254]", "fd00:ec2::254"),
    ("::127.0.0.1", "::7f00:1"),  # IPv4-compatible stays IPv6 (vetting refuses it)
    # names: case, one trailing dot, IDNA
    ("Example.COM", "example.com"),
    ("example.com.", "example.com"),
    ("EXAMPLE.com.", "example.com"),
    ("bücher.de", "xn--bcher-kva.de"),
    ("BÜCHER.de", "xn--bcher-kva.de"),
    ("xn--bcher-kva.de", "xn--bcher-kva.de"),
    ("ｅｘａｍｐｌｅ.com", "example.com"),
    ("example。com", "example.com"),
    ("localhost", "localhost"),
    ("1.2.3.example", "1.2.3.example"),
    ("a-b.example", "a-b.example"),
]


@pytest.mark.parametrize(("raw", "expected"), CANONICAL)
def test_canonical_host(raw: str, expected: str) -> None:
    assert canonical_host(raw) == expected
    assert canonical_host(expected) == expected


REFUSED_HOSTS = [
    ("", "empty_host"),
    ("example.com..", "invalid_host"),
    ("a..b", "invalid_host"),
    (".example.com", "invalid_host"),
    ("a_b.example.com", "invalid_host"),
    ("exa mple.com", "control_char"),
    ("example.com\r\nX: y", "control_char"),
    ("example.com\x00.evil", "control_char"),
    ("example.com\t", "control_char"),
    ("[fe80::1%eth0]", "zone_id"),
    ("fe80::1%25eth0", "zone_id"),
    ("[::1", "invalid_ipv6"),
    ("::1]", "invalid_ipv6"),
    ("[::g]", "invalid_ipv6"),
    ("1.2.3.4.5", "invalid_ipv4"),
    ("256.0.0.1", "invalid_ipv4"),
    ("1.256.0.0.", "invalid_ipv4"),
    ("4294967296", "invalid_ipv4"),
    ("08.0.0.1", "invalid_ipv4"),
    ("0x1g.1", "invalid_ipv4"),  # the last label is numeric, so the whole host must be IPv4
    ("example.123", "invalid_ipv4"),
    ("example.0x10", "invalid_ipv4"),
    ("%65xample.com", "invalid_host"),
    ("-a.example", "invalid_host"),
    ("a-.example", "invalid_host"),
    ("xn--zz.example", "invalid_host"),
    ("a" * 64 + ".example", "invalid_host"),
    (".".join(["abcdefghi"] * 26), "invalid_host"),  # longer than 253
    ("evil.com/", "invalid_host"),
    ("evil.com\\", "invalid_host"),
    ("user@evil.com", "invalid_host"),
    ("a\u200db.example", "invalid_host"),
]


@pytest.mark.parametrize(("raw", "code"), REFUSED_HOSTS)
def test_canonical_host_refusals(raw: str, code: str) -> None:
    with pytest.raises(HostRefused) as info:
        canonical_host(raw)
    assert info.value.code == code


def test_refusal_messages_do_not_echo_input() -> None:
    secret = "s3cr3t-token-value"
    for raw in (f"{secret}_x.example", f"[{secret}]", f"{secret}..x"):
        with pytest.raises(HostRefused) as info:
            canonical_host(raw)
        assert secret not in str(info.value)
    for url in (f"http://user:{secret}@example.com/", f"http://example.com\\{secret}", f"ftp://{secret}/"):
        with pytest.raises(HostRefused) as info:
            parse_url(url)
        assert secret not in str(info.value)


# ---------------------------------------------------------------- parse_url

PARSED = [
    ("http://example.com", "http", "example.com", 80, "http://example.com"),
    ("https://Example.COM./a?b=1#frag", "https", "example.com", 443, "https://example.com/a?b=1"),
    ("HTTPS://example.com:443/", "https", "example.com", 443, "https://example.com/"),
    ("http://example.com:8080/x", "http", "example.com", 8080, "http://example.com:8080/x"),
    ("http://127.1:8123/", "http", "127.0.0.1", 8123, "http://127.0.0.1:8123/"),
    ("http://2130706433/", "http", "127.0.0.1", 80, "http://127.0.0.1/"),
    ("http://0x7f.1/", "http", "127.0.0.1", 80, "http://127.0.0.1/"),
    ("http://[::1]:8123/", "http", "::1", 8123, "http://[::1]:8123/"),
    ("http://[::ffff:127.0.0.1]/", "http", "127.0.0.1", 80, "http://127.0.0.1/"),
    ("http://bücher.de/", "http", "xn--bcher-kva.de", 80, "http://xn--bcher-kva.de/"),
    # a query or fragment that contains '@' does not move the host
    ("http://allowed.example#@evil.example/", "http", "allowed.example", 80, "http://allowed.example"),
    ("http://allowed.example?@evil.example/", "http", "allowed.example", 80, "http://allowed.example?@evil.example/"),
    ("http://allowed.example/@evil.example", "http", "allowed.example", 80, "http://allowed.example/@evil.example"),
]


@pytest.mark.parametrize(("url", "scheme", "host", "port", "final"), PARSED)
def test_parse_url(url: str, scheme: str, host: str, port: int, final: str) -> None:
    parsed, target = parse_url(url)
    assert (target.scheme, target.host, target.port) == (scheme, host, port)
    assert target.is_ip == (host[0].isdigit() or ":" in host)
    assert str(parsed).rstrip("/") == final.rstrip("/")
    # the URL handed to httpx carries the canonical host, so Host/SNI match it
    assert canonical_host(parsed.raw_host.decode()) == host


REFUSED_URLS = [
    ("http://allowed.example@evil.example/", "userinfo"),
    ("http://user:pass@allowed.example/", "userinfo"),
    ("http://allowed.example:80@evil.example/", "userinfo"),
    ("http://@allowed.example/", "userinfo"),
    ("http://evil.example\\@allowed.example/", "invalid_url"),
    ("http://evil.example\\.allowed.example/", "invalid_url"),
    ("http:\\\\evil.example\\", "invalid_url"),
    ("http://allowed.example/\\..\\x", "invalid_url"),
    ("http://exa mple.com/", "invalid_url"),
    ("http://example.com/\r\nHost: evil", "invalid_url"),
    ("http://example.com/\x00", "invalid_url"),
    ("ftp://example.com/", "unsupported_scheme"),
    ("file:///etc/passwd", "unsupported_scheme"),
    ("javascript:alert(1)", "unsupported_scheme"),
    ("http:/example.com/", "unsupported_scheme"),
    ("http:example.com", "unsupported_scheme"),
    ("//example.com/", "unsupported_scheme"),
    ("http:///example.com", "empty_host"),
    ("http://", "empty_host"),
    ("http://example.com:0/", "invalid_port"),
    ("http://example.com:65536/", "invalid_port"),
    ("http://example.com:/", "invalid_port"),
    ("http://example.com:+80/", "invalid_port"),
    ("http://example.com:8o/", "invalid_port"),
    ("http://[fe80::1%25eth0]/", "zone_id"),
    ("http://::1/", "invalid_authority"),
    ("http://[::1]x/", "invalid_authority"),
    ("http://%65vil.com/", "invalid_host"),
    ("http://a_b.example/", "invalid_host"),
    ("http://1.2.3.4.5/", "invalid_ipv4"),
    ("", "invalid_url"),
    ("http://x.example/" + "a" * 40000, "invalid_url"),  # past the 32,768-character bound
]


@pytest.mark.parametrize(("url", "code"), REFUSED_URLS)
def test_parse_url_refusals(url: str, code: str) -> None:
    with pytest.raises(HostRefused) as info:
        parse_url(url)
    assert info.value.code == code


def test_parse_authority() -> None:
    assert parse_authority("Example.com:443") == ("example.com", 443)
    assert parse_authority("127.1:8123") == ("127.0.0.1", 8123)
    assert parse_authority("[::ffff:127.0.0.1]:80") == ("127.0.0.1", 80)
    assert parse_authority("[::1]:22") == ("::1", 22)
    for bad in ("example.com", "example.com:", "a@example.com:443", "::1:443", "[::1]443", "example.com:99999"):
        with pytest.raises(HostRefused):
            parse_authority(bad)


# ---------------------------------------------------------------- host patterns

MATCHES = [
    # pattern, host, port, expected
    ("example.com", "example.com", 80, True),
    ("example.com", "example.com", 443, True),
    ("example.com", "EXAMPLE.COM.", 443, True),
    ("example.com", "example.com", 8080, False),
    ("example.com", "www.example.com", 443, False),
    ("example.com", "evil-example.com", 443, False),
    ("example.com", "example.com.evil.net", 443, False),
    ("*.example.com", "www.example.com", 443, True),
    ("*.example.com", "a.b.example.com", 80, True),
    ("*.Example.COM.", "WWW.example.com.", 443, True),
    ("*.example.com", "example.com", 443, False),
    ("*.example.com", "evil-example.com", 443, False),
    ("*.example.com", "evilexample.com", 443, False),
    ("*.example.com", "example.com.evil.net", 443, False),
    ("*.example.com", "www.example.com", 8443, False),
    ("*.example.com", "www.example.com.", 443, True),
    ("*.example.com", "www.example.com..", 443, False),
    ("*.example.com:8443", "www.example.com", 8443, True),
    ("*.example.com:8443", "www.example.com", 443, False),
    ("example.com:8080", "example.com", 8080, True),
    ("example.com:8080", "example.com", 80, False),
    ("127.0.0.1:8123", "127.0.0.1", 8123, True),
    ("127.0.0.1:8123", "127.1", 8123, True),
    ("127.0.0.1:8123", "2130706433", 8123, True),
    ("127.0.0.1:8123", "::ffff:127.0.0.1", 8123, True),
    ("127.0.0.1:8123", "127.0.0.1", 8124, False),
    ("127.0.0.1:8123", "localhost", 8123, False),
    ("[::1]:8123", "::1", 8123, True),
    ("[::1]:8123", "[0::1]", 8123, True),
    ("[::1]:8123", "127.0.0.1", 8123, False),
    ("bücher.de", "xn--bcher-kva.de", 443, True),
    ("*.bücher.de", "www.xn--bcher-kva.de", 443, True),
    ("example.com", "exa mple.com", 443, False),  # unreadable input matches nothing
]


@pytest.mark.parametrize(("pattern", "host", "port", "expected"), MATCHES)
def test_pattern_matches(pattern: str, host: str, port: int, expected: bool) -> None:
    assert compile_host_pattern(pattern).matches(host, port) is expected


BAD_PATTERNS = [
    "*",
    "*:443",
    "*.com",
    "*.localhost",
    "**.example.com",
    "*.*.example.com",
    "ex*.com",
    "*example.com",
    "example.*",
    "example.com:*",
    "*.127.0.0.1",
    "*.[::1]",
    "::1",
    "::1:8123",
    "https://example.com",
    "example.com/path",
    "user@example.com",
    "example.com:0",
    "example.com:65536",
    "",
    "   ",
    "a_b.example",
    "[fe80::1%eth0]:80",
]


@pytest.mark.parametrize("pattern", BAD_PATTERNS)
def test_bad_patterns(pattern: str) -> None:
    with pytest.raises(HostRefused):
        compile_host_pattern(pattern)


def test_pattern_canonical_and_specificity() -> None:
    exact_port = compile_host_pattern("API.Example.com.:8080")
    exact = compile_host_pattern("api.example.com")
    wild = compile_host_pattern("*.example.com")
    wider = compile_host_pattern("*.com.example")  # just a different wildcard
    assert exact_port.canonical == "api.example.com:8080"
    assert compile_host_pattern("[::FFFF:127.0.0.1]:1").canonical == "127.0.0.1:1"
    assert compile_host_pattern("[0::1]:9").canonical == "[::1]:9"
    assert exact_port.specificity() > exact.specificity() > wild.specificity()
    assert compile_host_pattern("*.a.example.com").specificity() > wild.specificity()
    assert wider.wildcard and wild.literal_ip is None
    assert compile_host_pattern("127.0.0.1:8123").literal_ip == "127.0.0.1"


# ---------------------------------------------------------------- hypothesis

_label_chars = st.sampled_from(list("abcdefghijklmnopqrstuvwxyzABCXYZ0123456789-_") + ["ü", "ß", "é", "Ｅ", "ı"])
_labels = st.text(_label_chars, min_size=0, max_size=12)
_hosts = st.builds(
    lambda labels, dot: ".".join(labels) + dot,
    st.lists(_labels, min_size=1, max_size=5),
    st.sampled_from(["", ".", ".."]),
)


@settings(max_examples=400, deadline=None)
@given(st.one_of(_hosts, st.text(max_size=30)))
def test_canonical_host_is_idempotent(raw: str) -> None:
    try:
        once = canonical_host(raw)
    except HostRefused:
        return
    assert canonical_host(once) == once
    assert once == once.lower() and once.isascii() and not once.endswith(".")


def _spell(value: int, parts: int, styles: list[str]) -> str:
    """Write a 32-bit value in the 1-4 part inet_aton syntax."""
    sizes = [1] * (parts - 1) + [4 - (parts - 1)]
    numbers, shift = [], 32
    for size in sizes:
        shift -= 8 * size
        numbers.append((value >> shift) & ((1 << (8 * size)) - 1))
    out = []
    for n, style in zip(numbers, styles):
        out.append({"dec": str(n), "hex": hex(n), "oct": "0" + oct(n)[2:]}[style])
    return ".".join(out)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(1, 4),
    st.lists(st.sampled_from(["dec", "hex", "oct"]), min_size=4, max_size=4),
)
def test_every_ipv4_spelling_canonicalises_to_dotted_quad(value: int, parts: int, styles: list[str]) -> None:
    expected = str(ipaddress.IPv4Address(value))
    spelling = _spell(value, parts, styles)
    assert canonical_host(spelling) == expected
    assert canonical_host(f"[::ffff:{expected}]") == expected


_WILDCARD = compile_host_pattern("*.example.com")


@settings(max_examples=500, deadline=None)
@given(st.one_of(
    _hosts,
    st.builds(lambda h: h + "example.com", _hosts),
    st.builds(lambda h: h + ".example.com", _hosts),
    st.builds(lambda h, t: h + ".example.com" + t, _hosts, st.sampled_from([".", "..", ".evil", ":443", "-x"])),
))
def test_wildcard_only_matches_strict_subdomains(raw: str) -> None:
    matched = _WILDCARD.matches(raw, 443)
    try:
        host = canonical_host(raw)
    except HostRefused:
        assert not matched
        return
    at_boundary = host.endswith(".example.com") and len(host) > len(".example.com")
    assert matched == at_boundary


@settings(max_examples=200, deadline=None)
@given(st.lists(st.from_regex(r"[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True), min_size=1, max_size=4))
def test_wildcard_accepts_generated_subdomains(labels: list[str]) -> None:
    host = ".".join(labels) + ".example.com"
    assume(not any(len(label) >= 4 and label[2:4] == "--" for label in labels))
    assert _WILDCARD.matches(host, 443)
    assert not _WILDCARD.matches(host.replace(".example.com", "-example.com"), 443)
    assert not _WILDCARD.matches(host + ".evil", 443)


_url_piece = st.lists(
    st.sampled_from(list("aeZ09.-_:@/\\?#%[]ü") + ["127", "example", "com", "::1", "0x7f", "%40"]), max_size=10
).map("".join)


@settings(max_examples=500, deadline=None)
@given(st.sampled_from(["http://", "https://", "HTTP://", "http:/", "http:\\\\"]), _url_piece, _url_piece)
def test_parse_url_is_stable_and_never_keeps_userinfo(prefix: str, authority: str, tail: str) -> None:
    url = prefix + authority + tail
    try:
        parsed, target = parse_url(url)
    except HostRefused:
        return
    head = re.match(r"(?i)https?://([^/?#]*)", url)
    assert head is not None and "@" not in head.group(1) and "%" not in head.group(1)
    assert "\\" not in url
    assert not parsed.userinfo and parsed.fragment == ""
    assert canonical_host(target.host) == target.host
    again, target_again = parse_url(str(parsed))
    assert target_again == target and str(again) == str(parsed)
