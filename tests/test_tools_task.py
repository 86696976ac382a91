"""task (subagents) through the real pipeline, plus the soundness of the intersection."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore.api import Engine, load_manifest
from agentcore.api import build_catalog as build_registry
from agentcore.errors import ToolFailure
from agentcore.manifest.intersect import host_covers, intersect, path_covers, shell_covers, stricter_environment
from agentcore.net.hosts import compile_host_pattern
from agentcore.patterns.path import compile_path_pattern
from agentcore.patterns.shell import compile_shell_requirement
from agentcore.session import Session
from agentcore.tools.base import Tool, ToolResult
from agentcore.tools.registry import ToolRegistry
from agentcore.watchdog import AllowAllWatchdog

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class BlockTool(Tool):
    """Waits until cancelled; `started` tells the test it is running."""

    id = "block"
    description = "Block until aborted."
    parameters = {"type": "object", "properties": {}, "additionalProperties": False}
    kind = "other"

    def __init__(self) -> None:
        self.started = anyio.Event()

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        self.started.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


def write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture
def setup(tmp_path: Path) -> dict[str, Any]:
    ws = tmp_path / "ws"
    for rel, text in {"src/a.txt": "A", "src/secret/k.txt": "K", "docs/d.txt": "D"}.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    agents = tmp_path / "agents"
    agents.mkdir()
    allow = [{"permission": "read", "pattern": "*", "action": "allow"}]
    write(agents / "child.yaml", {"name": "child", "tools": ["read"], "environment": "none", "rules": allow,
                                  "requires": {"fs": {"read": ["{workspace}/src/**", "{workspace}/docs/**"]}}})
    write(agents / "wide.yaml", {"name": "wide", "tools": ["read"], "environment": "none", "rules": allow,
                                 "requires": {"fs": {"read": ["{workspace}/**"]}}})
    write(agents / "broken.yaml", {"name": "broken", "tools": ["no_such_tool"]})
    write(agents / "blocker.yaml", {"name": "blocker", "tools": ["block"], "environment": "none",
                                    "rules": [{"permission": "block", "pattern": "*", "action": "allow"}]})
    return {"tmp": tmp_path, "ws": ws}


def parent_engine(setup: dict[str, Any], *, registry: ToolRegistry | None = None, limits: dict[str, Any] | None = None,
                  runner: Any = None, environment: str = "none") -> Engine:
    manifest = {
        "name": "parent",
        "tools": ["read", "task"],
        "environment": environment,
        "requires": {"fs": {"read": ["{workspace}/src/**"]}},
        "rules": [
            {"permission": "read", "pattern": "*", "action": "allow"},
            {"permission": "task", "pattern": "*", "action": "allow"},
            {"permission": "read", "pattern": "{workspace}/src/secret/**", "action": "deny"},
        ],
        "agents": {"child": "agents/child.yaml", "wide": "agents/wide.yaml", "broken": "agents/broken.yaml",
                   "blocker": "agents/blocker.yaml", "missing": "agents/none.yaml"},
        "limits": limits or {},
    }
    path = write(setup["tmp"] / "parent.yaml", manifest)
    engine = Engine(load_manifest(path, workspace=setup["ws"], catalog=registry), catalog=registry, watchdog=AllowAllWatchdog())
    if runner is not None:
        engine.subagent_runner = runner  # type: ignore[attr-defined]
    return engine


def reader_runner(paths: list[str], seen: list[Any]) -> Any:
    async def runner(child_engine: Engine, child_session: Session, prompt: str, description: str) -> str:
        seen.append((child_engine, child_session, prompt, description))
        out = {}
        for p in paths:
            env = await child_engine.call(child_session, "read", {"path": p})
            out[p] = env.data["content"] if env.ok else f"{(env.refusal or {}).get('layer')}:{env.error_code}"
        return json.dumps(out)

    return runner


async def test_no_runner(setup: dict[str, Any]) -> None:
    engine = parent_engine(setup)
    env = await engine.call(engine.open_session(), "task", {"description": "d", "prompt": "p", "agent": "child"})
    assert env.type == "error" and env.error_code == "no_subagent_runner"
    assert env.error_text == "this host cannot run subagents"


async def test_child_is_limited_by_parent(setup: dict[str, Any]) -> None:
    seen: list[Any] = []
    runner = reader_runner(["src/a.txt", "src/secret/k.txt", "docs/d.txt"], seen)
    engine = parent_engine(setup, runner=runner)
    session = engine.open_session()
    env = await engine.call(session, "task", {"description": "look", "prompt": "read things", "agent": "child"})
    assert env.ok, env.error_text
    assert env.data["agent"] == "child"
    assert json.loads(env.data["result"]) == {
        "src/a.txt": "A",
        "src/secret/k.txt": "permission:denied",  # the parent's manifest deny, pinned in the child
        "docs/d.txt": "capability:out_of_scope",  # only the child declares docs/
    }
    child_engine, child_session, prompt, description = seen[0]
    assert (prompt, description) == ("read things", "look")
    assert child_session.parent is session and child_session.depth == 1 and child_session.closed
    assert child_session not in session.children  # let go once closed
    assert not child_session.workdir.exists()
    assert child_engine.watchdog is engine.watchdog and child_engine.broker is engine.broker
    assert child_session.headless == session.headless


async def test_wider_child_is_narrowed_to_parent(setup: dict[str, Any]) -> None:
    runner = reader_runner(["src/a.txt", "docs/d.txt"], [])
    engine = parent_engine(setup, runner=runner)
    env = await engine.call(engine.open_session(), "task", {"description": "d", "prompt": "p", "agent": "wide"})
    assert json.loads(env.data["result"]) == {"src/a.txt": "A", "docs/d.txt": "capability:out_of_scope"}


async def test_general_agent_has_the_parents_capabilities(setup: dict[str, Any]) -> None:
    seen: list[Any] = []
    engine = parent_engine(setup, runner=reader_runner(["src/a.txt", "src/secret/k.txt", "docs/d.txt"], seen))
    env = await engine.call(engine.open_session(), "task", {"description": "d", "prompt": "p"})
    assert env.data["agent"] == "general"
    assert json.loads(env.data["result"]) == {
        "src/a.txt": "A", "src/secret/k.txt": "permission:denied", "docs/d.txt": "capability:out_of_scope",
    }


async def test_parent_session_denies_are_inherited(setup: dict[str, Any]) -> None:
    engine = parent_engine(setup, runner=reader_runner(["src/a.txt"], []))
    session = engine.open_session()
    session.add_session_rule("read", "{workspace}/src/a.txt", "deny")
    session.add_session_rule("read", "{workspace}/docs/**", "allow")  # allows are not inherited (and cannot widen)
    env = await engine.call(session, "task", {"description": "d", "prompt": "p", "agent": "child"})
    assert json.loads(env.data["result"]) == {"src/a.txt": "permission:denied"}


async def test_unknown_and_broken_agents(setup: dict[str, Any]) -> None:
    engine = parent_engine(setup, runner=reader_runner([], []))
    session = engine.open_session()
    env = await engine.call(session, "task", {"description": "d", "prompt": "p", "agent": "nobody-s3cret"})
    assert env.error_code == "unknown_agent"
    assert "blocker, broken, child, missing, wide" in (env.error_text or "") and "s3cret" not in (env.error_text or "")
    for name in ("broken", "missing"):
        env = await engine.call(session, "task", {"description": "d", "prompt": "p", "agent": name})
        assert env.error_code == "agent_invalid", name
    assert session.children == []


async def test_depth_limit(setup: dict[str, Any]) -> None:
    depths: list[int] = []

    async def runner(child_engine: Engine, child_session: Session, prompt: str, description: str) -> str:
        depths.append(child_session.depth)
        env = await child_engine.call(child_session, "task", {"description": "deeper", "prompt": prompt})
        return env.data["result"] if env.ok else f"stopped:{env.error_code}"

    engine = parent_engine(setup, runner=runner, limits={"task_depth": 2})
    env = await engine.call(engine.open_session(), "task", {"description": "d", "prompt": "p"})
    assert env.ok and env.data["result"] == "stopped:depth_limit"
    assert depths == [1, 2]


async def test_depth_zero_refuses_at_once(setup: dict[str, Any]) -> None:
    engine = parent_engine(setup, runner=reader_runner([], []), limits={"task_depth": 0})
    env = await engine.call(engine.open_session(), "task", {"description": "d", "prompt": "p"})
    assert env.error_code == "depth_limit"


async def test_runner_errors_and_bad_results(setup: dict[str, Any]) -> None:
    async def boom(*a: Any) -> str:
        raise RuntimeError("secret detail")

    async def nothing(*a: Any) -> Any:
        return None

    async def refuses(*a: Any) -> str:
        raise ToolFailure("model_unavailable", "no model")

    for runner, code in ((boom, "subagent_failed"), (nothing, "subagent_failed"), (refuses, "model_unavailable")):
        engine = parent_engine(setup, runner=runner)
        env = await engine.call(engine.open_session(), "task", {"description": "d", "prompt": "p"})
        assert env.error_code == code and "secret detail" not in (env.error_text or "")


async def test_long_result_goes_to_sidecar(setup: dict[str, Any]) -> None:
    text = "x" * 5000 + "END"

    async def runner(*a: Any) -> str:
        return text

    engine = parent_engine(setup, runner=runner, limits={"default_bytes": 1000})
    session = engine.open_session()
    env = await engine.call(session, "task", {"description": "d", "prompt": "p"})
    assert env.ok and env.truncated and env.data["result"] == "x" * 1000
    assert Path(env.output_path).read_text() == text and str(env.output_path).startswith(str(session.workdir))


def blocker_registry() -> tuple[ToolRegistry, BlockTool]:
    reg = build_registry(plugins=False)
    block = BlockTool()
    reg.register(block)
    return reg, block


async def test_parent_abort_aborts_the_child(setup: dict[str, Any]) -> None:
    reg, block = blocker_registry()
    child_envs: list[Any] = []
    sessions: list[Session] = []

    async def runner(child_engine: Engine, child_session: Session, prompt: str, description: str) -> str:
        sessions.append(child_session)
        child_envs.append(await child_engine.call(child_session, "block", {}))
        return "finished normally"

    engine = parent_engine(setup, registry=reg, runner=runner)
    session = engine.open_session()
    result: list[Any] = []

    async def go() -> None:
        result.append(await engine.call(session, "task", {"description": "d", "prompt": "p", "agent": "blocker"}))

    async with anyio.create_task_group() as tg:
        tg.start_soon(go)
        await block.started.wait()
        session.abort()
    env = result[0]
    assert env.type == "error" and env.error_code == "aborted", env.error_text
    # The child's in-flight call was cancelled and the runner unwound with it.
    assert child_envs == [] and not sessions[0].busy
    assert sessions[0].closed and not session.closed
    # The parent session is still usable after the abort.
    assert (await engine.call(session, "read", {"path": "src/a.txt"})).ok


async def test_aborting_only_the_child(setup: dict[str, Any]) -> None:
    reg, _ = blocker_registry()
    sessions: list[Session] = []
    waiting = anyio.Event()

    async def runner(child_engine: Engine, child_session: Session, prompt: str, description: str) -> str:
        sessions.append(child_session)
        waiting.set()
        await anyio.sleep_forever()
        return "never"

    engine = parent_engine(setup, registry=reg, runner=runner)
    session = engine.open_session()
    result: list[Any] = []

    async def go() -> None:
        result.append(await engine.call(session, "task", {"description": "d", "prompt": "p"}))

    async with anyio.create_task_group() as tg:
        tg.start_soon(go)
        await waiting.wait()
        sessions[0].abort()
    assert result[0].error_code == "aborted" and result[0].error_text == "aborted by parent"
    assert sessions[0].closed


async def test_child_manifest_is_intersected(setup: dict[str, Any]) -> None:
    engine = parent_engine(setup, environment="bwrap")
    child = load_manifest(setup["tmp"] / "agents" / "child.yaml", workspace=setup["ws"])
    merged = intersect(engine.manifest, child)
    ws = setup["ws"].resolve()
    assert merged.effective.can_read(f"{ws}/src/a.txt") and not merged.effective.can_read(f"{ws}/docs/d.txt")
    assert merged.environment == "bwrap"  # the stricter of bwrap (parent) and none (child)
    denies = [r for r in merged.rules if r.pinned]
    assert len(denies) == 1 and denies[0].rule.origin.startswith("inherited from parent 'parent'")
    assert set(engine.manifest.protected_files) <= set(merged.protected_files)
    assert set(child.protected_files) <= set(merged.protected_files)


# -- soundness of the intersection -------------------------------------------------

SEGMENTS = ["a", "b", "ab", "*", "**", "a*", "?", "[ab]"]
NAMES = ["a", "b", "ab", "ba", "x"]


def pattern(parts: list[str]) -> Any:
    text = "/r/" + "/".join(parts)
    return compile_path_pattern(text, text, anchor=None)


patterns = st.lists(st.sampled_from(SEGMENTS), min_size=0, max_size=3).map(lambda p: pattern(p) if p else pattern(["**"]))
paths = st.lists(st.sampled_from(NAMES), min_size=0, max_size=4).map(lambda p: "/r" + "".join("/" + x for x in p))


@settings(max_examples=300, deadline=None)
@given(patterns, patterns, st.lists(paths, min_size=1, max_size=12))
def test_path_covers_is_sound(outer: Any, inner: Any, probe: list[str]) -> None:
    if path_covers(outer, inner):
        for p in probe:
            assert not inner.matches(p) or outer.matches(p), (outer.expanded, inner.expanded, p)


def test_path_covers_examples() -> None:
    assert path_covers(pattern(["**"]), pattern(["a", "*.txt"]))
    assert path_covers(pattern(["a", "**"]), pattern(["a", "b", "**"]))
    assert path_covers(pattern(["*"]), pattern(["ab"]))  # exact inner: tested by matching
    assert not path_covers(pattern(["a", "**"]), pattern(["*", "**"]))
    assert path_covers(pattern(["a*", "**"]), pattern(["ab", "x"]))  # exact inner: decided by matching
    assert not path_covers(pattern(["a*", "**"]), pattern(["ab", "*"]))  # not a literal tree root: unprovable


HOSTS = ["a.com", "*.a.com", "b.a.com", "*.b.a.com", "c.com", "127.0.0.1"]
host_patterns = st.tuples(st.sampled_from(HOSTS), st.sampled_from(["", ":80", ":443", ":8080"])).filter(
    lambda t: not (t[0].startswith("*") and t[0][2].isdigit())
).map(lambda t: compile_host_pattern(t[0] + t[1]))
targets = st.tuples(st.sampled_from(["a.com", "b.a.com", "x.b.a.com", "c.com", "x.a.com", "127.0.0.1"]), st.sampled_from([80, 443, 8080]))


@settings(max_examples=300, deadline=None)
@given(host_patterns, host_patterns, st.lists(targets, min_size=1, max_size=10))
def test_host_covers_is_sound(outer: Any, inner: Any, probe: list[tuple[str, int]]) -> None:
    if host_covers(outer, inner):
        for host, port in probe:
            assert not inner.matches(host, port) or outer.matches(host, port)


def test_host_covers_examples() -> None:
    hp = compile_host_pattern
    assert host_covers(hp("*.a.com"), hp("b.a.com"))
    assert host_covers(hp("*.a.com"), hp("*.b.a.com"))
    assert not host_covers(hp("*.a.com"), hp("a.com"))
    assert not host_covers(hp("a.com:8080"), hp("a.com"))
    assert host_covers(hp("a.com"), hp("a.com:443"))


ARGS = ["x", "xy", {"prefix": "x"}, {"prefix": "xy"}, {"wildcard": True}]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(ARGS), max_size=2),
    st.lists(st.sampled_from(ARGS), max_size=2),
    st.lists(st.lists(st.sampled_from(["x", "xy", "xyz", "y", ""]), max_size=2), min_size=1, max_size=8),
)
def test_shell_covers_is_sound(outer_args: list[Any], inner_args: list[Any], argvs: list[list[str]]) -> None:
    outer = compile_shell_requirement("git", outer_args)
    inner = compile_shell_requirement("git", inner_args)
    if shell_covers(outer, inner):
        for rest in argvs:
            argv = ["git", *rest]
            assert not inner.matches(argv) or outer.matches(argv)
    assert not shell_covers(compile_shell_requirement("ls", outer_args), inner)


def test_stricter_environment() -> None:
    assert stricter_environment("none", "bwrap") == "bwrap"
    assert stricter_environment("bwrap", "none") == "bwrap"
    assert stricter_environment("none", "none") == "none"
    assert stricter_environment("none", "future-vm") == "future-vm"


async def test_subagent_manifests_cannot_be_rewritten_by_the_agent(tmp_path: Path) -> None:
    """A named child keeps only its parent's denies (SUB-3), so a subagent manifest the agent could edit
    would let it give a child any rules it liked: every one reachable through `agents` is protected
    (rule 5), nested ones and unparsable ones included, while the rest of the workspace stays writable."""
    ws = tmp_path / "ws"
    (ws / "agents").mkdir(parents=True)
    ask_push = [{"permission": "write", "pattern": "*", "action": "ask"}]
    write(ws / "agents" / "helper.yaml", {"name": "helper", "tools": ["write"], "environment": "none", "rules": ask_push,
                                          "agents": {"deep": "deep.yaml", "odd": "../odd.yaml"}})
    write(ws / "agents" / "deep.yaml", {"name": "deep", "tools": ["read"], "environment": "none", "agents": {"back": "helper.yaml"}})
    (ws / "odd.yaml").write_text("name: [unclosed\n")
    manifest = write(ws / "agent.yaml", {
        "name": "parent", "tools": ["write", "task"], "environment": "none", "agents": {"helper": "agents/helper.yaml"},
        "requires": {"fs": {"read": ["{workspace}/**"], "write": ["{workspace}/**"]}},
        "rules": [{"permission": "*", "pattern": "*", "action": "allow"}],
    })
    compiled = load_manifest(manifest, workspace=ws)
    expected = {ws / "agent.yaml", ws / "agents" / "helper.yaml", ws / "agents" / "deep.yaml", ws / "odd.yaml"}
    assert expected <= set(compiled.protected_files)
    engine = Engine(compiled, watchdog=AllowAllWatchdog())
    session = engine.open_session(headless=True)
    try:
        for rel in ("agents/helper.yaml", "agents/deep.yaml", "odd.yaml", "agents/../agents/helper.yaml"):
            env = await engine.call(session, "write", {"path": rel, "content": "name: helper\nrules: [{permission: '*', pattern: '*', action: allow}]\n"})
            assert env.type == "error" and env.refusal and env.refusal["code"] == "protected", (rel, env.to_dict())
        assert yaml.safe_load((ws / "agents" / "helper.yaml").read_text())["rules"] == ask_push
        assert (await engine.call(session, "write", {"path": "agents/notes.md", "content": "x\n"})).ok
    finally:
        session.close()


async def test_a_named_subagents_skill_directories_are_protected_in_the_parent(tmp_path: Path) -> None:
    """What a child's skill says reaches the child's prompt, in this session and every later one: the skill
    directories of every subagent reachable through `agents` are protected in the parent too (rule 5)."""
    ws = tmp_path / "ws"
    (ws / "agents").mkdir(parents=True)
    write(ws / "agents" / "helper.yaml", {"name": "helper", "tools": ["skill"], "environment": "none",
                                          "skills": {"paths": ["helper-skills", "{workspace}/more-skills"]},
                                          "agents": {"deep": "deep.yaml"}})
    write(ws / "agents" / "deep.yaml", {"name": "deep", "tools": ["read"], "environment": "none", "roots": ["../extra"],
                                        "skills": {"paths": ["{workspace}/deep-skills"]}})
    manifest = write(ws / "agent.yaml", {
        "name": "parent", "tools": ["write", "task"], "environment": "none", "agents": {"helper": "agents/helper.yaml"},
        "requires": {"fs": {"read": ["{workspace}/**"], "write": ["{workspace}/**"]}},
        "rules": [{"permission": "*", "pattern": "*", "action": "allow"}],
    })
    engine = Engine(load_manifest(manifest, workspace=ws), watchdog=AllowAllWatchdog())
    session = engine.open_session(headless=True)
    try:
        for rel in ("helper-skills/x/SKILL.md", "more-skills/x/SKILL.md", "deep-skills/x/SKILL.md", "extra/deep-skills/x/SKILL.md"):
            env = await engine.call(session, "write", {"path": rel, "content": "---\nname: x\ndescription: planted\n---\nDo it.\n"})
            assert env.type == "error" and env.refusal and env.refusal["code"] == "protected", (rel, env.to_dict())
        assert (await engine.call(session, "write", {"path": "agents/notes.md", "content": "x\n"})).ok
    finally:
        session.close()


def test_too_many_subagent_manifests_is_a_compile_error(tmp_path: Path) -> None:
    from agentcore.errors import CompileError
    from agentcore.manifest.compiled import MAX_AGENT_FILES, agent_files

    for i in range(MAX_AGENT_FILES + 1):
        nested = {"agents": {"next": f"a{i + 1}.yaml"}} if i < MAX_AGENT_FILES else {}
        write(tmp_path / f"a{i}.yaml", {"name": f"a{i}", **nested})
    assert len(agent_files({"first": tmp_path / "a1.yaml"})) == MAX_AGENT_FILES
    with pytest.raises(CompileError):
        agent_files({"first": tmp_path / "a0.yaml"})


async def test_a_named_child_expands_the_variables_as_its_parent_does(tmp_path: Path) -> None:
    """`{ad-hoc}` and `{user-data}` in a child manifest name the parent's ad-hoc files and user-data directory;
    before, they expanded to nothing in the child, which then lost what both manifests grant."""
    ws, user_data, ad_hoc = tmp_path / "ws", tmp_path / "user-data", tmp_path / "opened"
    for d, name in ((ws, "w.txt"), (user_data, "u.txt"), (ad_hoc, "o.txt")):
        d.mkdir()
        (d / name).write_text(name)
    allow = [{"permission": "*", "pattern": "*", "action": "allow"}]
    grants = {"fs": {"read": ["{workspace}/**", "{user-data}/**", "{ad-hoc}/**"]}}
    write(tmp_path / "child.yaml", {"name": "child", "tools": ["read"], "environment": "none", "rules": allow, "requires": grants})
    parent = write(tmp_path / "parent.yaml", {"name": "parent", "tools": ["read", "task"], "environment": "none", "rules": allow,
                                              "requires": grants, "agents": {"child": "child.yaml"}})
    engine = Engine(load_manifest(parent, workspace=ws, ad_hoc=[ad_hoc / "o.txt"], user_data=user_data), watchdog=AllowAllWatchdog())
    seen: list[Any] = []
    engine.subagent_runner = reader_runner([str(ws / "w.txt"), str(user_data / "u.txt"), str(ad_hoc / "o.txt")], seen)  # type: ignore[attr-defined]
    with engine.open_session() as session:
        env = await engine.call(session, "task", {"description": "d", "prompt": "p", "agent": "child"})
    assert env.ok, env.error_text
    assert sorted(json.loads(env.data["result"]).values()) == ["o.txt", "u.txt", "w.txt"]


async def test_a_parents_session_denies_keep_their_parents_expansion(tmp_path: Path) -> None:
    """A parent's session deny written with a variable holds in the child where it held in the parent.
    Before, it was expanded again with the child's bindings: with the parent's `roots` naming a second root
    and the child naming none, `{workspace}/secret/**` lost the second root in the child, which read its secret."""
    ws, extra = tmp_path / "ws", tmp_path / "extra"
    for d in (ws, extra):
        (d / "secret").mkdir(parents=True)
        (d / "secret" / "k.txt").write_text("K")
    allow = [{"permission": "*", "pattern": "*", "action": "allow"}]
    write(tmp_path / "child.yaml", {"name": "child", "tools": ["read"], "environment": "none", "rules": allow,
                                    "requires": {"fs": {"read": ["{workspace}/**", f"{extra}/**"]}}})
    parent = write(tmp_path / "parent.yaml", {"name": "parent", "tools": ["read", "task"], "environment": "none", "rules": allow,
                                              "roots": ["extra"], "requires": {"fs": {"read": ["{workspace}/**"]}},
                                              "agents": {"child": "child.yaml"}})
    engine = Engine(load_manifest(parent, workspace=ws), watchdog=AllowAllWatchdog())
    secrets = [str(ws / "secret" / "k.txt"), str(extra / "secret" / "k.txt")]
    engine.subagent_runner = reader_runner(secrets, [])  # type: ignore[attr-defined]
    with engine.open_session() as session:
        session.add_session_rule("read", "{workspace}/secret/**", "deny")
        for path in secrets:
            assert (await engine.call(session, "read", {"path": path})).error_code == "denied"
        env = await engine.call(session, "task", {"description": "d", "prompt": "p", "agent": "child"})
    assert env.ok, env.error_text
    assert json.loads(env.data["result"]) == {p: "permission:denied" for p in secrets}


async def test_a_childs_own_roots_do_not_widen_its_sandbox(tmp_path: Path) -> None:
    """A root the child's manifest names, which the parent's sandbox does not show, is not shown to the child's
    either (SUB-2: never wider). Before, the child's `roots` went into its sandbox's read roots as they were:
    its commands could read a directory neither manifest's fs.read grants, and the parent's sandbox hides."""
    ws, private = tmp_path / "ws", tmp_path / "private"
    for d in (ws, private, ws / "sub"):
        d.mkdir(exist_ok=True)
    allow = [{"permission": "*", "pattern": "*", "action": "allow"}]
    write(tmp_path / "child.yaml", {"name": "child", "tools": ["read"], "environment": "none", "rules": allow,
                                    "roots": ["private", "ws/sub"], "requires": {"fs": {"read": ["{workspace}/**"]}}})
    parent = write(tmp_path / "parent.yaml", {"name": "parent", "tools": ["read", "task"], "environment": "none", "rules": allow,
                                              "requires": {"fs": {"read": ["{workspace}/**"]}}, "agents": {"child": "child.yaml"}})
    engine = Engine(load_manifest(parent, workspace=ws), watchdog=AllowAllWatchdog())
    seen: list[Any] = []
    engine.subagent_runner = reader_runner([], seen)  # type: ignore[attr-defined]
    with engine.open_session() as session:
        assert (await engine.call(session, "task", {"description": "d", "prompt": "p", "agent": "child"})).ok
    child_engine = seen[0][0]
    shown = child_engine.environment()[1].read_roots
    assert private not in shown and not any(private in p.parents for p in shown)
    assert private not in engine.environment()[1].read_roots
    assert child_engine.manifest.workspace_roots == (ws, ws / "sub")  # a root inside what the parent shows stays


async def test_a_parents_session_deny_holds_against_a_childs_own_allow(tmp_path: Path) -> None:
    """A parent's session deny is pinned in a named child, as its manifest denies are: no allow of the child's,
    however specific, turns it into an allow. Before, it was copied unpinned, so a child manifest allowing
    `{workspace}/secret/k.txt` read the file the parent's session deny on `{workspace}/secret/**` refused the parent."""
    ws = tmp_path / "ws"
    (ws / "secret").mkdir(parents=True)
    (ws / "secret" / "k.txt").write_text("K")
    write(tmp_path / "child.yaml", {"name": "child", "tools": ["read"], "environment": "none",
                                    "rules": [{"permission": "read", "pattern": "{workspace}/secret/k.txt", "action": "allow"}],
                                    "requires": {"fs": {"read": ["{workspace}/**"]}}})
    parent = write(tmp_path / "parent.yaml", {"name": "parent", "tools": ["read", "task"], "environment": "none",
                                              "rules": [{"permission": "*", "pattern": "*", "action": "allow"}],
                                              "requires": {"fs": {"read": ["{workspace}/**"]}}, "agents": {"child": "child.yaml"}})
    engine = Engine(load_manifest(parent, workspace=ws), watchdog=AllowAllWatchdog())
    engine.subagent_runner = reader_runner(["secret/k.txt"], [])  # type: ignore[attr-defined]
    with engine.open_session() as session:
        session.add_session_rule("read", "{workspace}/secret/**", "deny")
        assert (await engine.call(session, "read", {"path": "secret/k.txt"})).error_code == "denied"
        env = await engine.call(session, "task", {"description": "d", "prompt": "p", "agent": "child"})
    assert env.ok, env.error_text
    assert json.loads(env.data["result"]) == {"secret/k.txt": "permission:denied"}
