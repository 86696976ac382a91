"""Pinned dialing for `httpx2` clients (the MCP SDK's HTTP transports use httpx2).

The same rule as `fetch.PinnedTransport` (NET-5 to NET-7), for the other
httpx line: a transport whose connections go only to addresses vetted
beforehand, and only for the vetted host and port. The URL keeps the host
name, so the Host header, SNI and certificate checks use it; environment
proxies, `SSL_CERT_*` variables and unix sockets are never used. A
redirect or a request to any other host or port fails to connect.

Also bounds each response body that is not an event stream (`max_body_bytes`),
so a server cannot make the client buffer an unbounded JSON answer; bodies are
asked for, and accepted, only without a content encoding, so the bound holds
for what the client decodes too.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Sequence

import httpcore2
import httpx2

from agentcore.net.pinning import pinned_backend
from agentcore.net.vetting import IPAddress

__all__ = ["BodyTooLarge", "PinnedTransport2", "UnrequestedEncoding"]


class BodyTooLarge(httpx2.TransportError):
    """A response body exceeded the transport's bound."""


class UnrequestedEncoding(httpx2.TransportError):
    """A response body came with a content encoding although identity was asked for."""


class _BoundedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._limit:
                raise BodyTooLarge(f"the response body exceeds {self._limit} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class PinnedTransport2(httpx2.AsyncHTTPTransport):
    """An httpx2 transport whose connections go to `addresses` only (see the module docstring)."""

    def __init__(
        self,
        host: str,
        port: int,
        addresses: Sequence[IPAddress],
        *,
        ssl_context: ssl.SSLContext | None = None,
        max_body_bytes: int | None = None,
    ) -> None:
        context = ssl_context if ssl_context is not None else httpx2.create_ssl_context(trust_env=False)
        super().__init__(verify=context, trust_env=False, retries=0)
        self._max_body = max_body_bytes
        # httpx2 has no public hook for the network backend either: replace the pool it built.
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=context,
            max_connections=8,
            max_keepalive_connections=4,
            http1=True,
            http2=False,
            retries=0,
            network_backend=pinned_backend(httpcore2, host, port, addresses),
        )

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Send through the pinned pool; bound the body unless it is an event stream."""
        # The client decodes Content-Encoding after the transport, where the bound below
        # does not reach: a 16 MiB gzip body would inflate to gigabytes.  So ask for the
        # body unencoded and refuse one that is encoded anyway.
        request.headers["Accept-Encoding"] = "identity"
        response = await super().handle_async_request(request)
        if response.headers.get("content-encoding", "").strip().lower() not in ("", "identity"):
            await response.aclose()
            raise UnrequestedEncoding("the response body is content-encoded although identity was asked for")
        media = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if self._max_body is not None and media != "text/event-stream":
            response.stream = _BoundedStream(response.stream, self._max_body)  # type: ignore[arg-type]
        return response
