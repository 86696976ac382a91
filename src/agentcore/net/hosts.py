"""Host canonicalisation, URL parsing and host patterns.

Every host that reaches a decision (pattern match, DNS, dial) goes through
:func:`canonical_host` first, so two spellings of one endpoint can never be
judged differently:

* names are lowercased, UTS #46-mapped and IDNA-encoded to A-labels; one
  trailing dot is dropped; empty labels, ``_`` and anything outside LDH are
  refused;
* a name whose last label is numeric is an IPv4 address in one of the
  spellings that ``inet_aton``/browsers accept (``127.1``, ``2130706433``,
  ``0x7f.1``, ``0177.0.0.1``) and is rewritten to dotted-quad, or refused
  when it does not parse (``1.2.3.4.5``, ``example.123``);
* IPv6 literals are written in compressed lowercase form.  **Decision:** an
  IPv4-mapped address (``::ffff:a.b.c.d``) canonicalises to the IPv4 text
  ``a.b.c.d``.  A socket given either spelling reaches the same endpoint, so
  rules and vetting must see one spelling; a deny on ``10.0.0.1`` cannot be
  dodged with ``[::ffff:10.0.0.1]``.  Zone ids (``%eth0``) are refused.

Refusal messages never repeat the input: hosts arrive inside URLs whose
other parts may be secret.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import idna

if TYPE_CHECKING:  # httpx costs ~20 ms to import; only URL parsing needs it
    import httpx

__all__ = [
    "CanonicalTarget",
    "HostPattern",
    "HostRefused",
    "MAX_URL_LEN",
    "canonical_host",
    "compile_host_pattern",
    "format_authority",
    "parse_authority",
    "parse_url",
]

DEFAULT_PORTS: dict[str, int] = {"http": 80, "https": 443}
_PATTERN_DEFAULT_PORTS = frozenset({80, 443})
_MAX_HOST_LEN = 253
# Room for web_search's own request: a provider URL and a 2,000-character query (SRCH-4) percent-encoded,
# up to 12 characters each (4-byte UTF-8). At 8,192 a long non-ASCII query failed as `invalid_url`.
MAX_URL_LEN = 32768
_LDH_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
_PORT = re.compile(r"[0-9]{1,5}")
_URL_HEAD = re.compile(r"(https?)://([^/?#]*)", re.IGNORECASE)


class HostRefused(Exception):
    """A host, URL, authority or pattern that cannot be canonicalised."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True)
class CanonicalTarget:
    """What decisions about a URL are made on: its scheme, canonical host and port (`is_ip`: the host is an address)."""

    scheme: str
    host: str  # canonical_host() output; IPv6 without brackets
    port: int
    is_ip: bool

    @property
    def authority(self) -> str:
        return format_authority(self.host, self.port)


def format_authority(host: str, port: int | None) -> str:
    """``host:port`` with IPv6 bracketed; the port is omitted when None."""
    shown = f"[{host}]" if ":" in host else host
    return shown if port is None else f"{shown}:{port}"


# --------------------------------------------------------------------------
# canonical_host


def _has_control(text: str) -> bool:
    return any(ord(c) < 0x21 or 0x7F <= ord(c) <= 0x9F for c in text)


def canonical_host(host: str) -> str:
    """Return the one canonical spelling of *host* or raise :class:`HostRefused`."""
    if not isinstance(host, str) or host == "":
        raise HostRefused("empty_host", "the host is empty")
    if _has_control(host):
        # Covers CR/LF/NUL (header injection) and spaces.
        raise HostRefused("control_char", "the host contains control characters or spaces")
    if len(host) > 1024:
        raise HostRefused("too_long", "the host is too long")
    if host.startswith("[") or host.endswith("]"):
        if not (host.startswith("[") and host.endswith("]")):
            raise HostRefused("invalid_ipv6", "unbalanced brackets in the host")
        return _canonical_ipv6(host[1:-1])
    if ":" in host:
        return _canonical_ipv6(host)
    if "%" in host:
        raise HostRefused("invalid_host", "percent-encoded hosts are refused")
    return _canonical_name(host)


def _canonical_ipv6(text: str) -> str:
    if "%" in text:
        raise HostRefused("zone_id", "IPv6 zone identifiers are refused")
    try:
        addr = ipaddress.IPv6Address(text)
    except ValueError:
        raise HostRefused("invalid_ipv6", "the IPv6 address does not parse") from None
    mapped = addr.ipv4_mapped
    if mapped is not None:
        return str(mapped)
    return addr.compressed


