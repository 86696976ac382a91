"""`ScopedFS.tree_filter`: the once-per-search visibility decision never shows what `visible` hides.

The search tools skip the per-result visibility test when `tree_filter(root)`
returns None, and otherwise use the predicate it returns. Whatever deny rules
(any scope, permission, pattern shape) and read scopes are in force: with
None, `visible` holds for every file beneath the root; with a predicate, it
agrees with `visible` on every one of them. Checked with hypothesis over
random rules and roots on a layout with awkward names.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentcore.runtime import ScopedFS

LAYOUT = [
    "a.py", ".env", "b.env", "secret/plan.md", "secret/.env", "src/m.py", "src/deep/x.py", "src/deep/.env",
    "foo-x.txt", "foo.txt", "foo/bar.txt", "dir with space/f", "[br]acket/in", "é/ü.txt", "sub/sub/sub/z",
    "x\ny/n.txt", "star*/q", "q?/r", os.fsdecode(b"bad\xff/name"),
    ".env\n", "src/b.env\n",  # the compiled matchers accept one newline past a pattern's end
]
DIRS = sorted({""} | {p.rsplit("/", 1)[0] for p in LAYOUT if "/" in p} | {"src/deep", "sub/sub"})
SEGMENTS = st.sampled_from(["*", "**", "?", "*.env", ".env", "s*", "[ab]*", "secret", "src", "deep", "foo*", "*.py", "sub", "é", "x*"])
REL_GLOB = st.lists(SEGMENTS, min_size=1, max_size=4).map("/".join)
PATTERN = st.one_of(
    st.just("*"),
    REL_GLOB,  # relative: anchored at the workspace
    REL_GLOB.map(lambda g: "{workspace}/" + g),
    st.sampled_from(["/tmp/**", "/**", "/elsewhere/**", "/t*", "{workspace}", "{workspace}x/**", "**"]),
)
PERMISSION = st.sampled_from(["*", "glob", "grep", "read", "fs.read", "write", "fs.write", "bash", "edit"])
RULE = st.tuples(PERMISSION, PATTERN, st.sampled_from(["deny", "deny", "allow", "ask"]))
READ_SCOPES = [["{workspace}/**"], ["{workspace}/src/**"], ["{workspace}/*.py", "{workspace}/src/**"], ["{workspace}/s*/**"]]


@pytest.fixture
def layout(make_workspace: Callable[..., Path]) -> Path:
    ws = make_workspace("ws")
    for rel in LAYOUT:
        target = ws / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("x\n")
    return ws


def files_under(ws: Path, root: Path) -> list[str]:
    out = []
    for dirpath, _dirs, names in os.walk(root):
        out += [os.path.join(dirpath, n) for n in names]
    return out


def scoped(agent: Any, tool: str) -> ScopedFS:
    return ScopedFS(agent.engine.manifest, agent.session, tool)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    scope=st.sampled_from(range(len(READ_SCOPES))),
    rules=st.lists(RULE, max_size=4),
    root=st.sampled_from(DIRS),
    tool=st.sampled_from(["glob", "grep", "read"]),
)
def test_fast_path_never_shows_a_hidden_path(
    layout: Path, make_agent: Callable[..., Any], scope: int, rules: list[tuple[str, str, str]], root: str, tool: str
) -> None:
    agent = _agents(make_agent, layout)[scope]
    agent.session.set_session_rules(rules)
    fs = scoped(agent, tool)
    where = layout / root if root else layout
    check = fs.tree_filter(os.fspath(where))
    for path in [os.fspath(where), *files_under(layout, where)]:
        if check is None:
            assert fs.visible(path), (rules, root, path)
        else:
            assert check(path) == fs.visible(path), (rules, root, path)


_cache: dict[Path, list[Any]] = {}


def _agents(make_agent: Callable[..., Any], ws: Path) -> list[Any]:
    # One engine per read scope for the whole test (hypothesis calls the body many times).
    if ws not in _cache:
        _cache.clear()
        _cache[ws] = [make_agent(ws, read=r, tools=("read", "glob", "grep")) for r in READ_SCOPES]
    return _cache[ws]


def test_fast_path_is_taken_when_nothing_can_hide(layout: Path, make_agent: Callable[..., Any]) -> None:
    ws = os.fspath(layout)
    agent = make_agent(layout, tools=("read", "glob", "grep"))
    fs = scoped(agent, "grep")
    assert fs.tree_filter(ws) is None
    # Denies that cannot reach the root: elsewhere, another tool, or another subtree.
    agent.session.set_session_rules([
        ("*", "/elsewhere/**", "deny"), ("write", "**", "deny"), ("bash", "*", "deny"), ("grep", "{workspace}/secret/**", "deny"),
    ])
    assert fs.tree_filter(ws + "/src") is None
    check = fs.tree_filter(ws)  # secret/ is under the workspace: a predicate
    assert check is not None and not check(ws + "/secret/plan.md") and check(ws + "/a.py")
    # The session directory is always readable.
    assert fs.tree_filter(os.fspath(agent.session.workdir)) is None


@pytest.mark.parametrize(
    ("read", "rules", "root"),
    [
        (["{workspace}/src/**"], [], ""),  # the root is wider than the read scope
        (["{workspace}/*.py"], [], ""),  # not a `<dir>/**` scope
        (["{workspace}/**"], [("read", "**/.env", "deny")], "src"),  # leading wildcard, anchored at the workspace
        (["{workspace}/**"], [("*", "*", "deny")], "src"),
        (["{workspace}/**"], [("fs.read", "{workspace}/sr*", "deny")], "src"),
        (["{workspace}/**"], [("read", "{workspace}", "deny")], ""),  # the root itself
    ],
)
def test_fast_path_is_refused_when_something_could_hide(
    layout: Path, make_agent: Callable[..., Any], read: list[str], rules: list[tuple[str, str, str]], root: str
) -> None:
    agent = make_agent(layout, read=read, tools=("read", "glob", "grep"))
    agent.session.set_session_rules(rules)
    fs = scoped(agent, "glob")
    where = layout / root if root else layout
    check = fs.tree_filter(os.fspath(where))
    assert check is not None
    assert [check(p) for p in files_under(layout, where)] == [fs.visible(p) for p in files_under(layout, where)]


@pytest.mark.anyio
async def test_manifest_denies_are_seen_too(layout: Path, make_agent: Callable[..., Any]) -> None:
    rules = [{"permission": "*", "pattern": "*", "action": "allow"}, {"permission": "read", "pattern": "secret/**", "action": "deny"}]
    agent = make_agent(layout, rules=rules, tools=("read", "glob", "grep"))
    fs = scoped(agent, "glob")
    assert fs.tree_filter(os.fspath(layout)) is not None
    assert fs.tree_filter(os.fspath(layout / "src")) is None
    env = await agent.call("glob", {"pattern": "**"})
    assert not any("/secret/" in p for p in env.data["paths"])

