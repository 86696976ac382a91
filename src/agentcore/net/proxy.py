"""Host-side filtering proxy for sandboxed commands.

A sandbox with ``net.hosts`` runs in its own network namespace; its only way
out is :class:`FilteringProxy`. Inside, ``relay.py`` listens on
127.0.0.1:PORT and passes every accepted connection to the proxy over an
inherited unix socket pair (``serve_channel``); the command gets
``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY`` pointing at the relay.

Two request shapes are served, each on its own client connection:

* ``CONNECT host:port`` -- a tunnel (HTTPS and anything else over TCP);
* ``METHOD http://host[:port]/path`` (absolute form) -- plain HTTP, sent
  upstream in origin form with a rewritten Host header and
  ``Connection: close``; the rest of the client connection is piped to that
  same upstream, so it can never reach a second host.

Every decision goes to ``log`` before anything is forwarded (paths, queries
and headers are never logged).  Hosts are canonicalised, matched and vetted
exactly as in web_fetch, and the proxy dials the vetted address itself.
"""

from __future__ import annotations

import os
import re
import socket
import stat
import struct
from collections.abc import Callable
from typing import Any

import anyio
from anyio.abc import ByteStream, SocketStream

from agentcore.net.hosts import (
    DEFAULT_PORTS,
    MAX_URL_LEN,
    HostPattern,
    HostRefused,
    format_authority,
    parse_authority,
    parse_url,
)
from agentcore.net.vetting import AddressRefused, IPAddress, matching_pattern, vet_target

__all__ = ["FilteringProxy"]

# The target as long as parse_url takes (web_fetch's bound): a longer one is refused as malformed.
_REQUEST_LINE = re.compile(r"([A-Z]{1,20}) (\S{1,%d}) HTTP/1\.[01]" % MAX_URL_LEN)
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "proxy-connection",
        "keep-alive",
        "proxy-authorization",
        "proxy-authenticate",
        "te",
        "trailer",
        "upgrade",
        "host",
    }
)
_REASONS = {
    400: "Bad Request",
    403: "Forbidden",
    408: "Request Timeout",
    431: "Request Header Fields Too Large",
    502: "Bad Gateway",
}
_STATUS_FOR_CODE = {
    "host_not_allowed": 403,
    "denied_by_rule": 403,
    "forbidden_address": 403,
    "resolve_failed": 502,
    "connect_failed": 502,
    "head_too_large": 431,
    "head_timeout": 408,
}


class _Refusal(Exception):
    def __init__(self, code: str, host: str | None = None, port: int | None = None) -> None:
        super().__init__(code)
        self.code = code
        self.host = host
        self.port = port


MAX_CONNECTIONS = 256  # concurrent client connections per proxy; more are closed unanswered


