"""Manifest loading (YAML/JSON, error positions, strictness) and variable expansion."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentcore.api import load_manifest
from agentcore.errors import CompileError, ManifestError
from agentcore.patterns.globtext import glob_escape
from agentcore.variables import Bindings, expand

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

BAD_ACTION_YAML = """\
name: t
tools: [read]
requires:
  fs:
    read: ["{workspace}/**"]
rules:
  - {permission: read, pattern: "*", action: allow}
  - permission: read
    action: permit
    pattern: "*"
"""


def _load(path: Path, ws: Path, **kw: Any) -> Any:
    return load_manifest(path, workspace=ws, **kw)


# -- YAML and JSON --------------------------------------------------------------------


def test_yaml_and_json_compile_to_the_same_thing(workspace: Path, write_manifest: Callable[..., Path], manifest_data: Callable[..., dict]) -> None:
    data = manifest_data(
        read=["{workspace}/**", "/etc/hostname"],
        write=["{workspace}/out/**"],
        rules=[{"permission": "read", "pattern": "{workspace}/.env", "action": "deny"}],
        limits={"read_bytes": 1234, "glob_entries": 7},
    )
    y = _load(write_manifest(data, fmt="yaml"), workspace)
    j = _load(write_manifest(data, fmt="json"), workspace)
    assert y.effective.to_json() == j.effective.to_json()
    assert y.effective.to_json()["fs"]["write"] == [glob_escape(os.fspath(workspace)) + "/out/**"]
    assert y.limits == j.limits and y.limits.read_bytes == 1234 and y.limits.glob_entries == 7
    assert [(r.rule.permission, r.expanded, r.action) for r in y.rules] == [
        (r.rule.permission, r.expanded, r.action) for r in j.rules
    ] == [("read", glob_escape(os.fspath(workspace)) + "/.env", "deny")]


def test_bad_action_points_at_file_line_and_key(workspace: Path, write_manifest: Callable[..., Path]) -> None:
    path = write_manifest(BAD_ACTION_YAML, name="m")
    with pytest.raises(ManifestError) as exc:
        _load(path, workspace)
    text = str(exc.value)
    assert "m.yaml:9" in text
    assert "rules.1.action" in text
    assert exc.value.location is not None and exc.value.location.endswith("m.yaml:9: rules.1.action")
    assert "permit" not in text  # the message names the constraint, not the value


def test_json_error_points_at_line_and_key(workspace: Path, write_manifest: Callable[..., Path]) -> None:
    text = json.dumps(
        {"name": "t", "tools": ["read"], "rules": [{"permission": "read", "pattern": "*", "action": "allow"}, {"permission": "read", "pattern": "*", "action": "maybe"}]},
        indent=2,
    )
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if '"maybe"' in ln)
    path = write_manifest(text, name="m", fmt="json")
    with pytest.raises(ManifestError) as exc:
        _load(path, workspace)
    assert f"m.json:{line}" in str(exc.value)
    assert "rules.1.action" in str(exc.value)


@pytest.mark.parametrize(
    ("text", "key", "line"),
    [
        ("name: t\nrequries:\n  fs: {}\n", "requries", 2),
        ("name: t\nrequires:\n  fs:\n    reed: [a]\n", "requires.fs.reed", 4),
        ("name: t\nrules:\n  - permission: read\n    pattern: '*'\n    action: allow\n    priority: 3\n", "rules.0.priority", 6),
        ("name: t\nlimits:\n  read_byte: 10\n", "limits.read_byte", 3),
        ("name: t\nlimits:\n  read_bytes: -1\n", "limits.read_bytes", 3),
        ("name: t\nrequires:\n  shell:\n    - cmd: 'git status'\n", "requires.shell.0.cmd", 4),
        ("tools: [read]\n", "name", 1),
        ("name: t\nenvironment: docker\n", "environment", 2),
    ],
)
def test_schema_errors_name_key_and_line(workspace: Path, write_manifest: Callable[..., Path], text: str, key: str, line: int) -> None:
    path = write_manifest(text, name="m")
    with pytest.raises(ManifestError) as exc:
        _load(path, workspace)
    assert key in str(exc.value)
    assert f"m.yaml:{line}" in str(exc.value)


@pytest.mark.parametrize("text", ["name: [unclosed\n", "name: t\n  bad: indent\n", "- a list\n- at top\n", "just a string\n"])
def test_unparseable_or_wrong_top_level(workspace: Path, write_manifest: Callable[..., Path], text: str) -> None:
    path = write_manifest(text, name="m")
    with pytest.raises(ManifestError) as exc:
        _load(path, workspace)
    assert "m.yaml" in str(exc.value)


def test_invalid_json_points_at_line(workspace: Path, write_manifest: Callable[..., Path]) -> None:
    path = write_manifest('{\n  "name": "t",\n  "tools": [\n}\n', name="m", fmt="json")
    with pytest.raises(ManifestError) as exc:
        _load(path, workspace)
    assert "m.json:4" in str(exc.value)


@pytest.mark.parametrize("tools", [["read", "reed"], ["Read"], ["read", "read"], ["nonexistent_tool"]])
def test_unknown_or_duplicate_tool_rejected(workspace: Path, write_manifest: Callable[..., Path], manifest_data: Callable[..., dict], tools: list[str]) -> None:
    path = write_manifest(manifest_data(tools=tools), name="m")
    with pytest.raises(CompileError) as exc:
        _load(path, workspace)
    assert "tools" in str(exc.value) and "m.yaml" in str(exc.value)


def test_unknown_rule_permission_rejected(workspace: Path, write_manifest: Callable[..., Path], manifest_data: Callable[..., dict]) -> None:
    path = write_manifest(manifest_data(rules=[{"permission": "reed", "pattern": "*", "action": "allow"}]), name="m")
    with pytest.raises(CompileError) as exc:
        _load(path, workspace)
    # file:line: key: message, with a suggestion
    assert re.fullmatch(re.escape(os.fspath(path)) + r":\d+: rules\.0\.permission", exc.value.location or "")
    assert "did you mean 'read'?" in exc.value.message


@pytest.mark.parametrize("host", ["*", "*.*.example.com", "ex*.com", "example.com:*", "http://example.com", "user@example.com"])
def test_bad_host_patterns_rejected(workspace: Path, write_manifest: Callable[..., Path], manifest_data: Callable[..., dict], host: str) -> None:
    try:
        import agentcore.net.hosts  # noqa: F401
    except ImportError:
        pytest.skip("agentcore.net.hosts is not importable yet; the net layer validates host patterns")
    data = manifest_data()
    data["requires"]["net"] = {"hosts": ["example.org", host]}
    path = write_manifest(data, name="m")
    with pytest.raises(CompileError) as exc:
        _load(path, workspace)
    assert "requires.net.hosts" in str(exc.value) and "m.yaml" in str(exc.value)


@pytest.mark.parametrize("pattern", ["{workspace}/../x/**", "src/../../etc", "./src/**"])
def test_dot_components_in_path_patterns_rejected(workspace: Path, write_manifest: Callable[..., Path], manifest_data: Callable[..., dict], pattern: str) -> None:
    path = write_manifest(manifest_data(read=[pattern]), name="m")
    with pytest.raises(CompileError) as exc:
        _load(path, workspace)
    assert "requires.fs.read" in str(exc.value)


# -- variables ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "where"),
    [("read", "requires.fs.read."), ("write", "requires.fs.write."), ("rule", "rules.0.pattern")],
)
@pytest.mark.parametrize("var", ["{wrkspace}", "{Workspace}", "{ws}", "{}", "{ad_hoc}"])
def test_unknown_variable_is_compile_error_with_location(
    workspace: Path, write_manifest: Callable[..., Path], manifest_data: Callable[..., dict], field: str, where: str, var: str
) -> None:
    pattern = f"{var}/**"
    if field == "read":
        data = manifest_data(read=[pattern])
    elif field == "write":
        data = manifest_data(write=[pattern])
    else:
        data = manifest_data(rules=[{"permission": "read", "pattern": pattern, "action": "deny"}])
    path = write_manifest(data, name="vars")
    with pytest.raises(CompileError) as exc:
        _load(path, workspace)
    assert exc.value.location is not None
    assert re.match(re.escape(os.fspath(path)) + r":\d+: " + re.escape(where), exc.value.location)
    assert "unknown variable" in exc.value.message


@pytest.mark.parametrize("var", ["{ad-hoc}", "{user-data}"])
async def test_empty_expansion_fails_closed(workspace: Path, make_agent: Callable[..., Any], var: str) -> None:
    (workspace / "a.txt").write_text("a\n")
    agent = make_agent(workspace, read=[f"{var}/**"], write=[f"{var}/**", f"{{workspace}}/{var}/**"])
    eff = agent.engine.manifest.effective
    assert eff.fs_read == () and eff.fs_write == ()
    for tool, args in [
        ("read", {"path": "a.txt"}),
        ("write", {"path": "b.txt", "content": "x"}),
        ("glob", {"pattern": "*"}),
        ("grep", {"pattern": "a"}),
    ]:
        env = await agent.call(tool, args)
        assert env.refusal == {"layer": "capability", "code": "empty_scope"}, env.to_dict()
    assert not (workspace / "b.txt").exists()


async def test_ad_hoc_and_user_data_with_values(make_workspace: Callable[..., Path], make_agent: Callable[..., Any], manifest_data: Callable[..., dict]) -> None:
    ws = make_workspace("ws", {"a.txt": "ws\n"})
    adhoc1 = make_workspace("adhoc1", {"f.txt": "one\n"})
    adhoc2 = make_workspace("adhoc2", {"f.txt": "two\n"})
    udata = make_workspace("udata", {"u.txt": "user\n"})
    data = manifest_data(read=["{ad-hoc}/**", "{user-data}/*.txt"], write=[])
    agent = make_agent(ws, data, engine_kwargs={"ad_hoc": [adhoc1, adhoc2], "user_data": udata})
    assert (await agent.call("read", {"path": os.fspath(adhoc1 / "f.txt")})).data["content"] == "one\n"
    assert (await agent.call("read", {"path": os.fspath(adhoc2 / "f.txt")})).data["content"] == "two\n"
    assert (await agent.call("read", {"path": os.fspath(udata / "u.txt")})).ok
    env = await agent.call("read", {"path": "a.txt"})
    assert env.refusal == {"layer": "capability", "code": "out_of_scope"}


async def test_multiple_roots(tmp_path: Path, make_workspace: Callable[..., Path], make_agent: Callable[..., Any], write_manifest: Callable[..., Path], manifest_data: Callable[..., dict]) -> None:
    ws = make_workspace("ws", {"a.txt": "main\n"})
    other = make_workspace("other", {"b.txt": "other\n"})
    make_workspace("other_evil", {"c.txt": "evil\n"})
    # `roots` are relative to the manifest file, which lives beside the roots here.
    path = write_manifest(manifest_data(roots=["other"]), directory=tmp_path, name="roots")
    agent = make_agent(ws, path)
    assert agent.engine.manifest.workspace_roots == (ws, other)
    assert (await agent.call("read", {"path": "a.txt"})).ok
    assert (await agent.call("read", {"path": os.fspath(other / "b.txt")})).ok
    assert (await agent.call("write", {"path": os.fspath(other / "new.txt"), "content": "n"})).ok
    env = await agent.call("read", {"path": os.fspath(tmp_path / "other_evil" / "c.txt")})
    assert env.refusal == {"layer": "capability", "code": "out_of_scope"}
    # Relative names are anchored at the first root only.
    env = await agent.call("read", {"path": "b.txt"})
    assert env.error_code == "not_found", env.to_dict()


def test_expand_unit() -> None:
    b = Bindings({"workspace": ("/w1", "/w[2]"), "ad-hoc": ("/a",), "user-data": ()})
    assert expand("{workspace}/x", b) == ["/w1/x", "/w\\[2\\]/x"]
    assert expand("{workspace}/x", b, escape=False) == ["/w1/x", "/w[2]/x"]
    assert sorted(expand("{workspace}{ad-hoc}", b, escape=False)) == ["/w1/a", "/w[2]/a"]
    assert expand("{user-data}/x", b) == []
    assert expand("{workspace}/{user-data}", b) == []  # one empty variable empties the product
    assert expand("plain/*.py", b) == ["plain/*.py"]
    with pytest.raises(CompileError):
        expand("{wrkspace}", b, where="f.yaml: here")


def test_unknown_watchdog_category_is_a_compile_error(tmp_path):
    """A typo in watchdog.disable must not silently keep (or drop) a category (WDOG)."""
    from agentcore.api import load_manifest
    from agentcore.errors import CompileError

    (tmp_path / "m.yaml").write_text("name: x\nwatchdog: {disable: [destructiv]}\n")
    with pytest.raises(CompileError) as exc:
        load_manifest(tmp_path / "m.yaml", workspace=tmp_path)
    assert "watchdog.disable" in str(exc.value) and "destructiv" in str(exc.value)


def test_parsed_documents_are_cached_by_text_but_every_caller_gets_its_own_copy(tmp_path: Path) -> None:
    from agentcore.api import parse_document

    text = "name: a\ntools: [read]\nrules:\n  - {permission: read, pattern: '*', action: allow}\n"
    first = parse_document(text, tmp_path / "m.yaml")
    first["tools"].append("bash")  # a caller that changes what it was given
    first["rules"][0]["action"] = "deny"
    second = parse_document(text, tmp_path / "m.yaml")
    assert second == {"name": "a", "tools": ["read"], "rules": [{"permission": "read", "pattern": "*", "action": "allow"}]}
    # A broken document is refused every time (errors are never cached as results).
    for _ in range(2):
        with pytest.raises(ManifestError):
            parse_document("a: 1\na: 2\n", tmp_path / "m.yaml")
