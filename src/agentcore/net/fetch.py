"""The engine behind the ``web_fetch`` tool.

Each hop (the first URL and every redirect) is parsed with httpx,
canonicalised, matched against ``net.hosts``, resolved and vetted, and then
fetched through a transport that can only dial the vetted addresses for that
one host and port.  The request keeps the name in the Host header and in
TLS (SNI and certificate checks), so a DNS answer that changes between the
vet and the connect is never used: we never ask DNS a second time.
"""

from __future__ import annotations

import codecs
import functools
import re
import ssl
import threading
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable
from urllib.parse import urljoin

import anyio
import httpcore
import httpx

from agentcore.net.hosts import CanonicalTarget, HostPattern, HostRefused, parse_url
from agentcore.net.pinning import pinned_backend
from agentcore.net.vetting import AddressRefused, IPAddress, vet_target

__all__ = ["FetchPolicy", "FetchRefused", "FetchResult", "PinnedTransport", "fetch_url", "html_to_markdown"]

_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_TEXT_TYPES = frozenset(
    {
        "application/json",
        "application/xml",
        "application/javascript",
        "application/x-javascript",
        "application/ecmascript",
        "application/x-ndjson",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
    }
)
_REQUEST_HEADERS = {
    "User-Agent": "agentcore-web-fetch/0.1",
    "Accept": "text/html, text/*;q=0.9, application/json;q=0.8, */*;q=0.1",
    # Only encodings we can decode with a bounded output size.
    "Accept-Encoding": "gzip, deflate",
}
_MARKDOWN_DROP = ("script", "style", "noscript", "template", "iframe", "object", "embed", "svg", "canvas", "head")


class FetchRefused(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True)
class FetchPolicy:
    """What one fetch may do: the hosts it may reach, its limits, and the hooks it calls at each redirect and for progress."""

    host_patterns: tuple[HostPattern, ...]
    max_redirects: int = 5
    timeout_s: float = 30.0  # for the whole call, every hop included
    max_download_bytes: int = 10 * 2**20  # after content decoding
    # None: httpx's default verified context.  Tests and private CAs pass one.
    ssl_context: ssl.SSLContext | None = None
    # Called for every redirect hop after its host matched; raises FetchRefused to stop
    # (web_fetch re-runs the permission rules here, NET).
    hop_check: "Callable[[CanonicalTarget], None] | None" = None
    # Progress notes for whoever watches the call (web_fetch passes its runtime's `report`).
    # They carry counts and status codes only, never a URL.
    on_progress: "Callable[[str], Awaitable[None]] | None" = None

    def __post_init__(self) -> None:
        if self.max_redirects < 0 or self.timeout_s <= 0 or self.max_download_bytes < 0:
            raise ValueError("FetchPolicy limits must be non-negative and the timeout positive")
        if not all(isinstance(p, HostPattern) for p in self.host_patterns):
            raise TypeError("FetchPolicy.host_patterns must hold compiled HostPattern objects")


@dataclass
class FetchResult:
    """A fetched page: the final URL, status and content type, the body as text (HTML as Markdown), the redirects followed."""

    url: str
    status: int
    content_type: str
    text: str
    redirects: list[str] = field(default_factory=list)
    downloaded_bytes: int = 0  # bytes of the final body as received on the wire


# --------------------------------------------------------------------------
# pinned dialing


class PinnedTransport(httpx.AsyncHTTPTransport):
    """An httpx transport whose connections go to *addresses* only.

    URLs keep the host name, so httpx sends it as Host and httpcore uses it
    for SNI and certificate verification; only the socket's peer is pinned.
    Environment proxies and ``SSL_CERT_*`` variables are ignored.
    """

    def __init__(
        self,
        host: str,
        port: int,
        addresses: Sequence[IPAddress],
        *,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        context = ssl_context if ssl_context is not None else httpx.create_ssl_context(trust_env=False)
        super().__init__(verify=context, trust_env=False, retries=0)
        # httpx has no public hook for the network backend, so the pool it
        # built is replaced by one that dials through the pinned backend.
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=context,
            max_connections=1,
            max_keepalive_connections=0,
            http1=True,
            http2=False,
            retries=0,
            network_backend=pinned_backend(httpcore, host, port, addresses),
        )


