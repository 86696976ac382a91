"""A third-party MCP server nobody on this project wrote: the pinned npm `@modelcontextprotocol/server-filesystem`.

It runs under bwrap like any stdio server (its package directory granted for
reading). Its own configuration (the directories passed as arguments) is a
second fence; the tests show the sandbox holds where the server's own fence
would not: told it may read a directory its grant does not cover, it still
cannot. Installed by the test setup (npm); on CI a missing npm fails.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentcore.api import AllowAllWatchdog, Engine, compile_manifest
from mcp_support import filesystem_server, manifest, require_bwrap

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap]


@pytest.fixture
def outside() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="agentcore-mcp-outside-", dir="/var/tmp"))
    (d / "secret.txt").write_text("outside the grant\n")
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def engine_for(ws: Path, *dirs: Path, read: tuple[str, ...] = ()) -> Engine:
    require_bwrap()
    node, entry, npm_dir = filesystem_server()
    fs = {"command": node, "args": [entry, *map(str, dirs)],
          "requires": {"fs": {"read": [f"{npm_dir}/**", "{workspace}/**", *read], "write": ["{workspace}/**"]}}}
    return Engine(compile_manifest(manifest({"fs": fs}), workspace=ws), watchdog=AllowAllWatchdog())


def text(env: dict[str, Any]) -> str:
    assert env["type"] == "output", env
    return str(env["data"]["content"])


async def test_the_reference_filesystem_server_works_within_its_grant(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "hello.txt").write_text("hello from the workspace\n")
    engine = engine_for(ws, ws)
    with engine.open_session() as session:
        (status,) = await engine.mcp_status(session)
        assert status["state"] == "ready", status
        ids = {t["id"]: t["kind"] for t in status["tools"]}
        assert {"fs__read_text_file", "fs__write_file", "fs__list_directory"} <= set(ids)
        assert "read" not in ids.values()  # it may write (fs.write is granted): no read-only claim is believed
        assert text((await engine.call(session, "fs__read_text_file", {"path": str(ws / "hello.txt")})).to_dict()) == "hello from the workspace\n"
        written = (await engine.call(session, "fs__write_file", {"path": str(ws / "new.txt"), "content": "made by npm server"})).to_dict()
        assert written["data"]["is_error"] is False and (ws / "new.txt").read_text() == "made by npm server"
        listing = text((await engine.call(session, "fs__list_directory", {"path": str(ws)})).to_dict())
        assert "hello.txt" in listing and "new.txt" in listing
        # Its own fence: a path outside the directories it was given is refused by the server itself.
        refused = (await engine.call(session, "fs__read_text_file", {"path": "/etc/hostname"})).to_dict()
        assert refused["data"]["is_error"] is True


async def test_the_sandbox_holds_where_the_servers_own_configuration_would_not(tmp_path: Path, outside: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    engine = engine_for(ws, ws, outside)  # the server is told it may use `outside`; its grant does not cover it
    with engine.open_session() as session:
        allowed = text((await engine.call(session, "fs__list_allowed_directories", {})).to_dict())
        assert str(ws) in allowed and str(outside) not in allowed  # it could not even see the directory
        env = (await engine.call(session, "fs__read_text_file", {"path": str(outside / "secret.txt")})).to_dict()
        assert env["data"]["is_error"] is True and "outside the grant\n" not in str(env)
        planted = (await engine.call(session, "fs__write_file", {"path": str(outside / "planted.txt"), "content": "x"})).to_dict()
        assert planted["data"]["is_error"] is True
    await session.stores.tool_source.aclose()
    assert not (outside / "planted.txt").exists()
    # Control: with `outside` granted for reading, the same server reads it.
    engine = engine_for(ws, ws, outside, read=(f"{outside}/**",))
    with engine.open_session() as session:
        assert str(outside) in text((await engine.call(session, "fs__list_allowed_directories", {})).to_dict())
        got = (await engine.call(session, "fs__read_text_file", {"path": str(outside / "secret.txt")})).to_dict()
        assert got["data"] == {"content": "outside the grant\n", "is_error": False}
    await session.stores.tool_source.aclose()
