"""web_search through the real pipeline against loopback JSON search providers."""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore.api import Engine, load_manifest
from agentcore.errors import CompileError, ToolFailure
from agentcore.tools.web_search import Provider, choose_provider, parse_results
from agentcore.watchdog import AllowAllWatchdog

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


class Provider_:
    """A loopback provider speaking the generic protocol; `reply` builds the body from (q, limit)."""

    def __init__(self, reply: Callable[[str, int], tuple[int, bytes]]) -> None:
        self.queries: list[tuple[str, int]] = []
        self.release = threading.Event()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                qs = parse_qs(urlsplit(self.path).query)
                q, limit = qs.get("q", [""])[0], int(qs.get("limit", ["0"])[0])
                outer.queries.append((q, limit))
                status, body = reply(q, limit)
                if status == 0:  # hang until the test releases us
                    outer.release.wait(30)
                    status = 200
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/search"

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def results_reply(tag: str, n: int = 30) -> Callable[[str, int], tuple[int, bytes]]:
    def reply(q: str, limit: int) -> tuple[int, bytes]:
        items = [{"title": f"{tag} {q} #{i}", "url": f"https://example.com/{tag}/{i}", "snippet": f"s{i}"} for i in range(n)]
        return 200, json.dumps({"results": items}).encode()

    return reply


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def providers() -> Iterator[list[Provider_]]:
    made: list[Provider_] = []
    yield made
    for p in made:
        p.close()


def start(providers: list[Provider_], reply: Callable[[str, int], tuple[int, bytes]]) -> Provider_:
    p = Provider_(reply)
    providers.append(p)
    return p


def make_engine(tmp_path: Path, urls: list[str], *, rules: list[dict[str, str]] | None = None, limits: dict[str, Any] | None = None) -> Engine:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    manifest = {
        "name": "searcher",
        "tools": ["web_search"],
        "rules": rules if rules is not None else [{"permission": "web_search", "pattern": "*", "action": "allow"}],
        "limits": limits or {},
        "web_search": {"providers": [{"name": f"p{i}", "url": u} for i, u in enumerate(urls)]},
        "environment": "none",
    }
    path = tmp_path / "agent.yaml"
    path.write_text(yaml.safe_dump(manifest))
    return Engine(load_manifest(path, workspace=ws), watchdog=AllowAllWatchdog())


def expected_index(session_dir: str, n: int) -> int:
    return int.from_bytes(hashlib.sha256(session_dir.encode()).digest(), "big") % n


async def test_search_returns_validated_results(tmp_path: Path, providers: list[Provider_]) -> None:
    p = start(providers, results_reply("a"))
    engine = make_engine(tmp_path, [p.url])
    env = await engine.call(engine.open_session(), "web_search", {"query": "rust async", "max_results": 3})
    assert env.ok, env.error_text
    assert env.kind == "fetch"
    assert env.data == {
        "results": [{"title": f"a rust async #{i}", "url": f"https://example.com/a/{i}", "snippet": f"s{i}"} for i in range(3)]
    }
    assert p.queries == [("rust async", 3)]
    assert env.extra == {"provider": "p0"}


async def test_default_max_results_is_five(tmp_path: Path, providers: list[Provider_]) -> None:
    p = start(providers, results_reply("a"))
    engine = make_engine(tmp_path, [p.url])
    env = await engine.call(engine.open_session(), "web_search", {"query": "x"})
    assert env.ok and len(env.data["results"]) == 5 and p.queries == [("x", 5)]


async def test_requirements_extend_net_hosts(tmp_path: Path, providers: list[Provider_]) -> None:
    p = start(providers, results_reply("a"))
    engine = make_engine(tmp_path, [p.url])
    # The manifest lists no hosts; enabling the tool added the provider's.
    assert [h.raw for h in engine.manifest.effective.net_hosts] == [f"127.0.0.1:{p.port}"]


async def test_provider_is_stable_per_session(tmp_path: Path, providers: list[Provider_]) -> None:
    a = start(providers, results_reply("a"))
    b = start(providers, results_reply("b"))
    engine = make_engine(tmp_path, [a.url, b.url])
    for _ in range(6):
        session = engine.open_session()
        names = set()
        for _ in range(3):
            env = await engine.call(session, "web_search", {"query": "q", "max_results": 1})
            assert env.ok, env.error_text
            names.add(env.extra["provider"])
        assert names == {f"p{expected_index(str(session.workdir), 2)}"}
        session.close()
    assert len(a.queries) + len(b.queries) == 18


