"""Manifests, rule files, skill front matter and call arguments are parsed defensively (issue 8, item 8).

Duplicate keys are refused in YAML and JSON at any depth (with file:line and
the key path, never a value), YAML anchors/aliases/merge keys are refused,
and nesting deeper than 64 containers is refused before anything recursive
runs. Every adversarial case has a control: the same input without the
problem loads, or the unprotected parser shows the harm.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore.api import load_manifest, load_project_rules
from agentcore.errors import ManifestError
from agentcore.manifest.strict_yaml import load_yaml
from agentcore.textdata import MAX_DEPTH, StructureError, load_json, loads_json, printable, too_deep
from conformance.protocol import decode_request

EXE = str(Path(sys.executable).parent / "agentcore")

DENY_FIRST = """\
name: dup
tools: [read]
requires:
  fs:
    read: ["{workspace}/**"]
rules:
  - {permission: read, pattern: "{workspace}/secret.txt", action: deny}
rules:
  - {permission: "*", pattern: "*", action: allow}
"""


def _load(path: Path, ws: Path) -> Any:
    return load_manifest(path, workspace=ws)


# -- duplicate keys in real files -------------------------------------------------------------


def test_a_second_rules_key_no_longer_replaces_a_deny(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    # Control: what a last-wins parser makes of it — the deny is gone.
    assert yaml.safe_load(DENY_FIRST)["rules"] == [{"permission": "*", "pattern": "*", "action": "allow"}]
    m = tmp_path / "m.yaml"
    m.write_text(DENY_FIRST)
    with pytest.raises(ManifestError) as exc:
        _load(m, ws)
    assert exc.value.location == f"{m}:8"
    assert exc.value.message == "rules: duplicate key (first at line 6)"
    assert "secret" not in str(exc.value) and "allow" not in str(exc.value)
    # The same file with one `rules:` compiles, deny first.
    m.write_text(DENY_FIRST.replace("rules:\n  - {permission: \"*\"", "  - {permission: \"*\""))
    compiled = _load(m, ws)
    assert [r.rule.action for r in compiled.rules] == ["deny", "allow"]


def test_a_second_read_key_in_json_no_longer_widens_fs_read(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    text = '{"name": "dup",\n "tools": ["read"],\n "requires": {"fs": {\n   "read": ["{workspace}/src/**"],\n   "read": ["/**"]}}}\n'
    assert json.loads(text)["requires"]["fs"]["read"] == ["/**"]  # control: json.loads keeps the wider one
    m = tmp_path / "m.json"
    m.write_text(text)
    with pytest.raises(ManifestError) as exc:
        _load(m, ws)
    assert exc.value.location == f"{m}:5" and exc.value.message == "requires.fs.read: duplicate key (first at line 4)"
    assert "/**" not in str(exc.value)


@pytest.mark.parametrize(
    ("text", "line", "path"),
    [
        ("name: x\nrules:\n  - permission: read\n    pattern: a\n    action: deny\n    action: allow\n", 6, "rules.0.action"),
        ("name: x\nlimits:\n  read_bytes: 10\n  'read_bytes': 20\n", 4, "limits.read_bytes"),
        ('name: x\nagents:\n  a: one.yaml\n  "\\x61": two.yaml\n', 4, "agents.a"),  # the same key spelt two ways
        ("name: x\nagents: {a: one.yaml, b: two.yaml, a: three.yaml}\n", 2, "agents.a"),
    ],
)
def test_duplicate_keys_at_any_depth_name_the_line_and_key_path(tmp_path: Path, text: str, line: int, path: str) -> None:
    m = tmp_path / "m.yaml"
    m.write_text(text)
    with pytest.raises(ManifestError) as exc:
        _load(m, tmp_path)
    assert exc.value.location == f"{m}:{line}" and exc.value.message.startswith(f"{path}: duplicate key")
    assert ".yaml" not in exc.value.message and "deny" not in exc.value.message


def test_project_rule_files_refuse_duplicate_keys_too(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - {permission: read, pattern: '*', action: deny}\nrules: []\n")
    m = tmp_path / "m.yaml"
    m.write_text("name: x\n")
    compiled = _load(m, tmp_path)
    with pytest.raises(ManifestError) as exc:
        load_project_rules(rules, compiled)
    assert exc.value.location == f"{rules}:3" and "rules: duplicate key" in exc.value.message
    rules.write_text("rules:\n  - {permission: read, pattern: '*', action: deny}\n")  # control
    assert [r.rule.action for r in load_project_rules(rules, compiled)] == ["deny"]


# -- YAML anchors, aliases, merge keys ----------------------------------------------------------

LAUGHS = "".join(
    [f"l0: &l0 [{', '.join(['lol'] * 10)}]\n"]
    + [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]\n" for i in range(1, 10)]
    + ["name: *l9\n"]
)


def test_a_billion_laughs_is_refused_before_anything_expands(tmp_path: Path) -> None:
    m = tmp_path / "laughs.yaml"
    m.write_text(LAUGHS)
    tracemalloc.start()
    try:
        with pytest.raises(ManifestError) as exc:
            _load(m, tmp_path)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert exc.value.message == "YAML anchors and aliases are not accepted" and exc.value.location == f"{m}:1"
    # 10**10 references would need tens of GB; refusing at the first anchor needs almost nothing.
    assert peak < 5 * 1024 * 1024, peak


@pytest.mark.parametrize(
    "text",
    [
        "name: &n x\n",  # an anchor alone
        "base: {read_bytes: 1}\nname: x\nlimits: {<<: {read_bytes: 5}}\n",  # a merge key without any alias
        "name: x\ndescription: &d hello\nroots: [*d]\n",
    ],
)
def test_anchors_aliases_and_merge_keys_are_refused(tmp_path: Path, text: str) -> None:
    m = tmp_path / "m.yaml"
    m.write_text(text)
    with pytest.raises(ManifestError) as exc:
        _load(m, tmp_path)
    assert "not accepted" in exc.value.message and "hello" not in str(exc.value)


# -- nesting depth -----------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_deep_manifests_are_refused_cleanly_not_with_a_recursion_error(tmp_path: Path, suffix: str) -> None:
    deep = "[" * 50_000 + "]" * 50_000
    m = tmp_path / f"m{suffix}"
    m.write_text(f'{{"name": "x",\n "roots": {deep}}}\n')
    with pytest.raises(RecursionError):  # control: what the plain parser does with it
        json.loads(m.read_text())
    with pytest.raises(ManifestError) as exc:
        _load(m, tmp_path)
    assert exc.value.location == f"{m}:2" and f"nested more than {MAX_DEPTH} levels deep" in exc.value.message


def test_nesting_up_to_the_limit_is_accepted(tmp_path: Path) -> None:
    ok = "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)  # inside the top-level object: exactly MAX_DEPTH
    assert load_json('{"a": ' + ok + "}")[0]["a"] == json.loads(ok)
    assert load_yaml("a: " + ok + "\n")[0]["a"] == json.loads(ok)
    for text in ('{"a": [' + ok + "]}", "a: [" + ok + "]\n"):
        with pytest.raises(StructureError):
            (load_json if text.startswith("{") else load_yaml)(text)


def test_too_deep_is_iterative_and_exact() -> None:
    value: Any = "leaf"
    for _ in range(100_000):
        value = [value]
    assert too_deep(value)
    shallow: Any = "leaf"
    for _ in range(MAX_DEPTH):
        shallow = {"k": shallow}
    assert not too_deep(shallow) and too_deep([shallow])
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    assert too_deep(cyclic)  # a cycle ends at the limit instead of looping


# -- the duplicate-key detector against a reference ---------------------------------------------

_KEYS = st.sampled_from(["a", "b", "c"])
_LEAF = st.sampled_from([0, 1, "x"])


def _trees(depth: int = 4) -> st.SearchStrategy[Any]:
    return st.recursive(
        _LEAF,
        lambda kids: st.lists(st.tuples(_KEYS, kids), max_size=4).map(lambda pairs: ("obj", pairs)) | st.lists(kids, max_size=3),
        max_leaves=24,
    )


class _Render:
    """Renders a tree (objects as pair lists, so duplicates are possible) one key per line,
    noting the first duplicate in document order: the reference the parsers must agree with."""

    def __init__(self, style: str, spell: Any) -> None:
        self.style = style
        self.spell = spell
        self.lines: list[str] = []
        self.first_dup: tuple[tuple[Any, ...], int] | None = None

    def key_seen(self, seen: dict[str, int], key: str, path: tuple[Any, ...]) -> None:
        line = len(self.lines)  # the key's own line, 1-based, already appended
        if key in seen and self.first_dup is None:
            self.first_dup = (path + (key,), line)
        seen.setdefault(key, line)

    def json(self, node: Any, path: tuple[Any, ...], lead: str) -> None:
        if isinstance(node, tuple):
            self.lines.append(lead + "{")
            seen: dict[str, int] = {}
            for i, (key, value) in enumerate(node[1]):
                self.lines.append(json.dumps(key) if not self.spell(i) else '"\\u00' + format(ord(key), "02x") + '"')
                self.lines[-1] += ":"
                self.key_seen(seen, key, path)
                self.json(value, path + (key,), "")
                if i < len(node[1]) - 1:
                    self.lines[-1] += ","
            self.lines.append("}")
        elif isinstance(node, list):
            self.lines.append(lead + "[")
            for i, item in enumerate(node):
                self.json(item, path + (i,), "")
                if i < len(node) - 1:
                    self.lines[-1] += ","
            self.lines.append("]")
        else:
            self.lines.append(lead + json.dumps(node))

    def yaml(self, node: Any, path: tuple[Any, ...], indent: str) -> None:
        if isinstance(node, tuple) and node[1]:
            seen: dict[str, int] = {}
            for i, (key, value) in enumerate(node[1]):
                spelt = [key, f"'{key}'", f'"{key}"', '"\\x' + format(ord(key), "02x") + '"'][self.spell(i) % 4]
                self.lines.append(f"{indent}{spelt}:")
                self.key_seen(seen, key, path)
                self.yaml_value(value, path + (key,), indent)
        elif isinstance(node, list) and node:
            for i, item in enumerate(node):
                self.lines.append(f"{indent}-")
                self.yaml_value(item, path + (i,), indent)
        else:
            self.lines.append(indent + ("{}" if isinstance(node, tuple) else "[]" if isinstance(node, list) else json.dumps(node)))

    def yaml_value(self, value: Any, path: tuple[Any, ...], indent: str) -> None:
        if isinstance(value, (tuple, list)) and value and (not isinstance(value, tuple) or value[1]):
            self.yaml(value, path, indent + "  ")
        else:
            self.lines[-1] += " " + ("{}" if isinstance(value, tuple) else "[]" if isinstance(value, list) else json.dumps(value))


def _as_data(node: Any) -> Any:
    if isinstance(node, tuple):
        return {k: _as_data(v) for k, v in node[1]}
    if isinstance(node, list):
        return [_as_data(v) for v in node]
    return node


@settings(max_examples=300, deadline=None)
@given(tree=_trees(), style=st.sampled_from(["json", "yaml"]), spellings=st.lists(st.integers(0, 3), min_size=8, max_size=8))
def test_duplicate_key_detector_agrees_with_a_reference(tree: Any, style: str, spellings: list[int]) -> None:
    top = tree if isinstance(tree, tuple) else ("obj", [("a", tree)])
    r = _Render(style, lambda i: spellings[i % len(spellings)])
    if style == "json":
        r.json(top, (), "")
    else:
        r.yaml(top, (), "")
    text = "\n".join(r.lines) + "\n"
    load = load_json if style == "json" else load_yaml
    if r.first_dup is None:
        data, _lines = load(text)
        assert data == _as_data(top)
    else:
        with pytest.raises(StructureError) as exc:
            load(text)
        path, line = r.first_dup
        assert (exc.value.path, exc.value.line) == (path, line), text


# -- call arguments, the CLI and the harness protocol -------------------------------------------


@pytest.mark.anyio
async def test_deep_call_arguments_are_a_schema_refusal_naming_the_depth(make_agent: Any, workspace: Path) -> None:
    agent = make_agent(workspace)
    value: Any = "needle-value"
    for _ in range(5_000):
        value = [value]
    env = await agent.call("read", {"path": value})
    wire = env.to_dict()
    assert wire["metadata"]["refusal"] == {"layer": "schema", "code": "invalid_arguments"}, wire
    assert f"nested more than {MAX_DEPTH} levels deep" in env.error_text and "needle" not in env.error_text
    # Control: the same call nested a little is the ordinary type refusal.
    shallow = await agent.call("read", {"path": [["x"]]})
    assert shallow.refusal == {"layer": "schema", "code": "invalid_arguments"} and "nested" not in (shallow.error_text or "")


@pytest.mark.anyio
async def test_a_lone_surrogate_in_any_argument_is_a_schema_refusal_and_nothing_is_written(make_agent: Any, workspace: Path) -> None:
    """JSON's `\\udcff` decodes to a lone surrogate, which is no Unicode text: refused before any tool (ORDER-2),
    never an internal error inside one, nor a file named by a byte the model never wrote."""
    agent = make_agent(workspace)
    before = sorted(p.name for p in workspace.iterdir())
    calls = [
        ("write", {"path": "s.txt", "content": "a\udcffb"}),
        ("write", {"path": "s\udcff.txt", "content": "x"}),
        ("edit", {"path": "a.txt", "old_string": "x", "new_string": "\udcff"}),
        ("grep", {"pattern": "a\udcff"}),
        ("read", {"path": "a.txt", "\ud800": 1}),
    ]
    for tool, args in calls:
        env = await agent.call(tool, args)
        assert env.to_dict()["metadata"]["refusal"] == {"layer": "schema", "code": "invalid_arguments"}, (tool, env.to_dict())
        assert "lone surrogate" in (env.error_text or "")
    assert sorted(p.name for p in workspace.iterdir()) == before
    ok = await agent.call("write", {"path": "s.txt", "content": "caf\u00e9 \U0001f600"})  # control: real non-ASCII text
    assert ok.type == "output" and (workspace / "s.txt").read_text(encoding="utf-8") == "caf\u00e9 \U0001f600"


def test_cli_refuses_deep_and_duplicate_args_json_without_a_traceback(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("hello\n")
    m = tmp_path / "m.yaml"
    m.write_text("name: x\ntools: [read]\nrequires: {fs: {read: ['{workspace}/**']}}\nrules: [{permission: '*', pattern: '*', action: allow}]\nenvironment: none\n")
    deep = '{"path": ' + "[" * 40_000 + "]" * 40_000 + "}"
    for args, expect in ((deep, "nested more than"), ('{"path": "a.txt", "path": "/etc/hostname"}', "path: duplicate key")):
        r = subprocess.run([EXE, "call", "--manifest", str(m), "--workspace", str(ws), "--headless", "read", args], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr, r.stderr[-2000:]
        assert expect in r.stderr and "/etc/hostname" not in r.stderr
    ok = subprocess.run([EXE, "call", "--manifest", str(m), "--workspace", str(ws), "--headless", "read", '{"path": "a.txt"}'], capture_output=True, text=True, timeout=60)
    assert json.loads(ok.stdout)["data"]["content"] == "hello\n"  # control


def test_harness_protocol_reader_answers_deep_or_duplicate_requests_with_an_error_reply() -> None:
    deep = b'{"seq": 1, "op": "start", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    for line in (deep, b'{"seq": 1, "op": "start", "op": "call"}'):
        req, bad = decode_request(line)
        assert req is None and bad is not None and "error" in bad
    req, bad = decode_request(b'{"seq": 2, "op": "start", "protocol": 1}')
    assert bad is None and req == {"seq": 2, "op": "start", "protocol": 1}
    assert loads_json(b'{"a": [1, {"b": null}]}') == {"a": [1, {"b": None}]}


def test_skill_front_matter_with_an_alias_is_skipped_like_any_invalid_skill() -> None:
    from agentcore.tools.skill import split_front_matter

    ok = split_front_matter("---\nname: s\ndescription: does things\n---\nbody\n")
    assert ok == ({"name": "s", "description": "does things"}, "body")
    assert split_front_matter("---\nname: &a s\ndescription: *a\n---\nbody\n") is None
    assert split_front_matter("---\nname: s\nname: t\ndescription: d\n---\nbody\n") is None


@given(st.text())
def test_printable_text_holds_no_control_or_format_character(text: str) -> None:
    one_line, lines = printable(text), printable(text, lines=True)
    assert one_line.isprintable()
    assert all(c.isprintable() or c in "\n\t" for c in lines)
    if text.isprintable():
        assert one_line == lines == text  # ordinary text is left as it is


@given(value=st.text(), tool=st.text(min_size=1))
def test_what_an_ask_shows_holds_no_control_or_format_character(value: str, tool: str) -> None:
    """The lines of an ask and the labels of its "always" options reach a terminal or an editor's buttons:
    a bidirectional override or an escape sequence in a command must not reorder or hide what is approved."""
    from agentcore.api import AskRequest
    from agentcore.rules.evaluator import Subject

    subjects = (Subject(tool, "shell.run", "command", value), Subject(tool, "fs.write", "path", value))
    for layer in ("permission", "watchdog"):
        request = AskRequest("s", "c", tool, "execute", value, layer, value, subjects)  # type: ignore[arg-type]
        for text in (*request.details(), request.always_label(True), request.always_label(False)):
            assert text.isprintable(), text


@given(value=st.recursive(st.one_of(st.text(), st.integers(), st.none()),
                          lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)),
                          max_leaves=8),
       indent=st.sampled_from([None, 2]))
def test_json_text_is_the_same_json_and_holds_nothing_a_terminal_acts_on(value: Any, indent: int | None) -> None:
    from agentcore.textdata import json_text

    text = json_text(value, indent=indent)
    assert json.loads(text) == value
    assert all(c.isprintable() or c in "\n " for c in text), text


def test_agentcore_call_prints_a_files_c1_controls_and_overrides_escaped(tmp_path: Path) -> None:
    """`agentcore call read` prints the file's content inside JSON: U+009B (CSI to some terminals) and a
    right-to-left override arrive as JSON escapes, and the JSON still holds them."""
    content = "a\u009b2Jb\u202ec\u2028d\n"
    (tmp_path / "f.txt").write_text(content)
    manifest = tmp_path / "m.yaml"
    manifest.write_text('name: m\ntools: [read]\nrequires: {fs: {read: ["{workspace}/**"]}}\n'
                        'rules: [{permission: "*", pattern: "*", action: allow}]\n')
    exe = str(Path(sys.executable).parent / "agentcore")
    done = subprocess.run([exe, "call", "--manifest", str(manifest), "--workspace", str(tmp_path), "--headless", "read", '{"path": "f.txt"}'],
                          capture_output=True, text=True, timeout=60, check=True)
    assert not any(c in done.stdout for c in "\u009b\u202e\u2028")
    assert "\\u009b" in done.stdout and "\\u202e" in done.stdout
    assert json.loads(done.stdout)["data"]["content"] == content
