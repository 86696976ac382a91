"""Pinned dialing, once for both httpcore lines (`httpcore` for web_fetch, `httpcore2` for the MCP SDK).

A connection goes only to addresses vetted beforehand (NET-5 to NET-7), and
only for the vetted host and port: a redirect or a request to any other
target fails to connect, and unix sockets are never reachable. The two lines
have the same backend interface under different module names, so the class
is made for the module it is given; one body keeps the two from drifting.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from types import ModuleType
from typing import Any

from .hosts import HostRefused, canonical_host
from .vetting import IPAddress

__all__ = ["pinned_backend"]


def pinned_backend(core: ModuleType, host: str, port: int, addresses: Sequence[IPAddress]) -> Any:
    """A `core.AsyncNetworkBackend` that dials only `addresses`, and only for `host`:`port`."""
    return _backend_class(core)(host, port, addresses)


@lru_cache(maxsize=None)
def _backend_class(core: ModuleType) -> type:
    class PinnedBackend(core.AsyncNetworkBackend):  # type: ignore[name-defined,misc]
        def __init__(self, host: str, port: int, addresses: Sequence[IPAddress]) -> None:
            self._host = host
            self._port = port
            self._addresses = tuple(addresses)
            self._inner = core.AnyIOBackend()

        async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                              socket_options: object = None) -> Any:
            try:
                same = canonical_host(host) == self._host and port == self._port
            except HostRefused:
                same = False
            if not same or not self._addresses:
                raise core.ConnectError("connection target differs from the vetted target")
            failure: Exception = core.ConnectError("no vetted address accepted the connection")
            for address in self._addresses:
                try:
                    return await self._inner.connect_tcp(str(address), port, timeout=timeout, local_address=local_address,
                                                         socket_options=socket_options)
                except (core.ConnectError, core.ConnectTimeout) as exc:
                    failure = exc
            raise failure

        async def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: object = None) -> Any:
            raise core.ConnectError("unix sockets are not reachable")

        async def sleep(self, seconds: float) -> None:
            await self._inner.sleep(seconds)

    PinnedBackend.__qualname__ = f"PinnedBackend[{core.__name__}]"
    return PinnedBackend