def _canonical_name(host: str) -> str:
    try:
        # std3_rules refuses '_' and other non-LDH ASCII; the mapping lowercases
        # and folds full-width forms and ideographic full stops.
        mapped = idna.uts46_remap(host, std3_rules=True, transitional=False)
    except (idna.IDNAError, UnicodeError, ValueError):
        raise HostRefused("invalid_host", "the host is not a valid domain name") from None
    if mapped.endswith("."):
        mapped = mapped[:-1]
    labels = mapped.split(".")
    if any(label == "" for label in labels):
        raise HostRefused("invalid_host", "the host has an empty label")
    if _ends_in_number(labels[-1]):
        return _parse_ipv4_like(labels)
    try:
        encoded = idna.encode(mapped, uts46=False).decode("ascii")
    except (idna.IDNAError, UnicodeError, ValueError):
        raise HostRefused("invalid_host", "the host is not a valid domain name") from None
    encoded = encoded.lower()
    if len(encoded) > _MAX_HOST_LEN:
        raise HostRefused("too_long", "the host is too long")
    for label in encoded.split("."):
        if not _LDH_LABEL.fullmatch(label):
            raise HostRefused("invalid_host", "the host is not a valid domain name")
    return encoded


def _ends_in_number(label: str) -> bool:
    if label.isascii() and label.isdigit():
        return True
    if label[:2] in ("0x", "0X"):
        return all(c in "0123456789abcdefABCDEF" for c in label[2:])
    return False


def _ipv4_part(part: str) -> int:
    radix = 10
    if part[:2] in ("0x", "0X"):
        part, radix = part[2:], 16
    elif len(part) > 1 and part.startswith("0"):
        part, radix = part[1:], 8
    if part == "":
        return 0
    digits = "0123456789abcdef"[:radix]
    if not part.isascii() or any(c not in digits for c in part.lower()):
        raise HostRefused("invalid_ipv4", "the numeric host is not a valid IPv4 address")
    return int(part, radix)


def _parse_ipv4_like(labels: list[str]) -> str:
    """IPv4 in the 1-4 part decimal/octal/hex spellings that resolvers accept."""
    if len(labels) > 4:
        raise HostRefused("invalid_ipv4", "the numeric host is not a valid IPv4 address")
    numbers = [_ipv4_part(p) for p in labels]
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (5 - len(numbers)):
        raise HostRefused("invalid_ipv4", "the numeric host is not a valid IPv4 address")
    value = last
    for index, n in enumerate(head):
        value += n << (8 * (3 - index))
    return str(ipaddress.IPv4Address(value))


def _is_ip_text(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


# --------------------------------------------------------------------------
# authorities and URLs


def _parse_port(text: str) -> int:
    if not _PORT.fullmatch(text):
        raise HostRefused("invalid_port", "the port is not a number from 1 to 65535")
    port = int(text)
    if not 1 <= port <= 65535:
        raise HostRefused("invalid_port", "the port is not a number from 1 to 65535")
    return port


def _split_authority(authority: str) -> tuple[str, int | None]:
    """Split ``host[:port]`` (IPv6 in brackets) without canonicalising."""
    if authority.startswith("["):
        end = authority.find("]")
        if end < 0:
            raise HostRefused("invalid_ipv6", "unbalanced brackets in the host")
        host, rest = authority[: end + 1], authority[end + 1 :]
        if rest == "":
            return host, None
        if not rest.startswith(":"):
            raise HostRefused("invalid_authority", "unexpected text after the IPv6 address")
        return host, _parse_port(rest[1:])
    if authority.count(":") > 1:
        raise HostRefused("invalid_authority", "IPv6 addresses must be written in brackets")
    host, sep, port = authority.partition(":")
    return host, (_parse_port(port) if sep else None)


def parse_authority(authority: str) -> tuple[str, int]:
    """Parse a CONNECT-style ``host:port`` (port required) into canonical parts."""
    if _has_control(authority) or "@" in authority or "\\" in authority:
        raise HostRefused("invalid_authority", "the authority contains forbidden characters")
    host, port = _split_authority(authority)
    if port is None:
        raise HostRefused("invalid_authority", "the authority needs an explicit port")
    return canonical_host(host), port


def parse_url(url: str) -> tuple["httpx.URL", CanonicalTarget]:
    """Parse *url* once, with httpx (the library that fetches it).

    Returns the URL to request, rebuilt on the canonical host and without a
    fragment, and the target that decisions are made on.  Before trusting
    httpx we refuse every input on which URL parsers are known to disagree
    (backslashes, userinfo, control characters, missing ``//``), and we
    re-derive the authority by hand and insist that both readings agree.
    """
    if not isinstance(url, str) or url == "":
        raise HostRefused("invalid_url", "the URL is empty")
    if len(url) > MAX_URL_LEN:
        raise HostRefused("invalid_url", "the URL is too long")
    if _has_control(url):
        raise HostRefused("invalid_url", "the URL contains control characters or spaces")
    if "\\" in url:
        raise HostRefused("invalid_url", "backslashes are refused in URLs")
    head = _URL_HEAD.match(url)
    if head is None:
        raise HostRefused("unsupported_scheme", "only http:// and https:// URLs are fetched")
    scheme, authority = head.group(1).lower(), head.group(2)
    if "@" in authority:
        raise HostRefused("userinfo", "URLs with user information are refused")
    if authority == "":
        raise HostRefused("empty_host", "the URL has no host")
    raw_host, raw_port = _split_authority(authority)
    host = canonical_host(raw_host)
    import httpx

    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError, TypeError, UnicodeError):
        raise HostRefused("invalid_url", "the URL does not parse") from None
    if parsed.scheme != scheme or parsed.userinfo:
        raise HostRefused("ambiguous_url", "the URL parses ambiguously")
    try:
        theirs = canonical_host(parsed.raw_host.decode("ascii"))
    except (HostRefused, UnicodeError):
        raise HostRefused("ambiguous_url", "the URL parses ambiguously") from None
    port = raw_port if raw_port is not None else DEFAULT_PORTS[scheme]
    their_port = parsed.port if parsed.port is not None else DEFAULT_PORTS[scheme]
    if theirs != host or their_port != port:
        raise HostRefused("ambiguous_url", "the URL parses ambiguously")
    explicit = None if port == DEFAULT_PORTS[scheme] else port
    try:
        final = parsed.copy_with(host=host, port=explicit, fragment=None)
    except (httpx.InvalidURL, ValueError, TypeError):
        raise HostRefused("invalid_url", "the URL does not parse") from None
    return final, CanonicalTarget(scheme=scheme, host=host, port=port, is_ip=_is_ip_text(host))


