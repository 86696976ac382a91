"""The `mcp:` block, tool ids, schema checks and result rendering, without starting servers (MCP-1 to MCP-7)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentcore.api import CompileError, ManifestError, McpServer, compile_manifest, compile_rule_list
from agentcore.mcp import plan_servers
from agentcore.mcp.names import NameProblem, server_of, tool_id
from agentcore.mcp.render import render_result
from agentcore.mcp.schemas import MAX_SCHEMA_BYTES, SchemaProblem, check_input_schema


def compiled(tmp_path: Path, mcp: dict[str, Any], **extra: Any) -> Any:
    data = {"name": "m", "tools": ["read"], "requires": {"fs": {"read": ["{workspace}/**"]}}, "mcp": mcp, **extra}
    return compile_manifest(data, workspace=tmp_path)


def test_defer_needs_tool_search(tmp_path: Path) -> None:
    with pytest.raises(CompileError) as info:
        compiled(tmp_path, {"s": {"command": "x", "defer": True}})
    assert "tool_search" in str(info.value) and "mcp.s.defer" in str(info.value)
    assert compiled(tmp_path, {"s": {"command": "x", "defer": True}}, tools=["read", "tool_search"]).mcp_servers["s"].spec.defer


@pytest.mark.parametrize("entry,message", [
    ({}, "exactly one of command"),
    ({"command": "x", "url": "https://a.example/mcp"}, "exactly one of command"),
    ({"command": "x", "transport": "http"}, "stdio transport"),
    ({"url": "https://a.example/mcp", "transport": "stdio"}, "http or sse"),
    ({"url": "https://a.example/mcp", "env": {"A": "1"}}, "belong to a stdio server"),
    ({"command": "x", "headers": {"A": "1"}}, "belong to a remote server"),
    ({"command": "x", "env": {"BAD NAME": "1"}}, "env names"),
    ({"command": "x", "env": {"A": "line\nbreak"}}, "NUL, CR or LF"),
    ({"command": "x", "env": {"A": {"from_env": "1BAD"}}}, "from_env names"),
    ({"url": "https://a.example/mcp", "headers": {"Bad Header": "1"}}, "HTTP token"),
    ({"command": "x", "requries": {}}, "unknown key"),
    ({"command": "x", "timeout_s": 0}, "greater than 0"),
])
def test_bad_entries_are_manifest_errors(tmp_path: Path, entry: dict[str, Any], message: str) -> None:
    with pytest.raises(ManifestError) as info:
        compiled(tmp_path, {"s": entry})
    assert message in str(info.value)


@pytest.mark.parametrize("name", ["a__b", "_a", "a_", "a--b", "a.b", "a b", "x" * 33, ""])
def test_server_names_keep_ids_unambiguous(tmp_path: Path, name: str) -> None:
    with pytest.raises(ManifestError):
        compiled(tmp_path, {name: {"command": "x"}})


def test_a_servers_requires_count_in_the_effective_set_with_their_origin(tmp_path: Path) -> None:
    m = compiled(tmp_path, {"files": {"command": "x", "requires": {"fs": {"read": ["/opt/mcp/**"], "write": ["{workspace}/out/**"]},
                                                                   "net": {"hosts": ["api.example.com"]}}}})
    assert "/opt/mcp/**" in [p.expanded for p in m.effective.fs_read]
    assert f"{tmp_path}/out/**" in [p.expanded for p in m.effective.fs_write]
    assert [h.raw for h in m.effective.net_hosts] == ["api.example.com"]
    assert m.effective.origins["fs_read:/opt/mcp/**"] == ("mcp server files",)
    grant = m.mcp_servers["files"].grant
    assert [p.expanded for p in grant.fs_read] == ["/opt/mcp/**"]  # the server's own grant: not the workspace
    with pytest.raises(CompileError) as info:
        compiled(tmp_path, {"files": {"command": "x", "requires": {"net": {"hosts": ["*"]}}}})
    assert "mcp.files.requires.net.hosts" in str(info.value)


def test_rules_may_name_tools_of_declared_servers_before_they_are_listed(tmp_path: Path) -> None:
    rules = [{"permission": "files__read_file", "pattern": "*", "action": "allow"}]
    m = compiled(tmp_path, {"files": {"command": "x"}}, rules=rules)
    assert m.rules[0].rule.permission == "files__read_file"
    assert compile_rule_list([{"permission": "files__x", "pattern": "*", "action": "deny"}], m)
    for bad in ("other__read_file", "files__", "files__bad.name"):
        with pytest.raises(CompileError):
            compiled(tmp_path, {"files": {"command": "x"}}, rules=[{"permission": bad, "pattern": "*", "action": "allow"}])


def test_values_from_the_environment_are_resolved_when_the_session_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    m = compiled(tmp_path, {"s": {"command": "x", "env": {"T": {"from_env": "MCP_T_FOR_TEST"}, "L": "literal-value"}},
                            "r": {"url": "https://a.example/mcp", "headers": {"Authorization": {"from_env": "MCP_H_FOR_TEST"}}}})
    monkeypatch.setenv("MCP_T_FOR_TEST", "token-value-123")
    plans = {p.name: p for p in plan_servers(m)}
    assert plans["s"].env == {"T": "token-value-123", "L": "literal-value"} and plans["s"].problem is None
    assert set(plans["s"].secrets) == {"token-value-123", "literal-value"}
    assert plans["r"].problem == "the environment variable MCP_H_FOR_TEST (for header Authorization) is not set"
    assert "token-value-123" not in repr(plans["s"]) and "literal-value" not in repr(plans["s"])


def test_a_client_server_takes_a_same_named_entrys_grant_or_nothing(tmp_path: Path) -> None:
    m = compiled(tmp_path, {"files": {"command": "manifest-cmd", "defer": True, "timeout_s": 7,
                                      "requires": {"fs": {"read": ["/opt/files/**"]}}}}, tools=["read", "tool_search"])
    client = [McpServer("files", "stdio", command="editor-cmd", env={"K": "v"}),
              McpServer("extra", "http", url="https://x.example/mcp", headers={"A": "secret-header"}),
              McpServer("Bad Name", "stdio", command="x"), McpServer("extra", "stdio", command="y")]
    plans = plan_servers(m, client)
    by = [(p.name, p.origin, p.command or p.url) for p in plans]
    assert by[0] == ("files", "client", "editor-cmd")  # replaces the manifest's entry for this session
    files = plans[0]
    assert [p.expanded for p in files.grant.fs_read] == ["/opt/files/**"] and files.defer is True and files.timeout_s == 7
    extra = plans[1]
    assert not extra.grant.fs_read and not extra.grant.net_hosts and extra.defer is None  # nothing granted
    assert "server name" in (plans[2].problem or "") and "same name" in (plans[3].problem or "")
    assert "secret-header" not in repr(client[1]) and "secret-header" not in plans[1].describe()


def test_tool_ids() -> None:
    assert tool_id("files", "read_file") == "files__read_file" and server_of("files__read_file") == "files"
    assert server_of("a___b") == "a" and tool_id("a", "_b") == "a___b"
    for bad in ("", "a.b", "a b", "é", "x" * 60):
        with pytest.raises(NameProblem):
            tool_id("files", bad)


def test_schema_checks() -> None:
    check_input_schema({"type": "object", "properties": {"a": {"$ref": "#/$defs/s"}}, "$defs": {"s": {"type": "string"}}})
    draft7 = check_input_schema({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                                 "properties": {"n": {"type": "integer", "exclusiveMinimum": 0}}})
    assert not draft7.is_valid({"n": 0}) and draft7.is_valid({"n": 1})
    cases = {
        "not a JSON object": [],
        "top level": {"type": "array"},
        "dialect": {"$schema": "https://example.com/my-dialect", "type": "object"},
        "not a valid schema": {"type": "object", "required": "x"},
        "cycle": {"type": "object", "$defs": {"a": {"$ref": "#/$defs/a"}}, "properties": {"x": {"$ref": "#/$defs/a"}}},
        "outside the document": {"type": "object", "properties": {"x": {"$ref": "other.json#/a"}}},
        "bytes; at most": {"type": "object", "description": "x" * MAX_SCHEMA_BYTES},
    }
    for why, schema in cases.items():
        with pytest.raises(SchemaProblem) as info:
            check_input_schema(schema)
        assert why in str(info.value), (why, str(info.value))


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.sampled_from(["type", "$ref", "properties", "items", "a"]), kids, max_size=3),
                    max_leaves=20))
def test_any_json_value_is_either_a_usable_schema_or_a_clear_problem(value: Any) -> None:
    schema = {"type": "object", "properties": {"v": value}} if isinstance(value, dict) else value
    try:
        validator = check_input_schema(schema)
    except SchemaProblem as exc:
        assert str(exc).startswith("the input schema")
    else:
        validator.is_valid({"v": 1})  # a usable validator never raises on an instance


def test_rendering_keeps_text_and_replaces_what_it_cannot_render() -> None:
    class P:
        def __init__(self, **kw: Any) -> None:
            self.__dict__.update(kw)

    parts = [P(type="text", text="hello\x1b[31m red"), P(type="image", mime_type="image/png", data="aGVsbG8="),
             P(type="resource", resource=P(uri="file:///a.txt", text="inside")), P(type="weird")]
    text = render_result(parts, None)
    assert text.startswith("hello [31m red") and "[image image/png, 6 bytes" in text and "inside" in text
    assert "content of type 'weird'" in text and "aGVsbG8" not in text
    assert json.loads(render_result([], {"a": 1})) == {"a": 1}


def _plan_with(tmp_path: Path, *values: str) -> Any:
    env = {f"V{i}": v for i, v in enumerate(values)}
    return next(iter(plan_servers(compiled(tmp_path, {"s": {"command": "x", "env": env}}))))


def test_secrets_whose_ends_overlap_are_scrubbed_whole(tmp_path: Path) -> None:
    """MCP-1: occurrences are found in the original text and merged, so no part of either value is left."""
    plan = _plan_with(tmp_path, "abcdef12", "ef12ghij", "zzzzzz")
    assert plan.scrub("xx abcdef12ghij yy") == "xx [secret] yy"  # one value at a time left "ghij"
    assert plan.scrub("ef12ghijabcdef12") == "[secret]"  # touching occurrences: one run
    assert plan.scrub("zzzzzzz.") == "[secret]."  # overlapping occurrences of one value
    assert plan.scrub("nothing here") == "nothing here"


@given(st.lists(st.text("abc", min_size=6, max_size=9), min_size=1, max_size=3, unique=True),
       st.lists(st.sampled_from(["a", "b", "c", "-", " "]), max_size=40))
def test_no_secret_survives_scrubbing(values: list[str], noise: list[str]) -> None:
    """Against a character-by-character model: every character some occurrence covers is gone, runs become one mark."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        plan = _plan_with(Path(tmp), *values)
    text = "".join(noise[: len(noise) // 2]) + "".join(values) + values[0][2:] + "".join(noise[len(noise) // 2:])
    covered = [False] * len(text)
    for v in values:
        for i in range(len(text)):
            if text.startswith(v, i):
                covered[i:i + len(v)] = [True] * len(v)
    expected = "".join("" if c and i and covered[i - 1] else ("[secret]" if c else ch) for i, (ch, c) in enumerate(zip(text, covered)))
    out = plan.scrub(text)
    assert out == expected and all(v not in out for v in values), (text, out)
