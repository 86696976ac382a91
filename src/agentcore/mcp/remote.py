"""Remote MCP servers (streamable HTTP, SSE), dialled like `web_fetch` dials (MCP-9).

The URL is parsed and canonicalised once (NET-1 to NET-4); its host and port
must match the server's own `net.hosts` (not the agent's: a server is granted
what its entry grants); the name is resolved and every address vetted
(NET-5, NET-6); and the SDK gets an httpx2 client whose transport dials only
those addresses for that host and port (NET-7). Redirects to another origin
cannot connect. A manifest deny rule on `net.fetch` (or `*`) naming the host
refuses it too, as the sandbox proxy does. The check runs at every
(re)start, so a name that starts resolving to a private address is refused then.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AsyncExitStack
from typing import Any

from .config import ServerPlan

HTTP_TIMEOUT_S = 30.0
SSE_READ_TIMEOUT_S = 300.0


def _denied(target: Any, rules: Sequence[Any]) -> bool:
    """Whether a manifest deny rule on `net.fetch` or `*` names this host and port (pinned, PERM-9)."""
    from ..rules.evaluator import manifest_host_denies

    return manifest_host_denies(rules)(target.host, target.port)


async def _vetted(plan: ServerPlan, rules: Sequence[Any]) -> tuple[str, Any, list[Any]]:
    """(url, canonical target, addresses to dial); `PermissionError` with the reason when refused."""
    from ..net.hosts import HostRefused, parse_url
    from ..net.vetting import AddressRefused, vet_target

    try:
        url, target = parse_url(plan.url or "")
    except HostRefused as exc:
        raise PermissionError(f"its url is refused ({exc.code})") from None
    if _denied(target, rules):
        raise PermissionError("a manifest rule denies its host")
    try:
        addresses = await vet_target(target.host, target.port, tuple(plan.grant.net_hosts))
    except AddressRefused as exc:
        if exc.code == "host_not_allowed":
            raise PermissionError("its host is not in the server's net.hosts") from None
        if exc.code == "resolve_failed":  # may be passing: started again later
            raise ConnectionError("its host name did not resolve") from None
        raise PermissionError(f"its host is refused ({exc.code})") from None
    return str(url), target, addresses


async def open_remote(plan: ServerPlan, stack: AsyncExitStack, max_message_bytes: int, rules: Sequence[Any] = ()) -> tuple[Any, Any]:
    """The SDK's read and write streams for `plan`'s url, through a pinned client; entered on `stack`.

    `rules`: the manifest's rules; a manifest deny on `net.fetch` (or `*`) of the host refuses it.
    """
    import httpx2

    from ..net.pinned2 import PinnedTransport2

    url, target, addresses = await _vetted(plan, rules)

    def client(headers: dict[str, str] | None = None, timeout: Any = None, auth: Any = None) -> Any:
        return httpx2.AsyncClient(
            transport=PinnedTransport2(target.host, target.port, addresses, max_body_bytes=max_message_bytes),
            headers={**dict(plan.headers), **(headers or {})},
            timeout=timeout or httpx2.Timeout(HTTP_TIMEOUT_S, read=SSE_READ_TIMEOUT_S),
            follow_redirects=False,
            trust_env=False,
        )

    if plan.transport == "sse":
        from mcp.client.sse import sse_client

        streams = sse_client(url, timeout=HTTP_TIMEOUT_S, sse_read_timeout=SSE_READ_TIMEOUT_S, httpx_client_factory=client)
    else:
        from mcp.client.streamable_http import streamable_http_client

        http = await stack.enter_async_context(client())
        streams = streamable_http_client(url, http_client=http, max_sse_event_size=max_message_bytes)
    read, write = await stack.enter_async_context(streams)
    return read, write
