"""Schema stage (ORDER-2, ENVL-6) through the real pipeline, and the tool registry (TOOL)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest

from agentcore.api import LOCKED_IDS
from agentcore.api import build_catalog as build_registry
from agentcore.errors import RegistryError
from agentcore.tools import _schemas
from agentcore.tools.base import Tool, ToolResult
from agentcore.tools.registry import ToolRegistry
from agentcore.tools.todo import TodoTool

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

SECRET = "sk-live-abc123SECRETVALUE"


# -- schema stage ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "args", "pointer", "keyword"),
    [
        ("read", {"path": 123, "offset": SECRET}, "/offset", "type"),
        ("read", {"path": "a.txt", "offset": SECRET}, "/offset", "type"),
        ("read", {"path": "a.txt", "limit": [SECRET]}, "/limit", "type"),
        ("read", {"path": "a.txt", "offset": 0}, "/offset", "minimum"),
        ("read", {"path": ""}, "/path", "minLength"),
        ("read", {"path": "a.txt", SECRET: 1}, '""', "additionalProperties"),
        ("read", {"offset": 3, "note": SECRET}, '""', "required"),
        ("write", {"path": "a.txt", "content": {"k": SECRET}}, "/content", "type"),
        ("write", {"path": SECRET}, '""', "required"),
        ("edit", {"path": "a.txt", "old_string": "", "new_string": SECRET}, "/old_string", "minLength"),
        ("edit", {"path": "a.txt", "old_string": "x", "new_string": "y", "replace_all": SECRET}, "/replace_all", "type"),
        ("grep", {"pattern": "x", "case_insensitive": SECRET}, "/case_insensitive", "type"),
        ("glob", {"pattern": 7, "path": SECRET * 2}, "/pattern", "type"),
        ("todo", {"todos": [{"content": "x", "status": SECRET}]}, "/todos/0/status", "enum"),
        ("todo", {"todos": [{"content": "x", "status": "pending", "extra": SECRET}]}, "/todos/0", "additionalProperties"),
        ("read", SECRET, '""', "type"),
        ("read", [SECRET], '""', "type"),
        ("read", None, '""', "type"),
    ],
)
async def test_invalid_args_give_schema_envelope_without_values(
    workspace: Path, make_agent: Callable[..., Any], tool: str, args: Any, pointer: str, keyword: str
) -> None:
    (workspace / "a.txt").write_text("a\n")
    agent = make_agent(workspace, tools=["read", "write", "edit", "glob", "grep", "todo"])
    env = await agent.call(tool, args)  # never raises
    assert env.type == "error"
    assert env.refusal == {"layer": "schema", "code": "invalid_arguments"}
    assert env.error_code == "invalid_arguments"
    assert pointer in env.error_text and f"'{keyword}'" in env.error_text, env.error_text
    dumped = json.dumps(env.to_dict())
    assert "sk-live" not in dumped and "SECRETVALUE" not in dumped
    assert (workspace / "a.txt").read_text() == "a\n"


async def test_every_failure_is_named(workspace: Path, make_agent: Callable[..., Any]) -> None:
    agent = make_agent(workspace)
    env = await agent.call("read", {"path": 5, "offset": "x", "limit": -1})
    for pointer in ("/path", "/offset", "/limit"):
        assert pointer in env.error_text


async def test_line_and_byte_window_together_is_schema_refusal(workspace: Path, make_agent: Callable[..., Any]) -> None:
    (workspace / "a.txt").write_text("a\n")
    agent = make_agent(workspace)
    env = await agent.call("read", {"path": "a.txt", "offset": 1, "byte_length": 4})
    assert env.refusal == {"layer": "schema", "code": "invalid_arguments"}


@pytest.mark.parametrize("pattern", ["/etc/*", "../*", "a/../../b"])
async def test_glob_pattern_must_be_relative(workspace: Path, make_agent: Callable[..., Any], pattern: str) -> None:
    agent = make_agent(workspace)
    env = await agent.call("glob", {"pattern": pattern})
    assert env.refusal == {"layer": "schema", "code": "invalid_arguments"}
    assert pattern not in env.error_text


async def test_tool_not_in_manifest_is_refused(workspace: Path, make_agent: Callable[..., Any]) -> None:
    agent = make_agent(workspace, tools=["read"])
    for tool in ("write", "nonexistent", "bash"):
        env = await agent.call(tool, {"path": "x", "content": "y"})
        assert env.type == "error" and env.error_code == "unknown_tool"


async def test_unknown_tool_layer_is_schema(workspace: Path, make_agent: Callable[..., Any]) -> None:
    agent = make_agent(workspace, tools=["read"])
    env = await agent.call("nonexistent", {})
    assert env.refusal == {"layer": "schema", "code": "unknown_tool"}


async def test_rule_refusal_code_is_denied(workspace: Path, make_agent: Callable[..., Any]) -> None:
    (workspace / "a.txt").write_text("a\n")
    agent = make_agent(workspace, rules=[{"permission": "read", "pattern": "*", "action": "deny"}])
    env = await agent.call("read", {"path": "a.txt"})
    assert env.refusal == {"layer": "permission", "code": "denied", "scope": "manifest", "rule_index": 0}


async def test_rule_refusal_names_scope_and_index_not_values(workspace: Path, make_agent: Callable[..., Any]) -> None:
    (workspace / ".env").write_text(SECRET)
    agent = make_agent(
        workspace,
        rules=[{"permission": "*", "pattern": "*", "action": "allow"}, {"permission": "read", "pattern": "**/.env", "action": "deny"}],
    )
    env = await agent.call("read", {"path": ".env"})
    assert env.refusal is not None and env.refusal["layer"] == "permission"
    assert env.refusal["scope"] == "manifest" and env.refusal["rule_index"] == 1
    assert SECRET not in json.dumps(env.to_dict()) and ".env" not in env.error_text


async def test_no_rule_headless_is_ask_refusal(workspace: Path, make_agent: Callable[..., Any]) -> None:
    (workspace / "a.txt").write_text("a\n")
    agent = make_agent(workspace, rules=[])
    env = await agent.call("read", {"path": "a.txt"})
    assert env.refusal is not None and (env.refusal["layer"], env.refusal["code"]) == ("ask", "headless")
    assert env.error_text == "Permission required but this run is headless; the call was not performed."


async def test_todo_and_question_through_the_pipeline(workspace: Path, make_agent: Callable[..., Any]) -> None:
    agent = make_agent(workspace, tools=["todo", "question"])
    todos = [{"content": "one", "status": "in_progress"}, {"content": "two", "status": "pending"}]
    env = await agent.call("todo", {"todos": todos})
    assert env.ok and env.data == {"todos": todos}
    assert agent.session.stores.todos == todos
    todos[0]["content"] = "mutated"  # the stored list is a copy
    assert agent.session.stores.todos[0]["content"] == "one"
    env = await agent.call("todo", {"todos": [{"content": "a", "status": "in_progress"}, {"content": "b", "status": "in_progress"}]})
    assert env.type == "error" and env.error_code == "invalid_arguments"
    assert agent.session.stores.todos[0]["content"] == "one"  # unchanged on error
    assert (await agent.call("todo", {"todos": []})).data == {"todos": []}
    env = await agent.call("question", {"questions": [{"question": "Proceed?"}]})
    assert env.type == "error" and env.error_code == "headless"
    assert "headless" in env.error_text


# -- registry ------------------------------------------------------------------------------


class Echo(Tool):
    id: ClassVar[str] = "echo"
    description: ClassVar[str] = "Echo the text back."
    parameters: ClassVar[dict[str, Any]] = _schemas.obj({"text": {"type": "string"}}, ["text"])
    kind: ClassVar[Any] = "other"

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        return ToolResult(data={"text": args["text"]})


def make_tool(**attrs: Any) -> Tool:
    return type("Custom", (Echo,), attrs)()


def test_duplicate_id_is_an_error() -> None:
    reg = ToolRegistry()
    first = Echo()
    reg.register(first)
    with pytest.raises(RegistryError, match="already registered"):
        reg.register(make_tool(description="another echo"))
    assert reg.get("echo") is first  # the first registration stays


@pytest.mark.parametrize("tid", LOCKED_IDS)
def test_redefining_a_locked_id_is_an_error(tid: str) -> None:
    with pytest.raises(RegistryError):
        ToolRegistry().register(make_tool(id=tid))  # not the implementation's locked set
    full = build_registry(plugins=False)
    original = full.get(tid)
    with pytest.raises(RegistryError):
        full.register(make_tool(id=tid, parameters=original.parameters, kind=original.kind))
    with pytest.raises(RegistryError):
        full.register(make_tool(id=tid), locked=True)
    assert full.get(tid) is original


@pytest.mark.parametrize(
    "attrs",
    [
        {"parameters": {"type": "object", "properties": {"x": {"type": "nonsense"}}}},
        {"parameters": {"type": "array"}},
        {"parameters": {"type": "object", "required": "x"}},
        {"parameters": {"type": "object", "properties": {"x": {"minLength": -1}}}},
        {"description": ""},
        {"description": "   "},
        {"kind": "delete_everything"},
        {"id": "has space"},
        {"id": "dotted.id"},
        {"id": ""},
        {"id": "x" * 65},
    ],
)
def test_invalid_registration_refused(attrs: dict[str, Any]) -> None:
    reg = ToolRegistry()
    with pytest.raises(RegistryError):
        reg.register(make_tool(**attrs))
    assert reg.ids() == ()


def test_replace_keeps_shape_and_kind(workspace: Path) -> None:
    reg = build_registry(plugins=False)
    todo = reg.get("todo")
    with pytest.raises(RegistryError):
        reg.replace(type("T", (TodoTool,), {"parameters": _schemas.obj({"todos": {"type": "array"}, "x": {"type": "string"}}, ["todos"])})())
    with pytest.raises(RegistryError):
        reg.replace(type("T", (TodoTool,), {"kind": "edit"})())
    with pytest.raises(RegistryError):
        reg.replace(make_tool(id="not_registered"))
    assert reg.get("todo") is todo
    same = type("T", (TodoTool,), {"parameters": json.loads(json.dumps(TodoTool.parameters))})()
    reg.replace(same)
    assert reg.get("todo") is same


async def test_replaced_implementation_runs_through_the_pipeline(workspace: Path, engine: Callable[..., Any], open_session: Callable[..., Any], manifest_data: Callable[..., dict]) -> None:
    reg = build_registry(plugins=False)

    class LoudTodo(TodoTool):
        async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
            result = await super().execute(args, runtime)
            result.data["replaced"] = True
            return result

    reg.replace(LoudTodo())
    eng = engine(workspace, manifest_data(tools=["todo", "read"]), registry=reg)
    ses = open_session(eng)
    env = await eng.call(ses, "todo", {"todos": []})
    assert env.data == {"todos": [], "replaced": True}
    env = await eng.call(ses, "todo", {"todos": "nope"})
    assert env.refusal == {"layer": "schema", "code": "invalid_arguments"}


def test_registry_lists_all_locked_tools_with_kinds() -> None:
    reg = build_registry(plugins=False)
    assert set(LOCKED_IDS) <= set(reg.ids())
    kinds = {t: reg.get(t).kind for t in ("read", "write", "edit", "glob", "grep", "todo", "question")}
    assert kinds == {"read": "read", "write": "edit", "edit": "edit", "glob": "search", "grep": "search", "todo": "other", "question": "other"}


@pytest.mark.parametrize("tid", LOCKED_IDS)
def test_every_locked_schema_is_a_valid_json_schema(tid: str) -> None:
    """The registry trusts the locked tools' schemas at start-up (it checks plugins'); this is where they are checked."""
    from jsonschema import Draft202012Validator

    Draft202012Validator.check_schema(build_registry(plugins=False).get(tid).parameters)


def test_a_catalogue_loads_only_the_tools_it_is_asked_for(tmp_path: Path) -> None:
    """One `read` call imports the read tool, not the other twelve."""
    import subprocess
    import sys

    (tmp_path / "a.txt").write_text("hello\n")
    code = (
        "import sys, anyio\n"
        "from agentcore.api import Engine, compile_manifest\n"
        "m = compile_manifest({'name': 'n', 'tools': ['read'], 'requires': {'fs': {'read': ['{workspace}/**']}},"
        " 'rules': [{'permission': '*', 'pattern': '*', 'action': 'allow'}]}, workspace=sys.argv[1])\n"
        "e = Engine(m)\n"
        "with e.open_session() as s:\n"
        "    assert anyio.run(e.call, s, 'read', {'path': 'a.txt'}).type == 'output'\n"
        "loaded = sorted(n for n in sys.modules if n.startswith('agentcore.tools.') and n.split('.')[-1] in "
        + repr(list(LOCKED_IDS)) + ")\n"
        "print(loaded)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['agentcore.tools.read']"


def test_jsonschema_is_imported_for_the_first_call_not_before(tmp_path: Path) -> None:
    """A run's first model request needs the engine, the system prompt and the tool definitions, none of
    which needs jsonschema (about 35 ms to import); the first call's schema stage does, and still refuses."""
    import subprocess
    import sys

    (tmp_path / "a.txt").write_text("hello\n")
    code = (
        "import sys, anyio\n"
        "from agentcore.api import Engine, compile_manifest\n"
        "from agentcore.agent.prompt import PromptCache\n"
        "m = compile_manifest({'name': 'n', 'tools': ['read', 'write'], 'requires': {'fs': {'read': ['{workspace}/**']}},"
        " 'rules': [{'permission': '*', 'pattern': '*', 'action': 'allow'}]}, workspace=sys.argv[1])\n"
        "e = Engine(m)\n"
        "with e.open_session() as s:\n"
        "    system, specs = PromptCache().get(e, s)\n"
        "    before = 'jsonschema' in sys.modules\n"
        "    bad = anyio.run(e.call, s, 'read', {'path': 'a.txt', 'unexpected': 1})\n"
        "    good = anyio.run(e.call, s, 'read', {'path': 'a.txt'})\n"
        "print(before, sorted(x.name for x in specs), bad.to_dict()['metadata']['refusal']['layer'], good.type)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "['read',", "'write']", "schema", "output"]