# --------------------------------------------------------------------------
# host patterns


@dataclass(frozen=True)
class HostPattern:
    """A compiled ``net.hosts`` entry.

    ``host`` is the canonical host, or for a wildcard the canonical suffix
    without ``*.``.  ``port`` None means the default web ports 80 and 443.
    """

    raw: str
    host: str
    wildcard: bool
    port: int | None
    is_ip: bool
    canonical: str = field(compare=False)

    def port_matches(self, port: int) -> bool:
        return port in _PATTERN_DEFAULT_PORTS if self.port is None else port == self.port

    def host_matches(self, host: str) -> bool:
        try:
            host = canonical_host(host)
        except HostRefused:
            return False  # fail closed: an unreadable host matches nothing
        if not self.wildcard:
            return host == self.host
        # Strict subdomain at a label boundary: the '.' is part of the suffix.
        return not _is_ip_text(host) and host.endswith("." + self.host)

    def matches(self, host: str, port: int) -> bool:
        return self.port_matches(port) and self.host_matches(host)

    @property
    def literal_ip(self) -> str | None:
        """The literal address this pattern names, if it names one."""
        return self.host if self.is_ip else None

    def specificity(self) -> int:
        """Exact patterns beat wildcards; then more literal characters win."""
        literal = len(self.canonical) - (1 if self.wildcard else 0)
        return (1000 if not self.wildcard else 0) + literal

    def __str__(self) -> str:
        return self.canonical


def compile_host_pattern(p: str) -> HostPattern:
    """Compile one pattern: ``example.com``, ``*.example.com``, ``host:port``,
    ``127.0.0.1:8123``, ``[::1]:8123``.  Anything else raises HostRefused."""
    if not isinstance(p, str) or p.strip() == "":
        raise HostRefused("invalid_pattern", "the host pattern is empty")
    if _has_control(p) or any(c in p for c in "/\\@?#"):
        raise HostRefused("invalid_pattern", "host patterns are a host and optional port, not a URL")
    wildcard = p.startswith("*.")
    body = p[2:] if wildcard else p
    if "*" in body:
        # '*' alone, 'ex*.com', '*.*.com', 'example.com:*' are all refused.
        raise HostRefused("invalid_pattern", "'*' is only allowed as a leading '*.' label")
    host_text, port = _split_authority(body)
    host = canonical_host(host_text)
    is_ip = _is_ip_text(host)
    if wildcard and is_ip:
        raise HostRefused("invalid_pattern", "wildcards cannot be applied to IP addresses")
    if wildcard and "." not in host:
        # '*.com' would admit a whole top-level domain.
        raise HostRefused("invalid_pattern", "a wildcard needs at least two labels after '*.'")
    canonical = ("*." if wildcard else "") + format_authority(host, port)
    return HostPattern(raw=p, host=host, wildcard=wildcard, port=port, is_ip=is_ip, canonical=canonical)