# --------------------------------------------------------------------------
# body reading


class _BoundedDecoder:
    """Content-Encoding decoder whose output never exceeds the budget."""

    def __init__(self, encoding: str, limit: int) -> None:
        self._limit = limit
        self._size = 0
        self._parts: list[bytes] = []
        if encoding in ("", "identity"):
            self._zlib = None
        elif encoding in ("gzip", "x-gzip", "deflate"):
            self._zlib = zlib.decompressobj(zlib.MAX_WBITS | 32)  # zlib or gzip header
        else:
            raise FetchRefused("unsupported_encoding", "the response uses an unsupported content encoding")

    def _emit(self, data: bytes) -> None:
        self._size += len(data)
        if self._size > self._limit:
            raise FetchRefused("too_large", "the response body exceeds the download limit")
        self._parts.append(data)

    def feed(self, chunk: bytes) -> None:
        if self._zlib is None:
            self._emit(chunk)
            return
        try:
            data = self._zlib.decompress(chunk, self._limit - self._size + 1)
            self._emit(data)
            while self._zlib.unconsumed_tail:
                data = self._zlib.decompress(self._zlib.unconsumed_tail, self._limit - self._size + 1)
                self._emit(data)
        except zlib.error:
            raise FetchRefused("decode_error", "the compressed response body is corrupt") from None

    def finish(self) -> bytes:
        if self._zlib is not None:
            try:
                self._emit(self._zlib.flush())
            except zlib.error:
                raise FetchRefused("decode_error", "the compressed response body is corrupt") from None
        return b"".join(self._parts)


_PROGRESS_EVERY = 256 * 1024  # bytes on the wire between two progress notes


async def _read_body(response: httpx.Response, limit: int, progress: "Callable[[str], Awaitable[None]] | None") -> tuple[bytes, int]:
    length = response.headers.get("content-length")
    if length is not None and length.strip().isdigit() and int(length) > limit:
        raise FetchRefused("too_large", "the response body exceeds the download limit")
    encoding = response.headers.get("content-encoding", "").strip().lower()
    decoder = _BoundedDecoder(encoding, limit)
    wire = reported = 0
    async for chunk in response.aiter_raw():
        wire += len(chunk)
        if wire > limit:
            raise FetchRefused("too_large", "the response body exceeds the download limit")
        decoder.feed(chunk)
        if progress is not None and wire - reported >= _PROGRESS_EVERY:
            reported = wire
            await progress(f"received {wire} bytes")
    return decoder.finish(), wire


# --------------------------------------------------------------------------
# conversion to text


def _media_type(content_type: str) -> tuple[str, str | None]:
    main, _, params = content_type.partition(";")
    charset = None
    for param in params.split(";"):
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset":
            charset = value.strip().strip('"').strip("'") or None
    if charset is not None:
        try:
            charset = codecs.lookup(charset).name
        except LookupError:
            charset = None
    return main.strip().lower(), charset


def _kind(media: str) -> str | None:
    if media in _HTML_TYPES:
        return "html"
    if media.startswith("text/") or media in _TEXT_TYPES:
        return "text"
    if media.endswith("+json") or media.endswith("+xml"):
        return "text"
    return None


class ConversionStopped(Exception):
    """An HTML conversion was stopped from outside (its fetch timed out or was cancelled)."""


