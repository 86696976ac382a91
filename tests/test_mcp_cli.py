"""`agentcore mcp list`, and the MCP SDK staying unimported where no server is used."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from mcp_support import BAD, manifest, require_bwrap, server

AGENTCORE = str(Path(sys.executable).parent / "agentcore")


def run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([AGENTCORE, *args], capture_output=True, text=True, timeout=120, env=env, cwd=cwd)


@pytest.mark.bwrap
def test_mcp_list_shows_servers_states_and_tools_with_kinds_never_secret_values(tmp_path: Path, write_manifest: Callable[..., Path]) -> None:
    require_bwrap()
    config = tmp_path / "bad.json"
    config.write_text(json.dumps({"tools": [{"name": "ok_tool", "inputSchema": {"type": "object"}},
                                            {"name": "bad.name", "inputSchema": {"type": "object"}}]}))
    entry = server(BAD, str(config), read=[str(config)], env={"TOKEN": {"from_env": "LIST_TOKEN_FOR_TEST"}})
    path = write_manifest(manifest({"good": entry, "gone": {"url": "https://mcp.example.com/mcp"}}))
    secret = "list-secret-value-42"
    env = {**os.environ, "LIST_TOKEN_FOR_TEST": secret}
    done = run("mcp", "list", "--manifest", str(path), "--workspace", str(tmp_path), env=env)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "good  [stdio, bwrap]  ready" in out and "good__ok_tool" in out and "kind=other" in out
    assert "bad.name" in out and "unavailable: the tool name has characters" in out
    assert "gone  [http, remote]  failed (its host is not in the server's net.hosts)" in out
    assert "env: TOKEN" in out and secret not in out + done.stderr
    as_json = run("mcp", "list", "--manifest", str(path), "--workspace", str(tmp_path), "--json", env=env)
    doc = json.loads(as_json.stdout)
    states = {s["name"]: s["state"] for s in doc["servers"]}
    assert states == {"good": "ready", "gone": "failed"} and secret not in as_json.stdout
    bad = run("mcp", "list", "--manifest", str(tmp_path / "missing.yaml"))
    assert bad.returncode == 2 and "cannot read manifest" in bad.stderr


def test_commands_without_mcp_servers_never_import_the_mcp_sdk(tmp_path: Path, write_manifest: Callable[..., Path]) -> None:
    (tmp_path / "a.txt").write_text("x")
    path = write_manifest({"name": "plain", "tools": ["read"], "requires": {"fs": {"read": ["{workspace}/**"]}},
                           "rules": [{"permission": "*", "pattern": "*", "action": "allow"}]})
    code = (
        "import sys; from agentcore.cli.main import main; "
        f"main(['call', '--manifest', {str(path)!r}, '--workspace', {str(tmp_path)!r}, 'read', '{{\"path\": \"a.txt\"}}']); "
        f"main(['mcp', 'list', '--manifest', {str(path)!r}, '--workspace', {str(tmp_path)!r}]); "
        "print(sorted(m for m in ('mcp', 'mcp_types', 'httpx2') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"
    assert "no MCP servers" in out.stdout
