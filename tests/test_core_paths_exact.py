"""Scope and rule matching take a path as exactly what it says (REQ-5, PERM-3, PERM-7, PERM-16).

Real files and symlinks through `Engine.call`; each test asserts the side effect did not happen.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore.api import load_project_rules
from agentcore.patterns.path import compile_path_pattern
from agentcore.rules.model import Rule, compile_rules
from agentcore.variables import Bindings

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


def _refused(env: Any, *codes: str) -> None:
    assert env.type == "error" and env.refusal is not None, env.to_dict()
    assert env.refusal["code"] in codes, env.to_dict()


async def test_dir_globstar_grant_does_not_cover_a_sibling_ending_in_newline(make_workspace: Callable[..., Path], make_agent: Callable[..., Any]) -> None:
    # `{workspace}/**` also covers the workspace itself; a regex `$` would also accept "ws\n",
    # a sibling of the workspace in its parent directory, outside every grant.
    ws = make_workspace("ws", {"a.txt": "a\n"})
    sibling = ws.parent / "ws\n"
    agent = make_agent(ws)
    _refused(await agent.call("write", {"path": os.fspath(sibling), "content": "planted"}), "out_of_scope")
    assert not os.path.lexists(sibling)
    sibling.write_text("SIBLING-SECRET\n")
    env = await agent.call("read", {"path": os.fspath(sibling)})
    _refused(env, "out_of_scope")
    assert "SIBLING-SECRET" not in str(env.to_dict())


def _denied(env: Any) -> None:
    assert env.type == "error" and env.refusal is not None and env.refusal["code"] == "denied", env.to_dict()
    assert "PRIVATE-KEY-MATERIAL" not in str(env.to_dict())


@pytest.mark.parametrize("pattern", ["{workspace}/keys/**", "{workspace}/keys/id.pem", "keys/*.pem", "{workspace}/keys/id.*"])
@pytest.mark.parametrize("scope", ["manifest", "project"])
async def test_deny_naming_a_path_through_a_symlink_denies_that_file(
    make_workspace: Callable[..., Path], make_agent: Callable[..., Any], write_manifest: Callable[..., Path], pattern: str, scope: str
) -> None:
    # The user's `keys` is a link to where the files really are (a dotfiles manager does this for
    # ~/.ssh and ~/.aws). The deny names `keys/...`; the file is denied by every name and every tool.
    ws = make_workspace("ws", {"store/id.pem": "PRIVATE-KEY-MATERIAL\n", "store/pub.txt": "public\n"})
    (ws / "keys").symlink_to(ws / "store")
    deny = {"permission": "fs.read", "pattern": pattern, "action": "deny"}
    allow = {"permission": "*", "pattern": "*", "action": "allow"}
    if scope == "manifest":
        agent = make_agent(ws, rules=[allow, deny])
    else:
        agent = make_agent(ws, rules=[allow])
        project = load_project_rules(write_manifest({"rules": [deny]}, name="rules"), agent.engine.manifest)
        agent = make_agent(ws, rules=[allow], engine_kwargs={"project_rules": project})
    for spelling in ("keys/id.pem", "store/id.pem", os.fspath(ws / "keys" / "id.pem")):
        _denied(await agent.call("read", {"path": spelling}))
    _denied(await agent.call("edit", {"path": "keys/id.pem", "old_string": "PRIVATE", "new_string": "x"}))
    assert (ws / "store" / "id.pem").read_text() == "PRIVATE-KEY-MATERIAL\n"
    tree = pattern.endswith("/**")  # `keys/**` also names keys/pub.txt, which is store/pub.txt
    env = await agent.call("grep", {"pattern": "PRIVATE|public"})
    assert env.ok and [m["path"] for m in env.data["matches"]] == ([] if tree else [os.fspath(ws / "store" / "pub.txt")]), env.to_dict()
    assert "PRIVATE-KEY-MATERIAL" not in str(env.to_dict())
    env = await agent.call("glob", {"pattern": "**/*.pem"})
    assert env.ok and env.data["paths"] == [], env.to_dict()
    assert (await agent.call("read", {"path": "store/pub.txt"})).ok is not tree


async def test_allow_naming_a_path_through_a_symlink_is_not_resolved(make_workspace: Callable[..., Path], make_agent: Callable[..., Any]) -> None:
    # Only denies follow links: an allow resolved through a link the agent made could outrank a rule the user wrote.
    ws = make_workspace("ws", {"store/id.pem": "k\n"})
    (ws / "keys").symlink_to(ws / "store")
    rules = [{"permission": "read", "pattern": "{workspace}/keys/id.pem", "action": "allow"}]
    agent = make_agent(ws, rules=rules)
    compiled = [cr.expanded for cr in agent.engine.manifest.rules]
    assert compiled == [os.fspath(ws / "keys" / "id.pem")]


# -- properties ---------------------------------------------------------------------------

_COMPONENT = st.text(alphabet="ab.-", min_size=1, max_size=3).filter(lambda s: s not in (".", ".."))
_GLOB_PART = st.one_of(_COMPONENT, st.sampled_from(["*", "**", "?", "a*", "[ab]", "*.b"]))


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(_GLOB_PART, min_size=0, max_size=4), last=_COMPONENT, tree=st.booleans(), path=st.lists(_COMPONENT, min_size=1, max_size=5))
def test_no_path_pattern_matches_a_value_with_a_newline_appended(parts: list[str], last: str, tree: bool, path: list[str]) -> None:
    # The last component of the pattern is literal (or `L/**`, which covers L itself): a value whose
    # last component ends in a newline names another file, which it must not match.
    if sum(p == "**" for p in parts) > 2:
        return
    stem = "/" + "/".join([*parts, last])
    value = "/" + "/".join(path)
    if tree:
        # A literal `stem/**` covers `stem` and all beneath it, not `stem` with a newline appended.
        if any(p in ("*", "**", "?", "a*", "[ab]", "*.b") for p in parts):
            return
        value = stem
        text = stem + "/**"
    else:
        text = stem
    pattern = compile_path_pattern("p", text, anchor=None)
    assert not pattern.matches(value + "\n")
    rule = compile_rules([Rule("read", text, "deny", scope="manifest")], Bindings())[0]
    fn = rule.matcher("path")[0]
    assert fn is not None and not fn(value + "\n")


def test_linked_variant_only_for_denies_and_only_for_paths(make_workspace: Callable[..., Path]) -> None:
    ws = make_workspace("ws", {"store/id.pem": "k\n"})
    (ws / "keys").symlink_to(ws / "store")
    bindings = Bindings.for_workspace(ws)
    rules = [Rule("*", "keys/**", action, scope="project", index=i) for i, action in enumerate(("deny", "ask", "allow"))]
    compiled = compile_rules(rules, bindings)
    by_action = {a: [cr.expanded for cr in compiled if cr.rule.action == a] for a in ("deny", "ask", "allow")}
    assert by_action["deny"] == ["keys/**", os.fspath(ws / "store" / "**")]
    assert by_action["ask"] == ["keys/**"] and by_action["allow"] == ["keys/**"]
    variant = compiled[1]
    assert variant.paths_only and variant.rule.index == 0
    assert variant.matcher("command")[0] is None and variant.matcher("host")[0] is None
    fn = variant.matcher("path")[0]
    assert fn is not None and fn(os.fspath(ws / "store" / "id.pem")) and fn(os.fspath(ws / "store"))
    assert not fn(os.fspath(ws / "storex" / "id.pem"))


@pytest.mark.parametrize("action", ["deny", "ask"])
@pytest.mark.parametrize("rel", ["hooks/pre-commit", "hooks/deep/er/x", "hooks/../hooks/x"])
async def test_write_does_not_create_a_directory_a_rule_forbids_writing(
    make_workspace: Callable[..., Path], make_agent: Callable[..., Any], action: str, rel: str
) -> None:
    # `fs.write {workspace}/hooks` denied (or asked), and `hooks` missing: `write hooks/pre-commit` would
    # create `hooks`, which the rule forbids writing (the sandbox's placeholder keeps it from being made, ENV-6).
    ws = make_workspace("ws", {"a.txt": "a\n"})
    rules = [{"permission": "*", "pattern": "*", "action": "allow"}, {"permission": "fs.write", "pattern": "{workspace}/hooks", "action": action}]
    agent = make_agent(ws, rules=rules)
    if "/../" in rel:
        _refused(await agent.call("write", {"path": rel, "content": "x"}), "unresolvable")
    else:
        env = await agent.call("write", {"path": rel, "content": "#!/bin/sh\n"})
        assert env.type == "error" and env.refusal is not None, env.to_dict()
        # deny: refused by the rule; ask: asked, and refused because no one can answer here
        assert (env.refusal["layer"], env.refusal["code"]) == (("permission", "denied") if action == "deny" else ("ask", "headless")), env.to_dict()
    assert not os.path.lexists(ws / "hooks")
    assert (await agent.call("write", {"path": "other/x", "content": "x"})).ok  # no rule on `other`
    (ws / "hooks").mkdir()  # once it exists, nothing is created: the exact rule does not cover what lies beneath
    assert (await agent.call("write", {"path": "hooks/x", "content": "x"})).ok


@pytest.mark.parametrize("action", ["deny", "ask"])
async def test_edit_is_no_oracle_for_a_file_read_may_not_show(make_workspace: Callable[..., Path], make_agent: Callable[..., Any], action: str) -> None:
    # `read .env` is denied (or asked); `edit` answered whether a guess was there ("no_match" or done),
    # so guessing and restoring spelled the token out. What `edit` reads, `read`'s rules hold for.
    ws = make_workspace("ws", {".env": "TOKEN=abc123\n", "b.txt": "beta\n"})
    rules = [{"permission": "*", "pattern": "*", "action": "allow"}, {"permission": "read", "pattern": "{workspace}/.env", "action": action}]
    agent = make_agent(ws, rules=rules)
    for guess in ("TOKEN=a", "TOKEN=b"):
        env = await agent.call("edit", {"path": ".env", "old_string": guess, "new_string": guess + "!"})
        assert env.type == "error" and env.refusal is not None and env.error_code in ("denied", "headless"), env.to_dict()
    assert (ws / ".env").read_text() == "TOKEN=abc123\n"
    assert (await agent.call("edit", {"path": "b.txt", "old_string": "beta", "new_string": "gamma"})).ok
    assert (ws / "b.txt").read_text() == "gamma\n"
