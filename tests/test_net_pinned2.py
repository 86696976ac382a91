"""PinnedTransport2 (the MCP SDK's httpx2 line) against real loopback servers."""

from __future__ import annotations

import gzip
import ipaddress
from collections.abc import Iterator

import httpx2
import pytest

from agentcore.net.pinned2 import PinnedTransport2
from test_net_servers import RecordingServer, Reply

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

LOOPBACK = ipaddress.IPv4Address("127.0.0.1")
LIMIT = 64 * 1024


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def server() -> Iterator[RecordingServer]:
    bomb = gzip.compress(b"a" * (4 * 2**20))  # ~4 KiB on the wire, 4 MiB decoded
    assert len(bomb) < LIMIT
    srv = RecordingServer({
        "/bomb": Reply(200, {"Content-Type": "application/json", "Content-Encoding": "gzip"}, bomb),
        "/plain": Reply(200, {"Content-Type": "application/json"}, b'{"ok": true}'),
    })
    yield srv
    srv.close()


def client(srv: RecordingServer) -> httpx2.AsyncClient:
    transport = PinnedTransport2("127.0.0.1", srv.port, [LOOPBACK], max_body_bytes=LIMIT)
    return httpx2.AsyncClient(transport=transport, trust_env=False)


async def test_an_encoded_body_cannot_inflate_past_the_bound(server: RecordingServer) -> None:
    # httpx2 decodes Content-Encoding after the transport, so a bound on the raw
    # stream let a 4 KiB gzip body become 4 MiB in memory (16 MiB: gigabytes).
    decoded: list[int] = []
    async with client(server) as http:
        with pytest.raises(httpx2.TransportError):
            response = await http.get(f"http://127.0.0.1:{server.port}/bomb")
            decoded.append(len(response.content))
        assert decoded == []
        response = await http.get(f"http://127.0.0.1:{server.port}/plain")
        assert response.json() == {"ok": True}
    assert [r.headers.get("accept-encoding") for r in server.requests] == ["identity", "identity"]
