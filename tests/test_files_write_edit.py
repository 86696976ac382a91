"""`write` and `edit` through the pipeline (FILE-5 to FILE-10, TRUNC-8)."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

OLD_MTIME_NS = 1_000_000_000 * 1_500_000_000  # 2017: any rewrite would move it


def temp_leftovers(root: Path) -> list[str]:
    return [os.fspath(p) for p in root.rglob("*") if ".agentcore-" in p.name or p.name.endswith(".tmp")]


def fingerprint(p: Path) -> tuple[bytes, int, int, int]:
    st = os.stat(p)
    return p.read_bytes(), st.st_mtime_ns, st.st_ino, stat.S_IMODE(st.st_mode)


# -- write ------------------------------------------------------------------------------


async def test_write_creates_and_overwrites_atomically(workspace: Path, make_agent: Callable[..., Any]) -> None:
    agent = make_agent(workspace)
    env = await agent.call("write", {"path": "new.txt", "content": "héllo\n"})
    assert env.ok and env.data == {"path": os.fspath(workspace / "new.txt"), "bytes_written": 7, "created": True}
    assert (workspace / "new.txt").read_bytes() == "héllo\n".encode()
    old_ino = os.stat(workspace / "new.txt").st_ino
    with open(workspace / "new.txt", "rb") as reader:  # a reader of the old file keeps the old content
        env = await agent.call("write", {"path": os.fspath(workspace / "new.txt"), "content": "second"})
        assert env.ok and env.data["created"] is False and env.data["bytes_written"] == 6
        assert reader.read() == "héllo\n".encode()
    assert (workspace / "new.txt").read_text() == "second"
    assert os.stat(workspace / "new.txt").st_ino != old_ino  # replaced by rename, not rewritten in place
    assert temp_leftovers(workspace) == []


@pytest.mark.parametrize("content", ["", "no newline", "crlf\r\nkept\r\n", "tabs\tand\x0bcontrol", "😀" * 100])
async def test_write_is_verbatim(workspace: Path, make_agent: Callable[..., Any], content: str) -> None:
    agent = make_agent(workspace)
    env = await agent.call("write", {"path": "v.txt", "content": content})
    assert env.ok and env.data["bytes_written"] == len(content.encode())
    assert (workspace / "v.txt").read_bytes() == content.encode()


@pytest.mark.parametrize("mode", [0o751, 0o600, 0o644, 0o400])
async def test_write_keeps_mode_of_existing_file(workspace: Path, make_agent: Callable[..., Any], mode: int) -> None:
    target = workspace / "script.sh"
    target.write_text("#!/bin/sh\n")
    os.chmod(target, mode)
    agent = make_agent(workspace)
    assert (await agent.call("write", {"path": "script.sh", "content": "#!/bin/sh\necho hi\n"})).ok
    assert stat.S_IMODE(os.stat(target).st_mode) == mode
    assert (await agent.call("edit", {"path": "script.sh", "old_string": "hi", "new_string": "ho"})).ok
    assert stat.S_IMODE(os.stat(target).st_mode) == mode
    assert target.read_text() == "#!/bin/sh\necho ho\n"


async def test_new_file_mode_follows_umask(workspace: Path, make_agent: Callable[..., Any]) -> None:
    agent = make_agent(workspace)
    old = os.umask(0o027)
    try:
        assert (await agent.call("write", {"path": "u.txt", "content": "x"})).ok
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(workspace / "u.txt").st_mode) == 0o640


async def test_write_creates_parents_inside_write_scope(workspace: Path, make_agent: Callable[..., Any]) -> None:
    agent = make_agent(workspace)
    env = await agent.call("write", {"path": "a/b/c/d.txt", "content": "deep"})
    assert env.ok and (workspace / "a" / "b" / "c" / "d.txt").read_text() == "deep"


@pytest.mark.parametrize(
    ("write_scope", "target", "code", "must_not_exist"),
    [
        (["{workspace}/out/**"], "x/y.txt", "out_of_scope", "x"),
        (["{workspace}/out/*.txt"], "out/sub/a.txt", "out_of_scope", "out"),
        (["{workspace}/out/*.txt"], "out/a.txt", "out_of_scope", "out"),  # `out` itself is not in fs.write
        (["{workspace}/**/*.txt"], "newdir/a.txt", "out_of_scope", "newdir"),  # the directory itself is not in fs.write
        (["{workspace}/a.txt", "{workspace}/d/**"], "d/e/.git/hooks/pre-push", "protected", "d"),
        (["{workspace}/**"], "sub/.vscode/tasks.json", "protected", "sub"),
    ],
)
async def test_missing_parents_must_each_be_writable(
    workspace: Path, make_agent: Callable[..., Any], write_scope: list[str], target: str, code: str, must_not_exist: str
) -> None:
    agent = make_agent(workspace, write=write_scope)
    env = await agent.call("write", {"path": target, "content": "x"})
    assert env.refusal is not None and env.refusal["layer"] == "capability" and env.refusal["code"] == code, env.to_dict()
    assert not (workspace / must_not_exist).exists()


async def test_write_to_directory_and_too_large(workspace: Path, make_agent: Callable[..., Any]) -> None:
    (workspace / "d").mkdir()
    agent = make_agent(workspace, limits={"text_bytes": 10})
    env = await agent.call("write", {"path": "d", "content": "x"})
    assert env.error_code == "is_directory" and (workspace / "d").is_dir()
    env = await agent.call("write", {"path": "big.txt", "content": "x" * 11})
    assert env.refusal == {"layer": "limit", "code": "too_large"}
    assert not (workspace / "big.txt").exists()
    assert (await agent.call("write", {"path": "ok.txt", "content": "x" * 10})).ok
    assert temp_leftovers(workspace) == []


# -- edit -------------------------------------------------------------------------------


@pytest.fixture
def src(workspace: Path) -> Path:
    p = workspace / "code.py"
    p.write_text("def f():\n    return 1\n\ndef g():\n    return 1\n")
    os.utime(p, ns=(OLD_MTIME_NS, OLD_MTIME_NS))
    return p


async def test_edit_single_and_replace_all(src: Path, workspace: Path, make_agent: Callable[..., Any]) -> None:
    agent = make_agent(workspace)
    env = await agent.call("edit", {"path": "code.py", "old_string": "def g():\n    return 1", "new_string": "def g():\n    return 2"})
    assert env.ok and env.data == {"path": os.fspath(src), "replacements": 1}
    assert src.read_text() == "def f():\n    return 1\n\ndef g():\n    return 2\n"
    env = await agent.call("edit", {"path": "code.py", "old_string": "return", "new_string": "yield", "replace_all": True})
    assert env.ok and env.data["replacements"] == 2
    assert src.read_text().count("yield") == 2 and "return" not in src.read_text()
    env = await agent.call("edit", {"path": "code.py", "old_string": "aa", "new_string": "b", "replace_all": True})
    assert env.error_code == "no_match"
    src.write_text("aaaa")
    env = await agent.call("edit", {"path": "code.py", "old_string": "aa", "new_string": "b", "replace_all": True})
    assert env.data["replacements"] == 2 and src.read_text() == "bb"  # non-overlapping, left to right
    assert temp_leftovers(workspace) == []


@pytest.mark.parametrize(
    ("args", "code"),
    [
        ({"old_string": "nothing like this", "new_string": "x"}, "no_match"),
        ({"old_string": "return 1", "new_string": "return 2"}, "ambiguous"),
        ({"old_string": "return 1", "new_string": "return 2", "replace_all": False}, "ambiguous"),
        ({"old_string": "def f", "new_string": "def f"}, "no_change"),
        ({"old_string": "return 1", "new_string": "return 1", "replace_all": True}, "no_change"),
        ({"old_string": "RETURN 1", "new_string": "x"}, "no_match"),  # exact, case-sensitive
        ({"old_string": "def f():\r\n", "new_string": "x"}, "no_match"),  # no newline normalisation
    ],
)
async def test_edit_conflicts_leave_file_untouched(src: Path, workspace: Path, make_agent: Callable[..., Any], args: dict[str, Any], code: str) -> None:
    before = fingerprint(src)
    env = await make_agent(workspace).call("edit", {"path": "code.py", **args})
    assert env.type == "error" and env.error_code == code, env.to_dict()
    assert fingerprint(src) == before
    assert temp_leftovers(workspace) == []


async def test_edit_missing_binary_and_too_large(workspace: Path, make_agent: Callable[..., Any]) -> None:
    agent = make_agent(workspace, limits={"text_bytes": 50})
    assert (await agent.call("edit", {"path": "missing.py", "old_string": "a", "new_string": "b"})).error_code == "not_found"
    assert not (workspace / "missing.py").exists()
    for name, data in (("bin.dat", b"abc\x00abc"), ("latin.txt", b"caf\xe9 abc")):
        (workspace / name).write_bytes(data)
        os.utime(workspace / name, ns=(OLD_MTIME_NS, OLD_MTIME_NS))
        before = fingerprint(workspace / name)
        env = await agent.call("edit", {"path": name, "old_string": "abc", "new_string": "x"})
        assert env.error_code == "binary"
        assert fingerprint(workspace / name) == before
    (workspace / "big.txt").write_text("a" * 60)
    env = await agent.call("edit", {"path": "big.txt", "old_string": "a", "new_string": "b", "replace_all": True})
    assert env.refusal == {"layer": "limit", "code": "too_large"}
    (workspace / "grow.txt").write_text("a" * 40)
    os.utime(workspace / "grow.txt", ns=(OLD_MTIME_NS, OLD_MTIME_NS))
    before = fingerprint(workspace / "grow.txt")
    env = await agent.call("edit", {"path": "grow.txt", "old_string": "a", "new_string": "aa", "replace_all": True})
    assert env.refusal == {"layer": "limit", "code": "too_large"}
    assert fingerprint(workspace / "grow.txt") == before
    (workspace / "dir").mkdir()
    assert (await agent.call("edit", {"path": "dir", "old_string": "a", "new_string": "b"})).error_code == "is_directory"


async def test_edit_needs_both_scopes(src: Path, workspace: Path, make_agent: Callable[..., Any]) -> None:
    before = fingerprint(src)
    read_only = make_agent(workspace, read=["{workspace}/**"], write=[])
    env = await read_only.call("edit", {"path": "code.py", "old_string": "def f", "new_string": "def h"})
    assert env.refusal is not None and env.refusal["layer"] == "capability"
    write_only = make_agent(workspace, read=[], write=["{workspace}/**"])
    env = await write_only.call("edit", {"path": "code.py", "old_string": "def f", "new_string": "def h"})
    assert env.refusal is not None and env.refusal["layer"] == "capability"
    assert fingerprint(src) == before


async def test_edit_sees_current_content_without_prior_read(src: Path, workspace: Path, make_agent: Callable[..., Any]) -> None:
    agent = make_agent(workspace)
    src.write_text("changed outside\n")
    env = await agent.call("edit", {"path": "code.py", "old_string": "outside", "new_string": "inside"})
    assert env.ok and src.read_text() == "changed inside\n"


def test_an_always_answer_for_a_path_spelled_like_a_variable_names_that_path_only(tmp_path: Path) -> None:
    """ASK-3: the remembered rule is the answered path, literally; `{workspace}` in a file name is not expanded."""
    import anyio

    from agentcore.api import AllowAllWatchdog, Engine, ScriptedBroker, compile_manifest

    ws = Path(os.path.realpath(tmp_path)) / "ws"
    (ws / "{workspace}").mkdir(parents=True)
    expanded_twin = Path(f"{ws}/{ws}".replace("//", "/")) / "a.txt"  # what the rule named when `{workspace}` expanded
    expanded_twin.parent.mkdir(parents=True)
    m = compile_manifest({"name": "b", "tools": ["write"], "requires": {"fs": {"write": ["{workspace}/**"]}}}, workspace=ws)
    broker = ScriptedBroker(["allow_always", "reject_once", "reject_once"])
    engine = Engine(m, broker=broker, watchdog=AllowAllWatchdog())

    async def go() -> list[str]:
        with engine.open_session() as s:
            out = [(await engine.call(s, "write", {"path": "{workspace}/a.txt", "content": "x"})).type]
            out.append((await engine.call(s, "write", {"path": "{workspace}/a.txt", "content": "y"})).type)  # remembered
            out.append((await engine.call(s, "write", {"path": os.fspath(expanded_twin), "content": "z"})).type)  # never answered
            return out

    assert anyio.run(go) == ["output", "output", "error"]
    assert (ws / "{workspace}" / "a.txt").read_text() == "y" and not expanded_twin.exists()
    assert len(broker.requests) == 2