async def test_no_provider(tmp_path: Path) -> None:
    engine = make_engine(tmp_path, [])
    env = await engine.call(engine.open_session(), "web_search", {"query": "x"})
    assert env.type == "error" and env.error_code == "no_provider"


async def test_quota_per_session(tmp_path: Path, providers: list[Provider_]) -> None:
    p = start(providers, results_reply("a"))
    engine = make_engine(tmp_path, [p.url], limits={"web_search_calls": 2})
    s1 = engine.open_session()
    for _ in range(2):
        assert (await engine.call(s1, "web_search", {"query": "x"})).ok
    env = await engine.call(s1, "web_search", {"query": "x"})
    assert env.type == "error" and env.error_code == "quota_exceeded"
    assert len(p.queries) == 2
    # A new session has its own budget; a child session shares its parent's.
    s2 = engine.open_session()
    assert (await engine.call(s2, "web_search", {"query": "x"})).ok
    child = engine.open_session(parent=s2)
    assert (await engine.call(child, "web_search", {"query": "x"})).ok
    assert (await engine.call(s2, "web_search", {"query": "x"})).error_code == "quota_exceeded"
    assert s2.stores.web_search_calls == 2 and child.stores.web_search_calls == 1


async def test_zero_quota_refuses_every_call(tmp_path: Path, providers: list[Provider_]) -> None:
    p = start(providers, results_reply("a"))
    engine = make_engine(tmp_path, [p.url], limits={"web_search_calls": 0})
    env = await engine.call(engine.open_session(), "web_search", {"query": "x"})
    assert env.error_code == "quota_exceeded" and p.queries == []


async def test_timeout(tmp_path: Path, providers: list[Provider_]) -> None:
    p = start(providers, lambda q, n: (0, b'{"results": []}'))
    engine = make_engine(tmp_path, [p.url], limits={"web_search_timeout_s": 0.3})
    session = engine.open_session()
    env = await engine.call(session, "web_search", {"query": "slow"})
    p.release.set()
    assert env.type == "error" and env.error_code == "timeout"
    assert session.stores.web_search_calls == 1  # a timed-out call still counts


@pytest.mark.parametrize(
    "status,body",
    [(500, b'{"results": []}'), (200, b"not json"), (200, b'{"items": []}'), (200, b'[1, 2]'), (200, b'{"results": {"a": 1}}')],
)
async def test_bad_provider_answers(tmp_path: Path, providers: list[Provider_], status: int, body: bytes) -> None:
    p = start(providers, lambda q, n: (status, body))
    engine = make_engine(tmp_path, [p.url])
    env = await engine.call(engine.open_session(), "web_search", {"query": "x"})
    assert env.type == "error" and env.error_code == "provider_error"


async def test_invalid_items_are_dropped(tmp_path: Path, providers: list[Provider_]) -> None:
    items = [
        {"title": "ok", "url": "https://a.example/1"},
        {"title": 3, "url": "https://a.example/2", "snippet": "x"},
        {"title": "js", "url": "javascript:alert(1)", "snippet": "x"},
        "nope",
        {"title": "ok2", "url": "http://b.example/", "snippet": "y" * 5000},
    ]
    p = start(providers, lambda q, n: (200, json.dumps({"results": items}).encode()))
    engine = make_engine(tmp_path, [p.url])
    env = await engine.call(engine.open_session(), "web_search", {"query": "x"})
    assert env.ok
    assert [r["title"] for r in env.data["results"]] == ["ok", "ok2"]
    assert env.data["results"][0]["snippet"] == ""
    assert len(env.data["results"][1]["snippet"]) == 2000


async def test_deny_rule_on_provider_host(tmp_path: Path, providers: list[Provider_]) -> None:
    p = start(providers, results_reply("a"))
    rules = [
        {"permission": "web_search", "pattern": "*", "action": "allow"},
        {"permission": "net.fetch", "pattern": f"127.0.0.1:{p.port}", "action": "deny"},
    ]
    engine = make_engine(tmp_path, [p.url], rules=rules)
    env = await engine.call(engine.open_session(), "web_search", {"query": "x"})
    assert env.type == "error" and env.refusal is not None
    assert env.refusal["layer"] == "permission" and env.refusal["code"] == "denied"
    assert p.queries == []


