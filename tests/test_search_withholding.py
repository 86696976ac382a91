"""Search does not reveal what `read` would have to ask about (issue 8, item 9; SPEC PERM-14, WDOG-17).

With an allow-all manifest the default watchdog asks before `read .env`;
`grep` and `glob` must then leave `.env` out (never opening it), say how
many files they withheld (never which, and never depending on content),
and keep showing look-alikes the watchdog does not ask about. A host
watchdog that cannot answer for paths withholds everything.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore.runtime import _marked
from agentcore.watchdog import OPEN_SCREEN, AllowAllWatchdog, ReadScreen, Verdict, WatchdogCall
from agentcore.watchdog.default import DefaultWatchdog
from agentcore.watchdog.default.secrets import SECRET_MARKERS, _is_secret, secret_markers

pytestmark = pytest.mark.anyio

ALLOW_ALL = [{"permission": "*", "pattern": "*", "action": "allow"}]
SECRET_LINE = "TOKEN=sk-live-0123456789"
FILES = {
    ".env": f"{SECRET_LINE}\n",
    "src/app.py": "TOKEN = read_env()\n",
    "src/.env.example": "TOKEN=\n",
    "keys/id_rsa": "TOKEN private\n",
    "keys/Server.PEM": "TOKEN pem\n",
    ".ssh/known_hosts": "TOKEN host\n",
    "cfg/.aws/credentials": "TOKEN aws\n",
    "cfg/.aws/config": "TOKEN region\n",
}
WITHHELD = {".env", "keys/id_rsa", "keys/Server.PEM", ".ssh/known_hosts", "cfg/.aws/credentials"}
SHOWN = set(FILES) - WITHHELD
ROUTES = {
    "tree": {},  # one walk for the whole tree, with the marked names listed alongside
    "listed": {"rules": ALLOW_ALL + [{"permission": "read", "pattern": "{workspace}/nothing/**", "action": "deny"}]},
}


def _agent(make_agent: Callable[..., Any], ws: Path, *, rules: list[dict[str, str]] = ALLOW_ALL, watchdog: Any = "default", **kw: Any) -> Any:
    return make_agent(ws, tools=["read", "glob", "grep"], rules=rules, engine_kwargs={"watchdog": watchdog}, **kw)


def _meta(env: Any) -> dict[str, Any]:
    wire = env.to_dict()
    assert env.type == "output", wire
    return wire["metadata"]


@pytest.mark.parametrize("route", list(ROUTES))
async def test_grep_leaves_out_what_read_would_ask_about_and_counts_it(make_agent: Callable[..., Any], make_workspace: Callable[..., Path], route: str) -> None:
    ws = make_workspace("ws", FILES)
    agent = _agent(make_agent, ws, **ROUTES[route])
    # The premise: reading .env is put to a human by the watchdog's secrets category (headless: refused).
    read = await agent.call("read", {"path": ".env"})
    assert read.refusal == {"layer": "ask", "code": "headless", "asked_by": "watchdog"}
    env = await agent.call("grep", {"pattern": "TOKEN"})
    assert SECRET_LINE not in str(env.to_dict())
    assert {m["path"] for m in env.data["matches"]} == {f"{ws}/{rel}" for rel in SHOWN}
    assert env.data["total"] == len(SHOWN) and _meta(env)["withheld"] == len(WITHHELD)
    # Control: with the secrets category off the same search shows every file, and withholds nothing.
    plain = _agent(make_agent, ws, watchdog=DefaultWatchdog(["secrets"]), **ROUTES[route])
    env = await plain.call("grep", {"pattern": "TOKEN"})
    assert any(m["text"] == SECRET_LINE for m in env.data["matches"]) and "withheld" not in _meta(env)


@pytest.mark.parametrize("route", list(ROUTES))
async def test_the_count_does_not_depend_on_what_withheld_files_contain(make_agent: Callable[..., Any], make_workspace: Callable[..., Path], route: str) -> None:
    ws = make_workspace("ws", FILES)
    agent = _agent(make_agent, ws, **ROUTES[route])
    for pattern in ("sk-live-0123456789", "sk-live-9", "no-such-text-anywhere"):  # matches .env only / nothing
        env = await agent.call("grep", {"pattern": pattern})
        assert env.data == {"matches": [], "total": 0} and _meta(env)["withheld"] == len(WITHHELD)
    # With a `glob` filter the count is among the files the filter selects.
    env = await agent.call("grep", {"pattern": "TOKEN", "glob": "keys/*"})
    assert env.data["total"] == 0 and _meta(env)["withheld"] == 2
    env = await agent.call("grep", {"pattern": "TOKEN", "glob": "src/*"})
    assert env.data["total"] == 2 and "withheld" not in _meta(env)


@pytest.mark.parametrize("route", list(ROUTES))
async def test_a_withheld_file_is_never_opened(make_agent: Callable[..., Any], make_workspace: Callable[..., Path], route: str) -> None:
    ws = make_workspace("ws", FILES)
    stamps = {}
    for rel in (".env", "src/.env.example"):
        st = os.stat(ws / rel)
        os.utime(ws / rel, ns=(st.st_mtime_ns - 10**12, st.st_mtime_ns))  # atime before mtime: the next read moves it
        stamps[rel] = os.stat(ws / rel).st_atime_ns
    agent = _agent(make_agent, ws, **ROUTES[route])
    env = await agent.call("grep", {"pattern": "TOKEN"})
    assert _meta(env)["withheld"] == len(WITHHELD)
    assert os.stat(ws / ".env").st_atime_ns == stamps[".env"]
    # Control: the look-alike next to it was searched, and reading moved its access time.
    assert os.stat(ws / "src/.env.example").st_atime_ns != stamps["src/.env.example"]


@pytest.mark.parametrize("route", list(ROUTES))
async def test_glob_counts_withheld_files_among_those_matching(make_agent: Callable[..., Any], make_workspace: Callable[..., Path], route: str) -> None:
    ws = make_workspace("ws", FILES)
    agent = _agent(make_agent, ws, **ROUTES[route])
    env = await agent.call("glob", {"pattern": "**"})
    assert set(env.data["paths"]) == {f"{ws}/{rel}" for rel in SHOWN} and _meta(env)["withheld"] == len(WITHHELD)
    env = await agent.call("glob", {"pattern": "**/*.py"})
    assert env.data["paths"] == [f"{ws}/src/app.py"] and "withheld" not in _meta(env)
    env = await agent.call("glob", {"pattern": "**/.env*"})
    assert env.data["paths"] == [f"{ws}/src/.env.example"] and _meta(env)["withheld"] == 1


async def test_case_and_unicode_spellings_are_withheld_too(make_agent: Callable[..., Any], make_workspace: Callable[..., Path]) -> None:
    ws = make_workspace("ws", {".ENV": "TOKEN\n", "a/.\u212aube/config": "TOKEN\n", "a/ok.txt": "TOKEN\n", "a/\u00e9t\u00e9.txt": "TOKEN\n"})
    assert _is_secret(f"{ws}/a/.\u212aube/config")  # the Kelvin sign lower-cases to `k`
    kelvin = ws / "a/.\u212aube/config"
    st = os.stat(kelvin)
    os.utime(kelvin, ns=(st.st_mtime_ns - 10**12, st.st_mtime_ns))
    before = os.stat(kelvin).st_atime_ns
    agent = _agent(make_agent, ws)
    env = await agent.call("grep", {"pattern": "TOKEN"})
    assert {m["path"] for m in env.data["matches"]} == {f"{ws}/a/ok.txt", f"{ws}/a/\u00e9t\u00e9.txt"} and _meta(env)["withheld"] == 2
    assert os.stat(kelvin).st_atime_ns == before  # rg's own case folding is ASCII-only: the walk still left it out
    env = await agent.call("glob", {"pattern": "**"})
    assert set(env.data["paths"]) == {f"{ws}/a/ok.txt", f"{ws}/a/\u00e9t\u00e9.txt"} and _meta(env)["withheld"] == 2


async def test_rules_hiding_is_counted_but_paths_outside_fs_read_are_not(make_agent: Callable[..., Any], make_workspace: Callable[..., Path]) -> None:
    ws = make_workspace("ws", {"pub/a.txt": "x\n", "pub/hidden.txt": "x\n", "priv/b.txt": "x\n"})
    rules = ALLOW_ALL + [{"permission": "read", "pattern": "{workspace}/pub/hidden.txt", "action": "deny"}]
    agent = _agent(make_agent, ws, rules=rules, read=["{workspace}/pub/**"], watchdog="allow")
    env = await agent.call("glob", {"pattern": "**", "path": "."})  # the root is an ancestor of fs.read (CAP-9)
    assert env.data["paths"] == [f"{ws}/pub/a.txt"] and _meta(env)["withheld"] == 1  # priv/ is not there at all
    env = await agent.call("grep", {"pattern": "x", "path": "."})
    assert [m["path"] for m in env.data["matches"]] == [f"{ws}/pub/a.txt"] and _meta(env)["withheld"] == 1


class _NoScreen:
    """A host watchdog from before WDOG-17: it reviews calls but cannot answer for paths."""

    async def review(self, call: WatchdogCall) -> Verdict:
        return Verdict.allow()


class _BrokenScreen(_NoScreen):
    def read_screen(self, manifest: Any) -> ReadScreen:
        raise RuntimeError("no")


class _PartlyBroken(_NoScreen):
    def read_screen(self, manifest: Any) -> ReadScreen:
        def withholds(path: str) -> bool:
            if path.endswith("boom.txt"):
                raise RuntimeError("cannot tell")
            return False

        return ReadScreen(withholds, lambda root: ("boom",))


@pytest.mark.parametrize("watchdog", [_NoScreen(), _BrokenScreen()], ids=["none", "raises"])
async def test_a_watchdog_that_cannot_answer_for_paths_withholds_everything(make_agent: Callable[..., Any], make_workspace: Callable[..., Path], watchdog: Any) -> None:
    ws = make_workspace("ws", {"a.txt": "x\n", "b/c.txt": "x\n"})
    agent = _agent(make_agent, ws, watchdog=watchdog)
    for tool, args in (("glob", {"pattern": "**"}), ("grep", {"pattern": "x"})):
        env = await agent.call(tool, args)
        assert env.data["total"] == 0 and _meta(env)["withheld"] == 2
    # Control: the watchdog that is switched off answers, and withholds nothing.
    env = await _agent(make_agent, ws, watchdog=AllowAllWatchdog()).call("grep", {"pattern": "x"})
    assert env.data["total"] == 2 and "withheld" not in _meta(env)


async def test_a_screen_that_fails_for_one_path_withholds_that_path(make_agent: Callable[..., Any], make_workspace: Callable[..., Path]) -> None:
    ws = make_workspace("ws", {"a.txt": "x\n", "boom.txt": "x\n"})
    env = await _agent(make_agent, ws, watchdog=_PartlyBroken()).call("grep", {"pattern": "x"})
    assert [m["path"] for m in env.data["matches"]] == [f"{ws}/a.txt"] and _meta(env)["withheld"] == 1


# -- the default watchdog's screen agrees with its review ---------------------------------------------

_PARTS = st.sampled_from(
    ["src", "a", ".env", ".env.local", ".env.example", ".ENV.Sample", "x.pem", "y.KEY", "id_rsa.pub", "id_ed25519", ".ssh", ".gnupg",
     ".aws", "credentials", "config", ".kube", ".docker", "config.json", ".config", "gh", "hosts.yml", ".netrc", "_netrc", ".npmrc",
     "valid_rsa", "\u212aey", ".\u212aube", "env", "pem", ".envrc", "key.txt"]
)


@settings(max_examples=400, deadline=None)
@given(root_parts=st.lists(_PARTS, max_size=3), rel_parts=st.lists(_PARTS, min_size=1, max_size=4))
async def test_default_screen_agrees_with_review_and_keeps_its_marker_promise(root_parts: list[str], rel_parts: list[str]) -> None:
    root = "/" + "/".join(["srv", *root_parts])
    path = root + "/" + "/".join(rel_parts)
    dog = DefaultWatchdog()
    screen = dog.read_screen(None)
    verdict = await dog.review(WatchdogCall(tool="read", args={"path": path}, manifest=None, session_id="s", paths={"path": Path(path)}))  # type: ignore[arg-type]
    assert screen.withholds(path) == (verdict.action != "allow")
    markers = screen.markers(root)
    if screen.withholds(path) and markers is not None:
        rel = "/".join(rel_parts)
        assert any(m in rel.lower() for m in markers), (root, rel)
        assert _marked([rel], markers) == [0] and _marked([rel.encode()], markers) == [0]
    assert DefaultWatchdog(["secrets"]).read_screen(None) is OPEN_SCREEN


def test_markers_cover_every_secret_rule() -> None:
    assert secret_markers("/home/u/project") == SECRET_MARKERS
    assert secret_markers("/home/u/.ssh") is None and secret_markers("/home/u/.GnuPG/x") is None
    assert secret_markers("/x/.AWS") == SECRET_MARKERS + ("credentials",)
    assert secret_markers("/home/u/my.environment/ws") == SECRET_MARKERS  # a marker inside a name is no reason to ask about all
    assert _marked([b"a/b.py", b"x/.env", b"c/d.PEM", b".ssh/k", b"fine.txt"], SECRET_MARKERS) == [1, 2, 3]
