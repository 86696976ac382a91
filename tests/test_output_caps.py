"""Every output is bounded (issue 8, item 4; SPEC TRUNC-9).

A sidecar takes at most `limits.sidecar_bytes` per call, and the live
sidecars of a session tree at most `limits.session_sidecar_bytes`. Past the
cap nothing more is written, a command's process group is killed, a search
stops, and the envelope says `output_capped`. The tests run the real
pipeline, real bwrap and real rg, and measure the files on disk; each has a
control showing the same output under a larger cap is complete.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore.api import Engine, load_manifest
from agentcore.envelope import Envelope
from agentcore.errors import OutputCapped
from agentcore.limits import Limits
from agentcore.runtime import ProcessSurface
from agentcore.session import Session
from agentcore.tools._rg import rg_output
from agentcore.truncation import ByteSpool, LineSpool, SidecarAllowance, SidecarBudget
from agentcore.watchdog import AllowAllWatchdog
from test_bash_support import allow, arity, assert_ran, live_pids_with, wait_for

MiB = 1 << 20
KILLED = (128 + 15, 128 + 9)  # the runtime's SIGTERM, or the SIGKILL after its grace
SHELL = [allow("cat", "/dev/zero"), arity("seq", 2), arity("yes", 1), allow("cat"), arity("head", 3)]


def disk_use(directory: Path) -> tuple[int, int]:
    """(apparent bytes, allocated bytes) of every file beneath `directory`."""
    size = blocks = 0
    for dirpath, _dirs, files in os.walk(directory):
        for name in files:
            st = os.lstat(os.path.join(dirpath, name))
            size += st.st_size
            blocks += st.st_blocks * 512
    return size, blocks


def capped(env: Envelope) -> bool:
    return env.to_dict()["metadata"].get("output_capped") is True


# -- bash through the pipeline and real bwrap -----------------------------------------------------


@pytest.mark.bwrap
@pytest.mark.anyio
async def test_cat_dev_zero_stops_at_the_default_cap_and_its_group_is_killed(agent_for: Callable[..., Any]) -> None:
    agent = agent_for(SHELL)
    cap = Limits().sidecar_bytes
    env = await agent.call("bash", {"command": "cat /dev/zero"})
    data = assert_ran(env)
    assert capped(env) and env.truncated and data["timed_out"] is False and data["exit_code"] in KILLED
    assert os.path.getsize(env.output_path) == cap  # everything up to the cap, and not a byte more
    size, blocks = disk_use(agent.session.workdir)
    assert size == cap and blocks <= cap + MiB, (size, blocks)
    assert data["output"] == "\0" * (200 * 1024)  # the head is still the head


@pytest.mark.bwrap
@pytest.mark.anyio
async def test_a_capped_pipeline_leaves_no_process_behind(agent_for: Callable[..., Any]) -> None:
    agent = agent_for(SHELL, limits={"sidecar_bytes": 2 * MiB})
    mark = f"capmark{secrets.token_hex(6)}"
    seen: list[int] = []
    out: list[Envelope] = []
    async with anyio.create_task_group() as tg:

        async def run() -> None:
            # `yes` feeds `cat` through a pipe: two processes in the sandbox, neither of which stops by itself.
            out.append(await agent.call("bash", {"command": f"yes {mark} | cat"}))

        tg.start_soon(run)
        await wait_for(lambda: bool(live_pids_with(mark)) or bool(out), what="the producer to start")
        seen.extend(live_pids_with(mark))
    [env] = out
    assert capped(env) and assert_ran(env)["exit_code"] in KILLED
    assert live_pids_with(mark) == []
    body = Path(env.output_path).read_bytes()
    assert len(body) == 2 * MiB and body.startswith((mark + "\n").encode() * 100)


@pytest.mark.bwrap
@pytest.mark.anyio
async def test_fifty_megabytes_are_capped_cleanly_with_a_small_cap(agent_for: Callable[..., Any]) -> None:
    full = b"".join(b"%d\n" % i for i in range(1, 7_000_001))
    assert len(full) > 50 * MiB
    agent = agent_for(SHELL, limits={"sidecar_bytes": 5 * MiB})
    env = await agent.call("bash", {"command": "seq 1 7000000"})
    data = assert_ran(env)
    assert capped(env) and data["exit_code"] in KILLED
    body = Path(env.output_path).read_bytes()
    assert len(body) == 5 * MiB and full.startswith(body)
    assert disk_use(agent.session.workdir)[0] == 5 * MiB
    # Control: under the default cap the same command is complete, exit 0, not capped.
    control = agent_for(SHELL)
    env = await control.call("bash", {"command": "seq 1 7000000"})
    assert not capped(env) and assert_ran(env)["exit_code"] == 0
    assert Path(env.output_path).read_bytes() == full


@pytest.mark.bwrap
@pytest.mark.anyio
async def test_the_session_cap_spans_calls(agent_for: Callable[..., Any]) -> None:
    agent = agent_for(SHELL, limits={"sidecar_bytes": 2 * MiB, "session_sidecar_bytes": 3 * MiB})
    first = await agent.call("bash", {"command": "head -c 2000000 /dev/zero"})
    assert not capped(first) and os.path.getsize(first.output_path) == 2_000_000
    second = await agent.call("bash", {"command": "head -c 2000000 /dev/zero"})
    assert capped(second) and os.path.getsize(second.output_path) == 3 * MiB - 2_000_000
    third = await agent.call("bash", {"command": "head -c 300000 /dev/zero"})
    assert capped(third) and third.truncated and os.path.getsize(third.output_path) == 0
    assert assert_ran(third)["output"] == "\0" * (200 * 1024)  # the head is always returned
    small = await agent.call("bash", {"command": "head -c 1000 /dev/zero"})
    assert not capped(small) and not small.truncated  # output within the head needs no sidecar
    assert disk_use(agent.session.workdir)[0] == 3 * MiB


# -- the search tools ------------------------------------------------------------------------------


def _search_agent(make_agent: Callable[..., Any], ws: Path, **limits: int) -> Any:
    return make_agent(ws, tools=["grep", "glob"], limits=limits or None)


@pytest.mark.anyio
@pytest.mark.parametrize("route", ["tree", "listed"])
async def test_grep_with_huge_match_output_is_capped(make_agent: Callable[..., Any], make_workspace: Callable[..., Path], route: str) -> None:
    lines = 400_000
    ws = make_workspace("ws", {"big.txt": "needle\n" * lines, "small.txt": "needle\n"})
    rules = [{"permission": "*", "pattern": "*", "action": "allow"}]
    if route == "listed":  # a deny rule reaching the root makes grep list and filter the files itself
        rules.append({"permission": "read", "pattern": "{workspace}/nothing/**", "action": "deny"})
    agent = make_agent(ws, tools=["grep"], rules=rules, limits={"sidecar_bytes": MiB})
    env = await agent.call("grep", {"pattern": "needle"})
    assert env.type == "output" and capped(env) and env.truncated
    body = Path(env.output_path).read_bytes()
    assert 0 < len(body) <= MiB and body.endswith(b"\n")
    records = body.decode().splitlines()
    assert all(r == f"{ws}/big.txt:{i}:needle" for i, r in enumerate(records, 1))  # whole lines, a sorted prefix
    assert env.data["total"] == len(records) < lines
    assert disk_use(agent.session.workdir)[0] <= MiB
    # Control: a cap that holds everything gives every match.
    full = make_agent(ws, tools=["grep"], rules=rules)
    env = await full.call("grep", {"pattern": "needle"})
    assert not capped(env) and env.data["total"] == lines + 1


@pytest.mark.anyio
async def test_rg_output_file_is_bounded_by_the_kernel(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("x\n" * 1_000_000)
    argv = [ProcessSurface.rg_binary(), "--no-heading", "--with-filename", "-n", "--no-config", "-e", "x", "--", "f.txt"]
    f, was_capped = await rg_output(argv, os.fspath(tmp_path), limit=100_000)
    try:
        size = os.fstat(f.fileno()).st_size
        data = os.pread(f.fileno(), size, 0)
    finally:
        f.close()
    assert was_capped and 0 < size <= 100_000 and data.endswith(b"\n")
    assert data.decode().splitlines() == [f"f.txt:{i}:x" for i in range(1, data.count(b"\n") + 1)]
    f, was_capped = await rg_output(argv, os.fspath(tmp_path), limit=1 << 30)  # control
    try:
        assert not was_capped and os.fstat(f.fileno()).st_size == sum(len(f"f.txt:{i}:x\n") for i in range(1, 1_000_001))
    finally:
        f.close()


@pytest.mark.anyio
async def test_glob_stops_at_the_cap_with_a_sorted_prefix(make_agent: Callable[..., Any], make_workspace: Callable[..., Path]) -> None:
    ws = make_workspace("ws", {f"d/{'n' * 150}{i:05d}.txt": "" for i in range(3000)})
    agent = make_agent(ws, tools=["glob"], limits={"glob_entries": 10, "sidecar_bytes": 64 * 1024})
    env = await agent.call("glob", {"pattern": "**/*.txt"})
    assert capped(env)
    body = Path(env.output_path).read_text().splitlines()
    assert len(body) == env.data["total"] < 3000 and body == sorted(body)
    assert body == [f"{ws}/d/{'n' * 150}{i:05d}.txt" for i in range(len(body))]
    assert os.path.getsize(env.output_path) <= 64 * 1024


@pytest.mark.anyio
async def test_generic_truncation_is_capped_too(make_agent: Callable[..., Any], workspace: Path) -> None:
    agent = make_agent(workspace, tools=["todo"], rules=[{"permission": "*", "pattern": "*", "action": "allow"}], limits={"sidecar_bytes": 300_000})
    todos = [{"content": "t" * 1000, "status": "pending"} for _ in range(500)]
    env = await agent.call("todo", {"todos": todos})
    assert env.type == "output" and capped(env) and os.path.getsize(env.output_path) == 300_000
    ok = make_agent(workspace, tools=["todo"], rules=[{"permission": "*", "pattern": "*", "action": "allow"}])
    env = await ok.call("todo", {"todos": todos})
    assert not capped(env) and os.path.getsize(env.output_path) > 500_000  # control


# -- subagents share the session tree's budget ----------------------------------------------------


@pytest.mark.anyio
async def test_task_children_draw_on_the_parent_budget_and_give_it_back(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        "name: p\ntools: [task, todo]\nenvironment: none\n"
        "rules: [{permission: '*', pattern: '*', action: allow}]\n"
        f"limits: {{session_sidecar_bytes: {3 * MiB}}}\n"
    )
    engine = Engine(load_manifest(manifest, workspace=ws), watchdog=AllowAllWatchdog())
    parent = engine.open_session(headless=True)
    todos = [{"content": "c" * 1000, "status": "pending"} for _ in range(1200)]  # ~1.3 MB of JSON per call
    seen: dict[str, Any] = {}

    async def runner(child_engine: Engine, child: Session, prompt: str, description: str) -> str:
        envs = [await child_engine.call(child, "todo", {"todos": todos}) for _ in range(3)]
        seen["capped"] = [capped(e) for e in envs]
        seen["parent_used_during"] = parent.sidecar_budget.used
        seen["child_dir"] = child.workdir
        return "done"

    engine.subagent_runner = runner  # type: ignore[attr-defined]
    try:
        before = await engine.call(parent, "todo", {"todos": todos})  # the parent's own sidecar first
        used_before = parent.sidecar_budget.used
        assert not capped(before) and used_before == os.path.getsize(before.output_path)
        env = await engine.call(parent, "task", {"description": "d", "prompt": "p"})
        assert env.type == "output", env.to_dict()
        # The child could write only what the parent's tree had left: its third call was cut.
        assert seen["capped"] == [False, True, True]
        assert seen["parent_used_during"] == 3 * MiB
        # Its sidecars went with it, and so did their charge.
        assert not seen["child_dir"].exists() and parent.sidecar_budget.used == used_before
        again = await engine.call(parent, "todo", {"todos": todos})
        assert not capped(again)
    finally:
        parent.close()


# -- the spools themselves ---------------------------------------------------------------------------


def test_budget_tree_charges_ancestors_and_refunds_on_close() -> None:
    root = SidecarBudget(100)
    child = SidecarBudget(80, root)
    grandchild = SidecarBudget(1000, child)
    SidecarAllowance(1000, grandchild).take(30)
    assert (root.used, child.used, grandchild.used) == (30, 30, 30)
    assert grandchild.room() == 50 and child.room() == 50 and root.room() == 70
    root_call = SidecarAllowance(60, root)
    assert root_call.room() == 60
    root_call.take(60)
    assert grandchild.room() == 10 and root.room() == 10
    grandchild.close()
    assert (root.used, child.used) == (60, 0) and child.room() == 40


@settings(max_examples=150, deadline=None)
@given(
    chunks=st.lists(st.binary(min_size=1, max_size=3000), min_size=1, max_size=30),
    head=st.integers(1, 4000),
    cap=st.integers(0, 20_000),
)
def test_byte_spool_sidecar_is_the_prefix_that_fits(tmp_path_factory: pytest.TempPathFactory, chunks: list[bytes], head: int, cap: int) -> None:
    spool = ByteSpool(tmp_path_factory.mktemp("s"), "bash", head, SidecarAllowance(cap))
    fed = b""
    try:
        for c in chunks:
            spool.write_sync(c)
            fed += c
    except OutputCapped:
        fed += c
    finally:
        spool.close()
    whole = b"".join(chunks)
    if len(fed) <= head:
        assert spool.path is None and not spool.capped
    else:
        body = spool.path.read_bytes()
        assert body == fed[: min(len(fed), cap)] and spool.capped == (len(fed) > cap)
        assert whole.startswith(body) and len(body) <= cap
    assert spool.head_bytes() == whole[:head] or spool.head_bytes() == fed[:head]


@settings(max_examples=150, deadline=None)
@given(lines=st.lists(st.text(alphabet="ab\u00e9", max_size=30), max_size=200), head=st.integers(1, 20), cap=st.integers(0, 3000))
def test_line_spool_sidecar_holds_whole_lines_within_the_cap(tmp_path_factory: pytest.TempPathFactory, lines: list[str], head: int, cap: int) -> None:
    spool = LineSpool(tmp_path_factory.mktemp("s"), "glob", head, SidecarAllowance(cap))
    try:
        spool.extend(lines)
    except OutputCapped:
        pass
    finally:
        spool.close()
    if spool.path is None:
        assert len(lines) <= head and not spool.capped
        return
    body = spool.path.read_bytes()
    assert len(body) <= cap
    kept = body.decode().split("\n")[:-1] if body else []
    assert kept == lines[: len(kept)]
    assert spool.capped == (len(kept) < len(lines))
    assert spool.total == max(len(kept), min(head, len(lines)))


# -- web_fetch and task: outputs complete in memory, cut only in the sidecar ---------------------------


@pytest.mark.anyio
async def test_web_fetch_content_is_capped_in_the_sidecar(tmp_path: Path) -> None:
    from test_tools_web_fetch import Server, make_engine

    body = b"".join(b"line %07d\n" for i in range(100_000))  # 1.3 MB of text
    srv = Server({"/big": (200, {"Content-Type": "text/plain; charset=utf-8"}, body)})
    try:
        for limits, expect_capped in (({"sidecar_bytes": 500_000}, True), ({}, False)):
            (tmp_path / str(expect_capped)).mkdir()
            engine = make_engine(tmp_path / str(expect_capped), [f"127.0.0.1:{srv.port}"], limits=limits)
            session = engine.open_session()
            try:
                env = await engine.call(session, "web_fetch", {"url": srv.url("/big")})
                assert env.ok and env.truncated and capped(env) is expect_capped, env.to_dict()["metadata"]
                sidecar = Path(env.output_path).read_bytes()
                assert sidecar == (body[:500_000] if expect_capped else body)
            finally:
                session.close()
    finally:
        srv.close()


@pytest.mark.anyio
async def test_a_task_result_is_capped_in_the_sidecar(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    text = "r" * 1_000_000
    for cap, expect_capped in ((300_000, True), (None, False)):
        manifest = tmp_path / f"m{cap}.yaml"
        limits = f"limits: {{sidecar_bytes: {cap}}}\n" if cap else ""
        manifest.write_text("name: p\ntools: [task]\nenvironment: none\nrules: [{permission: '*', pattern: '*', action: allow}]\n" + limits)
        engine = Engine(load_manifest(manifest, workspace=ws), watchdog=AllowAllWatchdog())

        async def runner(child_engine: Engine, child: Session, prompt: str, description: str) -> str:
            return text

        engine.subagent_runner = runner  # type: ignore[attr-defined]
        session = engine.open_session(headless=True)
        try:
            env = await engine.call(session, "task", {"description": "d", "prompt": "p"})
            assert env.ok and capped(env) is expect_capped
            assert os.path.getsize(env.output_path) == (cap if expect_capped else len(text))
        finally:
            session.close()