async def test_bad_provider_url_is_a_compile_error(tmp_path: Path) -> None:
    with pytest.raises(CompileError):
        make_engine(tmp_path, ["ftp://search.example/"])
    with pytest.raises(CompileError):
        make_engine(tmp_path, ["https://user@search.example/"])


async def test_query_is_url_encoded_not_injected(tmp_path: Path, providers: list[Provider_]) -> None:
    p = start(providers, results_reply("a", n=1))
    engine = make_engine(tmp_path, [p.url])
    env = await engine.call(engine.open_session(), "web_search", {"query": "a&limit=99#x y/ü"})
    assert env.ok, env.error_text
    assert p.queries == [("a&limit=99#x y/ü", 5)]


async def test_the_longest_query_reaches_the_provider_whatever_its_script(tmp_path: Path, providers: list[Provider_]) -> None:
    # SRCH-4 accepts 2,000 characters; percent-encoded, 2,000 four-byte characters are 24,000 in the URL.
    p = start(providers, results_reply("a", n=1))
    engine = make_engine(tmp_path, [p.url])
    with engine.open_session() as session:
        for query in ("\U0001f600" * 2000, "検" * 2000, "a" * 2000):
            env = await engine.call(session, "web_search", {"query": query})
            assert env.ok, env.error_text
        refused = await engine.call(session, "web_search", {"query": "検" * 2001})
    assert [q for q, _ in p.queries] == ["\U0001f600" * 2000, "検" * 2000, "a" * 2000]
    assert refused.error_code == "invalid_arguments" and len(p.queries) == 3


def test_choice_is_deterministic_and_in_range() -> None:
    provs = [Provider(f"p{i}", f"https://h{i}.example/", f"h{i}.example:443") for i in range(3)]
    assert choose_provider([], "x") is None
    for key in ("a", "b", "/tmp/agentcore-ses_1"):
        assert choose_provider(provs, key) == provs[expected_index(key, 3)]


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20), lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4), max_leaves=20))
def test_parse_results_never_crashes(value: Any) -> None:
    for body in (value, {"results": value}, {"results": [value]}):
        try:
            out = parse_results(json.dumps(body), 5)
        except ToolFailure as exc:
            assert exc.code == "provider_error"
            continue
        assert len(out) <= 5
        for item in out:
            assert set(item) == {"title", "url", "snippet"} and all(isinstance(v, str) for v in item.values())
            assert item["url"].lower().startswith(("http://", "https://"))


async def test_accesses_name_the_chosen_provider_when_the_manifest_is_available(tmp_path: Path, providers: list[Provider_]) -> None:
    """The path used once CallContext carries the manifest: the provider is a NetAccess the pipeline checks."""
    from types import SimpleNamespace

    from agentcore.access import NetAccess
    from agentcore.pipeline.capability import check_capabilities
    from agentcore.tools.web_search import WebSearchTool

    a = start(providers, results_reply("a"))
    b = start(providers, results_reply("b"))
    engine = make_engine(tmp_path, [a.url, b.url])
    tool = WebSearchTool()
    for key in ("/tmp/s1", "/tmp/s2", "/tmp/s3"):
        ctx = SimpleNamespace(workspace="", session_dir=key, manifest=engine.manifest)
        (access,) = tool.accesses({"query": "x"}, ctx)  # type: ignore[arg-type]
        assert access == NetAccess("provider", [a.url, b.url][expected_index(key, 2)])
        cap = check_capabilities([access], "web_search", engine.manifest, session_dir=tmp_path)
        assert cap.subjects[0].capability == "net.fetch"
    with pytest.raises(ToolFailure):  # no manifest: nothing can be proven, so nothing runs
        tool.accesses({"query": "x"}, SimpleNamespace(workspace="", session_dir="/s"))  # type: ignore[arg-type]
    empty = make_engine(tmp_path, [])
    assert tool.accesses({"query": "x"}, SimpleNamespace(workspace="", session_dir="/s", manifest=empty.manifest)) == []  # type: ignore[arg-type]