class FilteringProxy:
    def __init__(
        self,
        host_patterns: tuple[HostPattern, ...],
        log: Callable[[dict[str, Any]], None],
        *,
        head_timeout_s: float = 30.0,
        connect_timeout_s: float = 15.0,
        max_head_bytes: int = 64 * 1024,
        denied: Callable[[str, int], bool] | None = None,
    ) -> None:
        self.host_patterns = tuple(host_patterns)
        # NET-8: a manifest deny rule on `net.fetch` (or `*`) naming (host, port) refuses it, net.hosts or not.
        self._denied = denied
        self._log = log
        self._head_timeout_s = head_timeout_s
        self._connect_timeout_s = connect_timeout_s
        self._max_head_bytes = max_head_bytes
        self._active = 0  # client connections being handled (bounded by MAX_CONNECTIONS)

    # ------------------------------------------------------------------ serve

    async def serve_channel(
        self, channel: socket.socket, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve the connections the in-sandbox relay hands over `channel` (SCM_RIGHTS).

        Takes ownership of `channel`. Returns when the relay side closes it (the
        sandbox has ended) once the connections received so far are done, or
        when cancelled. Anything received that is not a connected TCP socket is
        closed unread: the channel's sender lives inside the sandbox and is
        trusted with nothing.
        """
        channel.setblocking(False)
        with channel:
            async with anyio.create_task_group() as group:
                task_status.started()
                while (fds := await _receive_fds(channel, 4)) is not None:
                    self._adopt(fds, group)

    def _adopt(self, fds: list[int], group: anyio.abc.TaskGroup) -> None:
        """Serve each received descriptor that is a connected TCP socket, within MAX_CONNECTIONS; close the rest."""
        for fd in fds:
            sock = _adopt_tcp(fd)
            if sock is None:
                continue
            if self._active >= MAX_CONNECTIONS:
                _close_without_linger(sock.detach())
                continue
            self._active += 1  # counted before the task starts: the bound holds for a burst
            group.start_soon(self._serve_socket, sock)

    async def _serve_socket(self, sock: socket.socket) -> None:
        try:
            client = await anyio.abc.SocketStream.from_socket(sock)
        except BaseException:
            _close_without_linger(sock.detach())
            self._active -= 1
            raise
        await self._handle(client, sock)

    # ---------------------------------------------------------------- handling

    def _decide(self, decision: str, method: str | None, code: str, host: str | None, port: int | None,
                pattern: HostPattern | None = None) -> None:
        entry: dict[str, Any] = {
            "event": "net.proxy",
            "decision": decision,
            "method": method,
            "host": host,
            "port": port,
            "code": code,
        }
        if pattern is not None:
            entry["pattern"] = pattern.canonical
        self._log(entry)

    async def _handle(self, client: SocketStream, sock: socket.socket) -> None:
        try:
            try:
                await self._handle_one(client)
            except Exception:
                # Never let one connection take the proxy down, and never
                # forward after an unexpected error (a failing log included).
                await _send_refusal(client, "internal_error")
        finally:
            # The descriptor is closed here, not by the event loop: see _close_without_linger.
            fd = sock.detach()
            try:
                await client.aclose()  # unregisters the descriptor at once; the loop's own close is now a no-op
            finally:
                _close_without_linger(fd)
                self._active -= 1

    async def _handle_one(self, client: SocketStream) -> None:
        method: str | None = None
        try:
            try:
                with anyio.fail_after(self._head_timeout_s):
                    head, rest = await self._read_head(client)
            except TimeoutError:
                raise _Refusal("head_timeout") from None
            if head is None:
                return  # the client went away before sending a request
            method, target, headers = _parse_head(head)
            if method == "CONNECT":
                await self._connect(client, target, rest)
            else:
                await self._forward(client, method, target, headers, rest)
        except _Refusal as refusal:
            refused = refusal
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, OSError):
            return  # a peer went away mid-stream; nothing left to tell anyone
        else:
            return
        self._decide("deny", method, refused.code, refused.host, refused.port)
        await _send_refusal(client, refused.code)

    async def _read_head(self, client: ByteStream) -> tuple[bytes | None, bytes]:
        buffer = b""
        while True:
            end = buffer.find(b"\r\n\r\n")
            if end > self._max_head_bytes or (end < 0 and len(buffer) > self._max_head_bytes):
                raise _Refusal("head_too_large")
            if end >= 0:
                return buffer[:end], buffer[end + 4 :]
            try:
                buffer += await client.receive()
            except anyio.EndOfStream:
                return None, b""

    async def _target(self, method: str, host: str, port: int) -> tuple[list[IPAddress], HostPattern | None]:
        if self._denied is not None and self._denied(host, port):
            raise _Refusal("denied_by_rule", host, port)
        try:
            addresses = await vet_target(host, port, self.host_patterns)
        except AddressRefused as exc:
            raise _Refusal(exc.code, host, port) from None
        pattern = matching_pattern(self.host_patterns, host, port)
        self._decide("allow", method, "allowed", host, port, pattern)
        return addresses, pattern

    async def _dial(self, host: str, addresses: list[IPAddress], port: int) -> SocketStream:
        for address in addresses:
            try:
                with anyio.fail_after(self._connect_timeout_s):
                    return await anyio.connect_tcp(str(address), port)
            except (OSError, TimeoutError):
                continue
        raise _Refusal("connect_failed", host, port)

    async def _connect(self, client: SocketStream, target: str, rest: bytes) -> None:
        try:
            host, port = parse_authority(target)
        except HostRefused as exc:
            raise _Refusal(exc.code) from None
        addresses, _ = await self._target("CONNECT", host, port)
        upstream = await self._dial(host, addresses, port)
        async with upstream:
            await client.send(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            await _pipe(client, upstream, rest)

    async def _forward(
        self, client: SocketStream, method: str, target: str, headers: list[tuple[str, str]], rest: bytes
    ) -> None:
        if not target.lower().startswith(("http://", "https://")):
            raise _Refusal("not_a_proxy_request")
        try:
            url, canonical = parse_url(target)
        except HostRefused as exc:
            raise _Refusal(exc.code) from None
        if canonical.scheme != "http":
            raise _Refusal("https_requires_connect", canonical.host, canonical.port)
        names = {name.lower() for name, _ in headers}
        if "transfer-encoding" in names and "content-length" in names:
            raise _Refusal("ambiguous_body_length", canonical.host, canonical.port)
        addresses, _ = await self._target(method, canonical.host, canonical.port)
        upstream = await self._dial(canonical.host, addresses, canonical.port)
        explicit = None if canonical.port == DEFAULT_PORTS["http"] else canonical.port
        lines = [f"{method} {url.raw_path.decode('ascii')} HTTP/1.1", f"Host: {format_authority(canonical.host, explicit)}"]
        dropped = _connection_tokens(headers) | _HOP_BY_HOP
        lines += [f"{name}: {value}" for name, value in headers if name.lower() not in dropped]
        lines.append("Connection: close")
        async with upstream:
            await upstream.send(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
            await _pipe(client, upstream, rest)


# ---------------------------------------------------------------------------
# helpers


async def _receive_fds(channel: socket.socket, maxfds: int) -> list[int] | None:
    """The descriptors sent with the next byte on the non-blocking stream socket `channel`; None at its end.

    Not anyio's `UNIXSocketStream.receive_fds`: its reader callback resolves a
    future that a cancellation may already have cancelled, which the event loop
    then reports as an InvalidStateError when the channel becomes readable as
    the proxy is cancelled (the sandbox ending). `anyio.wait_readable` guards it.
    Other ancillary data is dropped by the kernel or ignored; a broken channel ends it.
    """
    while True:
        try:
            data, fds, _flags, _addr = socket.recv_fds(channel, 1, maxfds, socket.MSG_CMSG_CLOEXEC)
        except BlockingIOError:
            await anyio.wait_readable(channel)
            continue
        except OSError:
            return None
        if not data:
            for fd in fds:
                _close_without_linger(fd)
            return None
        return fds


_NO_LINGER = struct.pack("ii", 0, 0)


def _close_without_linger(fd: int) -> None:
    """Close `fd`, switching SO_LINGER off right before, with nothing run in between.

    A received socket comes from inside the sandbox, which may have set SO_LINGER on it
    (also later, through a copy it kept): closing the last reference of a socket with
    unsent data then blocks in close(), non-blocking or not, for the linger time, and
    that close runs in the event loop, holding every session, timeout and abort of the host.
    """
    if fd < 0:
        return  # already closed (by the event loop, after the connection broke)
    try:
        sock = socket.socket(fileno=fd)
    except OSError:  # not a socket (or not one Python can wrap): nothing lingers
        try:
            os.close(fd)
        except OSError:
            pass
        return
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _NO_LINGER)
    except OSError:
        pass
    sock.close()


def _adopt_tcp(fd: int) -> socket.socket | None:
    """`fd` as a socket if it is a connected TCP stream socket, else close it and return None."""
    try:
        if not stat.S_ISSOCK(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        sock = socket.socket(fileno=fd)
    except OSError:
        _close_without_linger(fd)
        return None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _NO_LINGER)  # see _close_without_linger
        ok = sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM
        sock.getpeername()  # connected (an accepted connection always is)
    except OSError:
        ok = False
    if not ok:
        _close_without_linger(sock.detach())
        return None
    return sock


def _parse_head(head: bytes) -> tuple[str, str, list[tuple[str, str]]]:
    try:
        text = head.decode("ascii")
    except UnicodeDecodeError:
        raise _Refusal("malformed_request") from None
    lines = text.split("\r\n")
    # A bare CR or LF left in any line is a smuggling attempt or garbage.
    if any("\r" in line or "\n" in line or "\x00" in line for line in lines):
        raise _Refusal("malformed_request")
    match = _REQUEST_LINE.fullmatch(lines[0])
    if match is None:
        raise _Refusal("malformed_request")
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not _HEADER_NAME.fullmatch(name):
            raise _Refusal("malformed_request")  # includes obsolete line folding
        headers.append((name, value.strip(" \t")))
    return match.group(1), match.group(2), headers


def _connection_tokens(headers: list[tuple[str, str]]) -> frozenset[str]:
    tokens: set[str] = set()
    for name, value in headers:
        if name.lower() in ("connection", "proxy-connection"):
            tokens.update(t.strip().lower() for t in value.split(",") if t.strip())
    return frozenset(tokens)


async def _send_refusal(client: ByteStream, code: str) -> None:
    status = _STATUS_FOR_CODE.get(code, 400 if code != "internal_error" else 502)
    body = f"agentcore proxy refused the request: {code}\n".encode("ascii")
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
        f"Content-Type: text/plain; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
        f"X-Agentcore-Refusal: {code}\r\nConnection: close\r\n\r\n"
    ).encode("ascii")
    try:
        await client.send(head + body)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass


async def _pipe(client: SocketStream, upstream: SocketStream, rest: bytes) -> None:
    """Copy both ways until the upstream is done or either side breaks."""
    if rest:
        await upstream.send(rest)
    async with anyio.create_task_group() as group:

        async def client_to_upstream() -> None:
            try:
                async for chunk in client:
                    await upstream.send(chunk)
                await upstream.send_eof()  # half-close: the response may still come
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                group.cancel_scope.cancel()

        async def upstream_to_client() -> None:
            try:
                async for chunk in upstream:
                    await client.send(chunk)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                pass
            group.cancel_scope.cancel()

        group.start_soon(client_to_upstream)
        group.start_soon(upstream_to_client)