def html_to_markdown(
    html: bytes | str, charset: str | None = None, base_url: str | None = None, stop: threading.Event | None = None
) -> str:
    """Readable markdown from HTML: scripts, styles and embeds dropped;
    relative links made absolute against *base_url* so they stay usable.

    Once *stop* is set, the parse or the conversion raises ConversionStopped at its
    next element: a fetch that gave up on it must not leave it running (see `_soup_class`).
    """
    stop = stop if stop is not None else threading.Event()
    if _markup_count(html, "<") > MAX_TREE_TAGS or _markup_count(html, "=") > MAX_TREE_ATTRIBUTES:
        return _plain_text(html, charset, stop)
    soup = _soup_class()(html, stop, from_encoding=charset if isinstance(html, bytes) else None)
    title_tag = soup.find("title")
    title = title_tag.get_text(" ", strip=True) if title_tag is not None else ""
    for tag in soup.find_all(_MARKDOWN_DROP):
        tag.decompose()
    if base_url is not None:
        for tag, attribute in ((t, "href") for t in soup.find_all("a", href=True)):
            tag[attribute] = _absolute(base_url, str(tag[attribute]))
        for tag in soup.find_all("img", src=True):
            tag["src"] = _absolute(base_url, str(tag["src"]))
    try:
        body = _converter_class()(stop).convert_soup(soup)
    except RecursionError:
        # The converter recurses once per nesting level; a page nested ~1000 deep
        # (a few KB) gets its text only.  get_text walks the tree without recursing.
        body = soup.get_text("\n", strip=True)
    # Per line, not `[ \t]+\n`: that regex is quadratic in a run of blanks without a newline.
    body = "\n".join(line.rstrip(" \t") for line in body.split("\n"))
    body = re.sub(r"\n{3,}", "\n\n", body).strip()
    if title and title not in body[: len(title) + 200]:
        body = f"# {title}\n\n{body}" if body else f"# {title}"
    return body


# A parsed tree costs about 1 KB per tag and 600 bytes per attribute: 10 MiB of `a<br>` took 2 GB,
# one tag with 500,000 attributes 300 MB, and web_fetch calls run side by side. Past these counts
# (a long article has a few tens of thousands of tags) the page is read as a stream, to text only.
MAX_TREE_TAGS = 60_000
MAX_TREE_ATTRIBUTES = 120_000
_BLOCKS = frozenset({"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "table", "ul", "ol",
                     "section", "article", "blockquote", "dt", "dd", "hr"})


_DROPPED_CONTENT = frozenset(_MARKDOWN_DROP) - {"embed"}  # `embed` is void: no end tag would end the drop
_ATTRIBUTES = re.compile(r"<(/?)([A-Za-z][^\s<>/]*)[^<>]*>")


def _markup_count(html: bytes | str, mark: str) -> int:
    return html.count(mark.encode("ascii")) if isinstance(html, bytes) else html.count(mark)


def _plain_text(html: bytes | str, charset: str | None, stop: threading.Event) -> str:
    """The page's text without Markdown, read as a stream: memory in proportion to the text, not the markup."""
    from html.parser import HTMLParser

    if isinstance(html, bytes):
        html = _decoded(html, charset)
    # Attributes are never text: dropped before parsing, so no list of them is built (`[^<>]*` stops at
    # the next `<`, so an unclosed tag costs one scan of its own text, not one to the end of the page).
    html = _ATTRIBUTES.sub(r"<\1\2>", html)
    out: list[str] = []
    dropped = 0  # depth inside elements whose content is not text (scripts, styles, the head)

    class Text(HTMLParser):
        def handle_starttag(self, tag: str, attrs: Any) -> None:
            nonlocal dropped
            _check(stop)
            dropped += tag in _DROPPED_CONTENT
            if tag in _BLOCKS:
                out.append("\n")

        def handle_endtag(self, tag: str) -> None:
            nonlocal dropped
            _check(stop)
            if tag in _DROPPED_CONTENT and dropped:
                dropped -= 1
            if tag in _BLOCKS:
                out.append("\n")

        def handle_data(self, data: str) -> None:
            _check(stop)
            if not dropped:
                out.append(data)

    parser = Text(convert_charrefs=True)
    parser.feed(html)
    parser.close()
    lines = (" ".join(line.split()) for line in "".join(out).split("\n"))
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _check(stop: threading.Event) -> None:
    if stop.is_set():
        raise ConversionStopped("the conversion was stopped")


