"""Helpers for the MCP tests (no tests here): real servers, manifests that grant them what they need.

The servers are real processes: `mcp_servers/demo_server.py` (the SDK's
MCPServer, as stdio, streamable HTTP or SSE), `mcp_servers/bad_server.py`
(the SDK's low-level server, listing whatever a test asks for) and the
pinned npm `@modelcontextprotocol/server-filesystem`. A sandboxed Python
server needs to read its interpreter and the installed SDK, which may live
under a home directory (hidden in the sandbox): `python_grant()` is that.
(pytest is imported only where a helper skips or fails: bench/bench_mcp.py uses this too.)
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import external_support
from external_support import install, missing

HERE = Path(__file__).resolve().parent
DEMO = HERE / "mcp_servers" / "demo_server.py"
BAD = HERE / "mcp_servers" / "bad_server.py"
PYTHON = sys.executable
NPM_PACKAGES = ("@modelcontextprotocol/server-filesystem@2026.8.31",)
ALLOW_ALL = [{"permission": "*", "pattern": "*", "action": "allow"}]


def python_grant() -> list[str]:
    """fs.read patterns a sandboxed Python MCP server needs: its interpreter, the venv, the SDK, the test servers."""
    roots = {
        os.path.realpath(sys.base_prefix),
        os.path.realpath(sys.prefix),
        os.path.realpath(sysconfig.get_paths()["purelib"]),
        os.path.realpath(sysconfig.get_paths()["platlib"]),
        str(HERE / "mcp_servers"),
    }
    return sorted(f"{r}/**" for r in roots)


def server(script: Path = DEMO, *args: str, read: list[str] | None = None, write: list[str] | None = None,
           hosts: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    """An `mcp:` entry running `script` with this interpreter; `read`/`write`/`hosts` add to its grant."""
    requires: dict[str, Any] = {"fs": {"read": python_grant() + list(read or []), "write": list(write or [])}}
    if hosts:
        requires["net"] = {"hosts": list(hosts)}
    return {"command": PYTHON, "args": [str(script), *args], "requires": requires, **extra}


def manifest(mcp: dict[str, Any], *, tools: list[str] | None = None, rules: list[dict[str, str]] | None = None,
             environment: str = "bwrap", **extra: Any) -> dict[str, Any]:
    return {
        "name": "mcp-test",
        "tools": list(tools if tools is not None else ["read"]),
        "requires": {"fs": {"read": ["{workspace}/**"], "write": ["{workspace}/**"]}},
        "rules": list(rules if rules is not None else ALLOW_ALL),
        "environment": environment,
        "mcp": mcp,
        **extra,
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def http_server(kind: str = "http", token: str | None = None) -> Iterator[int]:
    """The demo server over streamable HTTP (`kind="http"`, path /mcp) or SSE (path /sse) on a loopback port."""
    port = free_port()
    args = [PYTHON, str(DEMO), kind, str(port)] + ([token] if token else [])
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    import pytest

                    err = proc.stderr.read().decode() if proc.stderr else ""
                    pytest.fail(f"the HTTP MCP server did not start: {err[-2000:]}")
                time.sleep(0.05)  # polling for the port to open (the wait is bounded above)
        yield port
    finally:
        proc.kill()
        proc.wait()



def require_bwrap() -> None:
    external_support.require_bwrap("MCP sandbox tests")






def filesystem_server() -> tuple[str, str, Path]:
    """(node, the server's entry script, the npm directory) of the pinned reference filesystem server."""
    d = install("npm-mcp", NPM_PACKAGES)
    if d is None:
        missing("node and npm are needed for the reference MCP filesystem server")
    assert d is not None
    entry = d / "node_modules" / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"
    node = shutil.which("node")
    assert node is not None and entry.is_file(), entry
    return os.path.realpath(node), str(entry), d
