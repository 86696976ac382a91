"""Manifest and rule patterns (attack review): each test shows a grant wider than its text before the fix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentcore.api import load_manifest
from agentcore.environments.policy import policy_for
from agentcore.errors import CompileError
from agentcore.manifest.intersect import intersect
from agentcore.patterns.path import compile_path_pattern
from agentcore.rules import Rule, RuleEvaluator, Subject, compile_rules
from agentcore.variables import Bindings

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


def _manifest(path: Path, write: list[str]) -> Path:
    data = {
        "name": path.stem,
        "tools": ["bash"],
        "requires": {"fs": {"read": ["{workspace}/**"], "write": write}, "shell": [{"cmd": "touch", "args": [{"wildcard": True}]}]},
        "environment": "bwrap",
    }
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize("pattern", ["{workspace}/\\../outside/**", "{workspace}/..\\/outside/**", "{workspace}/.\\./outside",
                                     "{workspace}/\\./x/*.txt"])
def test_escaped_dot_components_are_refused(tmp_path: Path, pattern: str) -> None:
    # Before, the pattern matched no canonical path but its base stayed `ws/../outside`, which the
    # sandbox bound writable as the kernel resolves it: `outside`, which nothing granted.
    (tmp_path / "ws").mkdir()
    (tmp_path / "outside").mkdir()
    path = _manifest(tmp_path / "m.json", [pattern])
    with pytest.raises(CompileError) as exc:
        load_manifest(path, workspace=tmp_path / "ws")
    assert "requires.fs.write" in str(exc.value) and "'.' or '..'" in str(exc.value)


def test_a_child_cannot_write_outside_its_parent_through_an_escaped_dot_dot(tmp_path: Path) -> None:
    # Before, intersect kept the child's pattern (its base `ws/../outside` lies lexically inside the parent's
    # `ws`) and the child's sandbox made `outside` writable; now task cannot compile the child at all.
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    parent = load_manifest(_manifest(tmp_path / "parent.json", ["{workspace}/**"]), workspace=ws)
    assert outside not in policy_for(parent).write_roots
    with pytest.raises(CompileError):
        intersect(parent, load_manifest(_manifest(tmp_path / "child.json", ["{workspace}/\\../outside/**"]), workspace=ws))


@pytest.mark.parametrize(("pattern", "path"), [("/ws/..foo/**", "/ws/..foo/x"), ("/ws/\\..*", "/ws/..x"), ("/ws/.a/x", "/ws/.a/x"),
                                               ("/ws/a./**", "/ws/a.")])
def test_names_made_of_dots_and_more_still_compile(pattern: str, path: str) -> None:
    assert compile_path_pattern(pattern, pattern, anchor=Path("/ws")).matches(path)


@pytest.mark.parametrize("spelling", ["example.com.", "EXAMPLE.COM.", "Example.Com"])
def test_a_longer_spelling_of_a_host_does_not_outrank_a_manifest_ask(spelling: str) -> None:
    # Before, literal characters were counted as written: the project's allow of `example.com.`
    # had one more than the manifest's ask of `example.com` and fetched unasked.
    rules = compile_rules([Rule("net.fetch", "example.com", "ask", scope="manifest"),
                           Rule("net.fetch", spelling, "allow", scope="project")], Bindings.for_workspace(Path("/ws")))
    subject = Subject("web_fetch", "net.fetch", "host", "example.com:443", host="example.com", port=443)
    assert RuleEvaluator(rules).evaluate(subject).action == "ask"


def test_an_a_label_does_not_outrank_the_u_label_of_a_manifest_ask() -> None:
    rules = compile_rules([Rule("net.fetch", "bücher.de", "ask", scope="manifest"),
                           Rule("net.fetch", "xn--bcher-kva.de", "allow", scope="project")], Bindings.for_workspace(Path("/ws")))
    subject = Subject("web_fetch", "net.fetch", "host", "xn--bcher-kva.de:443", host="xn--bcher-kva.de", port=443)
    assert RuleEvaluator(rules).evaluate(subject).action == "ask"


def test_a_more_specific_host_pattern_still_wins() -> None:
    rules = compile_rules([Rule("net.fetch", "*.example.com", "ask", scope="manifest"),
                           Rule("net.fetch", "api.example.com", "allow", scope="project")], Bindings.for_workspace(Path("/ws")))
    subject = Subject("web_fetch", "net.fetch", "host", "api.example.com:443", host="api.example.com", port=443)
    assert RuleEvaluator(rules).evaluate(subject).action == "allow"


async def test_a_read_limit_beyond_what_readline_takes_still_reads(make_workspace: Any, make_agent: Any, manifest_data: Any) -> None:
    # Before, `limits: {read_bytes: 10**30}` made every line-window read an internal error (OverflowError).
    ws = make_workspace("ws", {"a.txt": "one\ntwo\n"})
    agent = make_agent(ws, manifest_data(limits={"read_bytes": 10**30}))
    env = await agent.call("read", {"path": "a.txt"})
    assert env.ok and "two" in env.data["content"], env.to_dict()