@functools.cache
def _soup_class() -> Any:
    """BeautifulSoup on html.parser, stoppable between two of the parser's events.

    Python's html.parser is quadratic on some malformed markup (`<a x="` or `<!--`
    repeated: 120 KB took 35 s), and a conversion a timeout abandoned kept its thread,
    burning a core for hours per call. Every step of the parser's loop reports data, a
    start tag or an end tag, so checking there bounds what runs after the stop.
    """
    from bs4 import BeautifulSoup

    class StoppableSoup(BeautifulSoup):  # type: ignore[misc]
        def __init__(self, markup: bytes | str, stop: threading.Event, **kwargs: Any) -> None:
            self.agentcore_stop = stop  # set before the parse, which runs in __init__
            super().__init__(markup, "html.parser", **kwargs)

        def handle_data(self, data: str) -> None:
            _check(self.agentcore_stop)
            super().handle_data(data)

        def handle_starttag(self, *args: Any, **kwargs: Any) -> Any:
            _check(self.agentcore_stop)
            return super().handle_starttag(*args, **kwargs)

        def handle_endtag(self, *args: Any, **kwargs: Any) -> Any:
            _check(self.agentcore_stop)
            return super().handle_endtag(*args, **kwargs)

    return StoppableSoup


@functools.cache
def _converter_class() -> Any:
    """markdownify with its whitespace handling kept linear in the page's size, stoppable per element.

    Its default text normalisation (`[\\t \\r\\n]*[\\r\\n][\\t \\r\\n]*`) and its `<pre>`
    strip (`[ \\n]*$`) are searched at every position of a run of blanks, so 200 KB of
    spaces took minutes, holding the GIL and with it the event loop and every timeout.
    `wrap` without a width collapses whitespace with one linear pass (a source newline
    inside a paragraph becomes a space, as Markdown renders it anyway); `<pre>` text is
    stripped here with str methods instead.
    """
    from markdownify import MarkdownConverter

    class LinearConverter(MarkdownConverter):  # type: ignore[misc]
        def __init__(self, stop: threading.Event) -> None:
            super().__init__(heading_style="ATX", bullets="-", wrap=True, wrap_width=None, strip_pre=None)
            self.agentcore_stop = stop

        def process_tag(self, node: Any, parent_tags: Any = None) -> str:
            _check(self.agentcore_stop)
            return str(super().process_tag(node, parent_tags=parent_tags))

        def convert_pre(self, el: Any, text: str, parent_tags: Any) -> str:
            return str(super().convert_pre(el, _strip_pre(text), parent_tags))

    return LinearConverter


def _strip_pre(text: str) -> str:
    """markdownify's `strip_pre`: leading blank lines and every trailing space and newline."""
    lead = text[: len(text) - len(text.lstrip(" \n"))]
    return text[lead.rfind("\n") + 1 :].rstrip(" \n")


def _absolute(base_url: str, link: str) -> str:
    try:
        return urljoin(base_url, link)
    except ValueError:
        return link


async def _to_text(content_type: str, body: bytes, base_url: str) -> str:
    media, charset = _media_type(content_type)
    kind = _kind(media)
    if media == "":
        if b"\x00" in body[:8192]:
            raise FetchRefused("binary_content", "the response is binary, not text")
        head = body[:512].lstrip().lower()
        kind = "html" if head.startswith((b"<!doctype html", b"<html")) else "text"
    if kind is None:
        raise FetchRefused("binary_content", "the response is binary, not text")
    if kind == "html":
        # CPU-bound on large pages; abandoning keeps timeouts and cancellation prompt,
        # and the stop set on the way out ends the abandoned conversion too.
        stop = threading.Event()
        try:
            return await anyio.to_thread.run_sync(html_to_markdown, body, charset, base_url, stop, abandon_on_cancel=True)
        finally:
            stop.set()
    return _decoded(body, charset)


def _decoded(body: bytes, charset: str | None) -> str:
    if charset is not None:
        try:
            return body.decode(charset, errors="replace")
        except (LookupError, UnicodeError):
            # Not a text encoding (zlib, base64) or one without replacement (idna,
            # punycode): the server's label is unusable, so read it as undeclared.
            pass
    return body.decode("utf-8", errors="replace")


