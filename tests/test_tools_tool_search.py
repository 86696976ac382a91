"""tool_search through the real pipeline with third-party tools on a fresh registry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore.access import Access, FsAccess
from agentcore.api import Engine, load_manifest
from agentcore.api import build_catalog as build_registry
from agentcore.tools.base import CallContext, Tool, ToolResult
from agentcore.tools.registry import ToolRegistry
from agentcore.tools.tool_search import bm25_rank, tokenize
from agentcore.watchdog import AllowAllWatchdog

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

OBJ = {"type": "object", "properties": {"path": {"type": "string"}}, "additionalProperties": False}


def make_tool(tid: str, desc: str, *, reads: bool = False) -> Tool:
    class Extension(Tool):
        id = tid
        description = desc
        parameters = OBJ
        kind = "other"

        def accesses(self, args: dict[str, Any], ctx: CallContext) -> list[Access]:
            return [FsAccess("path", args["path"], "read")] if reads and "path" in args else []

        async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
            return ToolResult(data={"ran": tid})

    return Extension()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def registry() -> ToolRegistry:
    reg = build_registry(plugins=False)
    reg.register(make_tool("repo_clone", "Clone a remote git repository into the workspace."))
    reg.register(make_tool("repo_overview", "Summarise a repository: file tree and language statistics."))
    reg.register(make_tool("apply_patch", "Apply a unified diff patch atomically across files."))
    reg.register(make_tool("lsp_defs", "Language server: go to definition and find references in source code."))
    reg.register(make_tool("peek", "Show the first bytes of a file.", reads=True))
    return reg


DEFERRED = ["repo_clone", "repo_overview", "apply_patch", "lsp_defs", "peek"]


def make_engine(
    tmp_path: Path,
    registry: ToolRegistry,
    *,
    tools: list[str] | None = None,
    extra_rules: list[dict[str, str]] | None = None,
    deferred: list[str] | None = None,
) -> Engine:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "f.txt").write_text("data")
    manifest = {
        "name": "searcher",
        "tools": tools or ["tool_search"],
        "deferred_tools": [d for d in (DEFERRED if deferred is None else deferred) if d not in (tools or [])],
        "requires": {"fs": {"read": ["{workspace}/**"]}},
        "rules": [{"permission": "*", "pattern": "*", "action": "allow"}] + (extra_rules or []),
        "environment": "none",
    }
    path = tmp_path / "agent.yaml"
    path.write_text(yaml.safe_dump(manifest))
    return Engine(load_manifest(path, workspace=ws, catalog=registry), catalog=registry, watchdog=AllowAllWatchdog())


async def test_found_tools_become_callable(tmp_path: Path, registry: ToolRegistry) -> None:
    engine = make_engine(tmp_path, registry)
    session = engine.open_session()
    before = await engine.call(session, "repo_clone", {})
    assert before.refusal == {"layer": "schema", "code": "unknown_tool"}
    env = await engine.call(session, "tool_search", {"query": "clone a git repository"})
    assert env.ok, env.error_text
    assert env.kind == "search"
    ids = [t["id"] for t in env.data["tools"]]
    assert ids[0] == "repo_clone"
    assert set(ids) <= {"repo_clone", "repo_overview", "apply_patch", "lsp_defs", "peek"}
    first = env.data["tools"][0]
    assert first["parameters"] == OBJ and first["kind"] == "other" and first["description"].startswith("Clone")
    assert set(ids) <= session.stores.discovered_tools
    after = await engine.call(session, "repo_clone", {})
    assert after.ok and after.data == {"ran": "repo_clone"}
    # Discovery is per session.
    other = engine.open_session()
    assert (await engine.call(other, "repo_clone", {})).error_code == "unknown_tool"


async def test_locked_and_enabled_tools_are_not_in_the_catalogue(tmp_path: Path, registry: ToolRegistry) -> None:
    engine = make_engine(tmp_path, registry, tools=["tool_search", "apply_patch"])
    session = engine.open_session()
    env = await engine.call(session, "tool_search", {"query": "read write edit bash grep glob web search fetch file patch diff"})
    ids = [t["id"] for t in env.data["tools"]]
    assert "apply_patch" not in ids
    assert not set(ids) & {"read", "write", "edit", "bash", "grep", "glob", "web_fetch", "web_search", "task"}
    assert "peek" in ids  # "file"


async def test_tools_the_manifest_does_not_defer_are_never_found(tmp_path: Path, registry: ToolRegistry) -> None:
    """The catalogue is what the author deferred, not everything registered (TSRCH-1)."""
    engine = make_engine(tmp_path, registry, deferred=["repo_overview"])
    session = engine.open_session()
    env = await engine.call(session, "tool_search", {"query": "clone a git repository file patch"})
    assert [t["id"] for t in env.data["tools"]] == ["repo_overview"]
    assert (await engine.call(session, "repo_clone", {})).error_code == "unknown_tool"
    session.stores.discovered_tools.add("repo_clone")  # even a forged discovery does not enable it
    assert (await engine.call(session, "repo_clone", {})).error_code == "unknown_tool"


async def test_no_match_and_max_results(tmp_path: Path, registry: ToolRegistry) -> None:
    engine = make_engine(tmp_path, registry)
    session = engine.open_session()
    env = await engine.call(session, "tool_search", {"query": "kubernetes"})
    assert env.ok and env.data == {"tools": []} and session.stores.discovered_tools == set()
    env = await engine.call(session, "tool_search", {"query": "repo", "max_results": 1})
    assert [t["id"] for t in env.data["tools"]] == ["repo_clone"]  # equal scores: by id
    assert session.stores.discovered_tools == {"repo_clone"}


async def test_discovered_tool_gains_no_capability(tmp_path: Path, registry: ToolRegistry) -> None:
    engine = make_engine(
        tmp_path, registry, extra_rules=[{"permission": "peek", "pattern": "{workspace}/secret/**", "action": "deny"}]
    )
    (tmp_path / "ws" / "secret").mkdir()
    (tmp_path / "ws" / "secret" / "k").write_text("k")
    outside = tmp_path / "outside.txt"
    outside.write_text("x")
    session = engine.open_session()
    await engine.call(session, "tool_search", {"query": "first bytes of a file"})
    assert "peek" in session.stores.discovered_tools
    ok = await engine.call(session, "peek", {"path": "f.txt"})
    assert ok.ok
    out = await engine.call(session, "peek", {"path": str(outside)})
    assert out.refusal is not None and out.refusal["layer"] == "capability"
    denied = await engine.call(session, "peek", {"path": "secret/k"})
    assert denied.refusal is not None and denied.refusal["code"] == "denied"


def test_bm25_prefers_rarer_terms_and_shorter_docs() -> None:
    docs = [
        ("a", "apple banana"),
        ("b", "apple " + "filler " * 20),
        ("c", "cherry"),
    ]
    ranked = bm25_rank("apple", docs)
    assert [d for d, _ in ranked] == ["a", "b"]
    assert ranked[0][1] > ranked[1][1] > 0
    rare = dict(bm25_rank("apple cherry", docs))
    assert rare["c"] > rare["a"]  # cherry occurs in one doc, apple in two
    assert bm25_rank("", docs) == [] and bm25_rank("x", []) == []


def test_tokenize() -> None:
    assert tokenize("repo_clone: Git-Repo v2.0") == ["repo", "clone", "git", "repo", "v2", "0"]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.from_regex(r"[a-z]{1,6}", fullmatch=True), st.text(alphabet="abc xyz_", max_size=40)), max_size=12, unique_by=lambda t: t[0]),
    st.text(alphabet="abc xyz_", max_size=12),
)
def test_bm25_order_is_total_and_deterministic(docs: list[tuple[str, str]], query: str) -> None:
    ranked = bm25_rank(query, docs)
    assert ranked == bm25_rank(query, list(reversed(docs)))
    keys = [(-s, d) for d, s in ranked]
    assert keys == sorted(keys)
    qt = set(tokenize(query))
    assert {d for d, _ in ranked} == {d for d, text in docs if qt & set(tokenize(text))}
