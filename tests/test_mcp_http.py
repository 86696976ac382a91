"""Remote MCP servers (streamable HTTP, SSE) on loopback, dialled like web_fetch dials (MCP-9).

The server is the demo MCPServer served by uvicorn in a subprocess. A
loopback address is forbidden unless the server's own net.hosts names it
literally with its port (NET-5), which is what these manifests do; the
refusals show the same URL refused when the entry does not list it, when it
is named by a host name that resolves to loopback, and when the agent (not
the server) lists it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentcore.api import Engine, compile_manifest
from mcp_support import http_server, manifest

pytestmark = pytest.mark.anyio


def remote(url: str, hosts: list[str], **extra: Any) -> dict[str, Any]:
    return {"url": url, "requires": {"net": {"hosts": hosts}}, **extra}


async def status_and_call(ws: Path, entry: dict[str, Any], **kw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    engine = Engine(compile_manifest(manifest({"web": entry}, **kw), workspace=ws))
    with engine.open_session() as session:
        (status,) = await engine.mcp_status(session)
        env = (await engine.call(session, "web__echo", {"text": "over http"})).to_dict()
    await session.stores.tool_source.aclose()
    return status, env


@pytest.mark.parametrize("kind,path", [("http", "/mcp"), ("sse", "/sse")])
async def test_a_remote_server_listed_in_its_own_net_hosts_works(tmp_path: Path, kind: str, path: str) -> None:
    with http_server(kind) as port:
        entry = remote(f"http://127.0.0.1:{port}{path}", [f"127.0.0.1:{port}"], **({"transport": "sse"} if kind == "sse" else {}))
        status, env = await status_and_call(tmp_path, entry)
    assert status["state"] == "ready" and status["sandbox"] == "remote" and status["transport"] == kind
    assert env["data"] == {"content": "over http", "is_error": False}
    # A remote server's read-only hint cannot be verified: never an auto-approved kind.
    assert {t["id"]: t["kind"] for t in status["tools"]}["web__echo"] == "other"


async def test_a_remote_server_is_dialled_only_when_vetted(tmp_path: Path) -> None:
    with http_server("http") as port:
        url = f"http://127.0.0.1:{port}/mcp"
        cases = {
            "not listed": (remote(url, [f"127.0.0.1:{port + 1}"]), {}),
            "listed by the agent only": (remote(url, []), {"requires": {"net": {"hosts": [f"127.0.0.1:{port}"]}}}),
            "a name that resolves to loopback": (remote(f"http://localhost:{port}/mcp", [f"localhost:{port}"]), {}),
            "userinfo in the url": (remote(f"http://user@127.0.0.1:{port}/mcp", [f"127.0.0.1:{port}"]), {}),
        }
        cases["denied by a manifest rule"] = (remote(url, [f"127.0.0.1:{port}"]),
                                               {"rules": [{"permission": "net.fetch", "pattern": f"127.0.0.1:{port}", "action": "deny"},
                                                          {"permission": "*", "pattern": "*", "action": "allow"}]})
        reasons = {}
        for what, (entry, extra) in cases.items():
            status, env = await status_and_call(tmp_path, entry, **extra)
            assert status["state"] == "failed" and env["metadata"]["error_code"] == "unknown_tool", what
            reasons[what] = status["reason"]
    assert reasons["not listed"] == reasons["listed by the agent only"] == "its host is not in the server's net.hosts"
    assert reasons["a name that resolves to loopback"] == "its host is refused (forbidden_address)"
    assert reasons["userinfo in the url"].startswith("its url is refused")
    assert reasons["denied by a manifest rule"] == "a manifest rule denies its host"


async def test_headers_come_from_the_environment_and_are_never_shown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token = "header-secret-0123456789"
    with http_server("http", token=token) as port:
        entry = remote(f"http://127.0.0.1:{port}/mcp", [f"127.0.0.1:{port}"], headers={"X-Token": {"from_env": "WEB_TOKEN_FOR_TEST"}})
        monkeypatch.setenv("WEB_TOKEN_FOR_TEST", token)
        status, env = await status_and_call(tmp_path, entry)
        assert status["state"] == "ready" and env["type"] == "output"
        assert status["headers"] == ["X-Token"] and token not in json.dumps(status)
        # The wrong token: the server answers 401 and the session goes on without it.
        monkeypatch.setenv("WEB_TOKEN_FOR_TEST", "wrong-token-value")
        status, env = await status_and_call(tmp_path, entry)
        assert status["state"] in ("restarting", "failed") and env["metadata"]["error_code"] in ("unknown_tool", "server_unavailable")
        assert "wrong-token-value" not in json.dumps([status, env])
        monkeypatch.delenv("WEB_TOKEN_FOR_TEST")
        status, _ = await status_and_call(tmp_path, entry)
        assert status["state"] == "unavailable" and "WEB_TOKEN_FOR_TEST" in status["reason"]