# --------------------------------------------------------------------------
# the fetch loop


def _next_url(current: httpx.URL, location: str) -> str:
    if location == "" or any(ord(c) < 0x21 or ord(c) == 0x7F for c in location) or "\\" in location:
        raise FetchRefused("invalid_redirect", "the redirect location is malformed")
    try:
        return str(current.join(location))
    except (httpx.InvalidURL, ValueError, TypeError, UnicodeError):
        raise FetchRefused("invalid_redirect", "the redirect location is malformed") from None


async def _open_hop(url: str, policy: FetchPolicy) -> tuple[httpx.URL, CanonicalTarget, PinnedTransport]:
    try:
        request_url, target = parse_url(url)
    except HostRefused as exc:
        raise FetchRefused(exc.code, exc.message) from None
    try:
        addresses = await vet_target(target.host, target.port, policy.host_patterns)
    except AddressRefused as exc:
        raise FetchRefused(exc.code, exc.message) from None
    transport = PinnedTransport(target.host, target.port, addresses, ssl_context=policy.ssl_context)
    return request_url, target, transport


async def _fetch(url: str, policy: FetchPolicy) -> FetchResult:
    redirects: list[str] = []
    current = url
    previous: CanonicalTarget | None = None
    while True:
        request_url, target, transport = await _open_hop(current, policy)
        if previous is not None and previous.scheme == "https" and target.scheme == "http":
            raise FetchRefused("insecure_redirect", "a redirect from https to http was refused")
        if previous is not None and policy.hop_check is not None:
            policy.hop_check(target)
        previous = target
        async with httpx.AsyncClient(
            transport=transport,
            follow_redirects=False,
            trust_env=False,
            timeout=httpx.Timeout(policy.timeout_s),
            headers=_REQUEST_HEADERS,
        ) as client:
            async with client.stream("GET", request_url) as response:
                location = response.headers.get("location")
                if response.status_code in _REDIRECT_STATUSES and location is not None:
                    if len(redirects) >= policy.max_redirects:
                        raise FetchRefused("too_many_redirects", "the redirect limit was reached")
                    current = _next_url(request_url, location)
                    redirects.append(current)
                    if policy.on_progress is not None:
                        await policy.on_progress(f"redirect {len(redirects)} (status {response.status_code})")
                    continue
                content_type = response.headers.get("content-type", "")
                media, _ = _media_type(content_type)
                if media and _kind(media) is None:
                    raise FetchRefused("binary_content", "the response is binary, not text")
                if policy.on_progress is not None:
                    await policy.on_progress(f"status {response.status_code}, reading the body")
                body, wire = await _read_body(response, policy.max_download_bytes, policy.on_progress)
                status = response.status_code
                if policy.on_progress is not None:
                    await policy.on_progress(f"received {wire} bytes in all")
        text = await _to_text(content_type, body, str(request_url))
        return FetchResult(
            url=str(request_url),
            status=status,
            content_type=content_type,
            text=text,
            redirects=redirects,
            downloaded_bytes=wire,
        )


async def fetch_url(url: str, policy: FetchPolicy) -> FetchResult:
    """Fetch *url* under *policy*; every refusal or failure is FetchRefused.

    Cancellation from an enclosing anyio scope propagates unchanged; the
    ``async with`` blocks close the connection on the way out.
    """
    try:
        with anyio.fail_after(policy.timeout_s):
            return await _fetch(url, policy)
    except TimeoutError:
        raise FetchRefused("timeout", "the fetch did not finish within the time limit") from None
    except httpx.TimeoutException:
        raise FetchRefused("timeout", "the fetch did not finish within the time limit") from None
    except httpx.ConnectError:
        raise FetchRefused("connect_failed", "could not connect to the vetted address") from None
    except httpx.HTTPError:
        raise FetchRefused("http_error", "the HTTP exchange failed") from None
