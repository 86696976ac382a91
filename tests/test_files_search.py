"""`glob` and `grep` through the pipeline with the bundled rg (FILE-11 to FILE-16, PERM-14, TRUNC)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

SECRET = "OUTSIDE-SECRET-needle"
ALLOW = {"permission": "*", "pattern": "*", "action": "allow"}


@pytest.fixture
def tree(workspace: Path, make_workspace: Callable[..., Path]) -> dict[str, Path]:
    files = {
        "a.py": "import os\nneedle = 1\n",
        "b.txt": "Needle upper\nneedle lower\n",
        ".hidden": "needle hidden\n",
        ".config/settings.ini": "needle=1\n",
        "src/m.py": "def needle():\n    pass\n",
        "src/deep/x.py": "# needle\n",
        "foo/bar.txt": "needle in foo\n",
        "foo-x.txt": "needle dash\n",
        "foo.txt": "needle dot\n",
        ".git/HEAD": "ref: needle\n",
        "sub/.git/config": "needle\n",
        ".env": "API_KEY=needle-secret\n",
        "secret/plan.md": "needle plan\n",
        ".gitignore": "ignored.txt\n",
        "ignored.txt": "needle ignored-but-listed\n",
        "bin.dat": b"needle\x00binary\n",
    }
    for rel, content in files.items():
        p = workspace / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content)
    out = make_workspace("outside", {"secret.txt": SECRET + "\n", "dir/inner.txt": SECRET + "\n"})
    os.symlink(out / "secret.txt", workspace / "link_file.txt")
    os.symlink(out / "dir", workspace / "link_dir")
    os.symlink("a.py", workspace / "link_inside.py")
    os.mkfifo(workspace / "pipe.txt")
    return {"ws": workspace, "out": out}


def rel(ws: Path, paths: list[str]) -> list[str]:
    return [os.path.relpath(p, ws) for p in paths]


def byte_sorted(xs: list[str]) -> list[str]:
    return sorted(xs, key=lambda s: s.encode("utf-8", "surrogateescape"))


# -- glob -------------------------------------------------------------------------------


async def test_glob_lists_sorted_hidden_no_git_no_symlinks(tree: dict[str, Path], make_agent: Callable[..., Any]) -> None:
    ws = tree["ws"]
    env = await make_agent(ws).call("glob", {"pattern": "**"})
    assert env.ok, env.to_dict()
    got = rel(ws, env.data["paths"])
    assert got == [
        ".config/settings.ini", ".env", ".gitignore", ".hidden", "a.py", "b.txt", "bin.dat",
        "foo-x.txt", "foo.txt", "foo/bar.txt", "ignored.txt", "secret/plan.md", "src/deep/x.py", "src/m.py",
    ]
    assert got == byte_sorted(got)  # UTF-8 byte order: `foo-x.txt` < `foo.txt` < `foo/bar.txt`
    assert env.data["total"] == len(got)
    assert all(os.path.isabs(p) for p in env.data["paths"])
    assert "truncated" not in env.to_dict()["metadata"]


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("*.py", ["a.py"]),
        ("**/*.py", ["a.py", "src/deep/x.py", "src/m.py"]),
        ("src/*.py", ["src/m.py"]),
        ("src/**", ["src/deep/x.py", "src/m.py"]),
        ("foo*", ["foo-x.txt", "foo.txt"]),
        ("foo/bar.txt", ["foo/bar.txt"]),
        ("*/bar.txt", ["foo/bar.txt"]),
        ("[ab].*", ["a.py", "b.txt"]),
        ("?.py", ["a.py"]),
        ("*", [".env", ".gitignore", ".hidden", "a.py", "b.txt", "bin.dat", "foo-x.txt", "foo.txt", "ignored.txt"]),
        (".*/*", [".config/settings.ini"]),
        ("nothing*", []),
        ("SRC/**", []),
    ],
)
async def test_glob_patterns(tree: dict[str, Path], make_agent: Callable[..., Any], pattern: str, expected: list[str]) -> None:
    env = await make_agent(tree["ws"]).call("glob", {"pattern": pattern})
    assert env.ok
    assert rel(tree["ws"], env.data["paths"]) == expected
    assert env.data["total"] == len(expected)


async def test_glob_with_literal_brace_and_bang_names(workspace: Path, make_agent: Callable[..., Any]) -> None:
    for name in ("{a,b}.txt", "a.txt", "!x", "y"):
        (workspace / name).write_text("x")
    agent = make_agent(workspace)
    assert rel(workspace, (await agent.call("glob", {"pattern": "{a,b}.txt"})).data["paths"]) == ["{a,b}.txt"]
    assert rel(workspace, (await agent.call("glob", {"pattern": "!x"})).data["paths"]) == ["!x"]


async def test_glob_omits_rule_denied_and_out_of_scope(tree: dict[str, Path], make_agent: Callable[..., Any]) -> None:
    ws = tree["ws"]
    rules = [
        ALLOW,
        {"permission": "read", "pattern": "**/.env", "action": "deny"},
        {"permission": "fs.read", "pattern": "{workspace}/secret/**", "action": "deny"},
        {"permission": "glob", "pattern": "{workspace}/b.txt", "action": "deny"},
        {"permission": "grep", "pattern": "{workspace}/a.py", "action": "deny"},  # grep only: glob still lists it
        {"permission": "read", "pattern": "{workspace}/foo.txt", "action": "ask"},  # "ask before reading": not listed either
    ]
    env = await make_agent(ws, rules=rules).call("glob", {"pattern": "**"})
    got = rel(ws, env.data["paths"])
    for hidden in (".env", "secret/plan.md", "b.txt", "foo.txt"):
        assert hidden not in got
    assert "a.py" in got
    assert env.data["total"] == len(got)
    # A search root above a narrower read scope: only in-scope results.
    env = await make_agent(ws, read=["{workspace}/src/**"]).call("glob", {"pattern": "**"})
    assert rel(ws, env.data["paths"]) == ["src/deep/x.py", "src/m.py"]


async def test_glob_root_errors(tree: dict[str, Path], make_agent: Callable[..., Any]) -> None:
    agent = make_agent(tree["ws"])
    assert (await agent.call("glob", {"pattern": "*", "path": "a.py"})).error_code == "not_a_directory"
    env = await agent.call("glob", {"pattern": "*", "path": os.fspath(tree["out"])})
    assert env.refusal == {"layer": "capability", "code": "out_of_scope"}
    env = await agent.call("glob", {"pattern": "*", "path": "link_dir"})
    assert env.refusal == {"layer": "capability", "code": "out_of_scope"}
    env = await agent.call("glob", {"pattern": "*.py", "path": "src"})
    assert rel(tree["ws"], env.data["paths"]) == ["src/m.py"]


async def test_glob_truncation_sidecar(workspace: Path, make_agent: Callable[..., Any]) -> None:
    names = [f"f{i:02d}.txt" for i in range(6)]
    for n in names[:5]:
        (workspace / n).write_text("x")
    # Only `glob` is allowed by the manifest; reading the sidecar relies on the session's own rule (TRUNC-6).
    agent = make_agent(workspace, limits={"glob_entries": 5}, rules=[{"permission": "glob", "pattern": "*", "action": "allow"}])
    env = await agent.call("glob", {"pattern": "*.txt"})  # exactly the limit: not cut
    assert env.ok and env.data["total"] == 5 and env.output_path is None and not env.truncated
    assert "head" not in env.data
    (workspace / names[5]).write_text("x")
    env = await agent.call("glob", {"pattern": "*.txt"})  # limit + 1
    full = [os.fspath(workspace / n) for n in names]
    assert env.truncated and env.data["total"] == 6
    assert env.data["paths"] == full[:5]
    assert env.data["head"] == "\n".join(full[:5])
    meta = env.to_dict()["metadata"]
    assert meta["truncated"] is True and meta["output_path"] == env.output_path
    sidecar = Path(env.output_path)
    assert sidecar.parent == agent.session.workdir
    assert sidecar.read_text().splitlines() == full  # all entries, head included
    # The model can read its sidecar through the pipeline, even though it lies outside fs.read.
    env = await agent.call("read", {"path": os.fspath(sidecar)})
    assert env.ok and env.data["content"].splitlines() == full
    env = await agent.call("read", {"path": names[0]})  # anything else still needs a rule
    assert env.refusal is not None and env.refusal["code"] == "headless"
    agent.session.close()
    assert not sidecar.exists() and not agent.session.workdir.exists()


# -- grep -------------------------------------------------------------------------------


def texts(env: Any, ws: Path) -> list[tuple[str, int, str]]:
    return [(os.path.relpath(m["path"], ws), m["line"], m["text"]) for m in env.data["matches"]]


async def test_grep_matches_sorted_and_filtered(tree: dict[str, Path], make_agent: Callable[..., Any]) -> None:
    ws = tree["ws"]
    agent = make_agent(ws, rules=[ALLOW, {"permission": "read", "pattern": "**/.env", "action": "deny"}])
    env = await agent.call("grep", {"pattern": "needle"})
    assert env.ok, env.to_dict()
    got = texts(env, ws)
    assert got == [
        (".config/settings.ini", 1, "needle=1"),
        (".hidden", 1, "needle hidden"),
        ("a.py", 2, "needle = 1"),
        ("b.txt", 2, "needle lower"),
        ("foo-x.txt", 1, "needle dash"),
        ("foo.txt", 1, "needle dot"),
        ("foo/bar.txt", 1, "needle in foo"),
        ("ignored.txt", 1, "needle ignored-but-listed"),
        ("secret/plan.md", 1, "needle plan"),
        ("src/deep/x.py", 1, "# needle"),
        ("src/m.py", 1, "def needle():"),
    ]
    assert env.data["total"] == len(got)
    dumped = repr(env.to_dict())
    assert "needle-secret" not in dumped and SECRET not in dumped and "binary" not in dumped and "ref: needle" not in dumped


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"pattern": "needle", "glob": "*.py"}, ["a.py", "src/deep/x.py", "src/m.py"]),
        ({"pattern": "needle", "glob": "src/*.py"}, ["src/m.py"]),
        ({"pattern": "needle", "glob": "src/**"}, ["src/deep/x.py", "src/m.py"]),
        ({"pattern": "needle", "glob": "foo*"}, ["foo-x.txt", "foo.txt"]),
        ({"pattern": "needle", "path": "src"}, ["src/deep/x.py", "src/m.py"]),
        ({"pattern": "needle", "path": "src/m.py"}, ["src/m.py"]),
        ({"pattern": "NEEDLE"}, []),
        ({"pattern": "^Needle"}, ["b.txt"]),
        ({"pattern": "^needle", "case_insensitive": True, "glob": "b.txt"}, ["b.txt", "b.txt"]),
        ({"pattern": "def \\w+\\(\\)"}, ["src/m.py"]),
        ({"pattern": "needle", "path": "link_inside.py"}, ["a.py"]),  # canonicalised to its target
    ],
)
async def test_grep_options(tree: dict[str, Path], make_agent: Callable[..., Any], args: dict[str, Any], expected: list[str]) -> None:
    ws = tree["ws"]
    env = await make_agent(ws, rules=[ALLOW, {"permission": "read", "pattern": "**/.env", "action": "deny"}]).call("grep", args)
    assert env.ok, env.to_dict()
    assert [p for p, _, _ in texts(env, ws)] == expected


@pytest.mark.parametrize("pattern", ["(", "[a-", "a{2,1}", "(?P<x", "\\"])
async def test_grep_invalid_regex(tree: dict[str, Path], make_agent: Callable[..., Any], pattern: str) -> None:
    agent = make_agent(tree["ws"])
    env = await agent.call("grep", {"pattern": pattern})
    assert env.type == "error" and env.error_code == "invalid_pattern"
    env = await agent.call("grep", {"pattern": pattern, "glob": "no-such-file-*"})  # even with nothing to search
    assert env.error_code == "invalid_pattern"


async def test_grep_denied_env_never_appears(tree: dict[str, Path], make_agent: Callable[..., Any]) -> None:
    ws = tree["ws"]
    for deny in (
        {"permission": "read", "pattern": "**/.env", "action": "deny"},
        {"permission": "fs.read", "pattern": "{workspace}/.env", "action": "deny"},
        {"permission": "grep", "pattern": "**/.env", "action": "deny"},
        {"permission": "*", "pattern": "{workspace}/.e*", "action": "deny"},
    ):
        agent = make_agent(ws, rules=[ALLOW, deny])
        for args in ({"pattern": "API_KEY"}, {"pattern": "needle", "glob": ".env"}, {"pattern": "."}, {"pattern": "needle", "case_insensitive": True}):
            env = await agent.call("grep", args)
            assert env.ok
            assert all(not m["path"].endswith("/.env") for m in env.data["matches"])
            assert "API_KEY" not in repr(env.to_dict())
        env = await agent.call("grep", {"pattern": "API_KEY", "path": ".env"})
        assert env.type == "error" or env.data["matches"] == []
        assert "API_KEY" not in repr(env.to_dict())


async def test_grep_outside_read_scope_never_appears(tree: dict[str, Path], make_agent: Callable[..., Any], make_workspace: Callable[..., Path]) -> None:
    ws = tree["ws"]
    agent = make_agent(ws, read=["{workspace}/src/**"])
    env = await agent.call("grep", {"pattern": "needle"})  # root above the scope (CAP-9)
    assert env.ok and sorted({p for p, _, _ in texts(env, ws)}) == ["src/deep/x.py", "src/m.py"]
    env = await agent.call("grep", {"pattern": "needle", "path": "a.py"})
    assert env.refusal == {"layer": "capability", "code": "out_of_scope"}
    env = await agent.call("grep", {"pattern": "SECRET", "path": os.fspath(tree["out"])})
    assert env.refusal == {"layer": "capability", "code": "out_of_scope"}
    # Symlinks inside the workspace pointing out are never followed.
    everything = make_agent(ws)
    env = await everything.call("grep", {"pattern": "SECRET"})
    assert env.ok and env.data["matches"] == [] and env.data["total"] == 0
    env = await everything.call("grep", {"pattern": "SECRET", "path": "link_dir"})
    assert env.refusal == {"layer": "capability", "code": "out_of_scope"}


async def test_grep_special_roots(tree: dict[str, Path], make_agent: Callable[..., Any]) -> None:
    agent = make_agent(tree["ws"])
    assert (await agent.call("grep", {"pattern": "x", "path": "pipe.txt"})).error_code == "not_regular"  # no hang
    assert (await agent.call("grep", {"pattern": "x", "path": "missing"})).error_code == "not_found"
    env = await agent.call("grep", {"pattern": "needle", "path": "bin.dat"})
    assert env.ok and env.data["matches"] == []  # files with a NUL byte are skipped


async def test_grep_long_lines_and_invalid_utf8(workspace: Path, make_agent: Callable[..., Any]) -> None:
    (workspace / "long.txt").write_text("needle " + "x" * 5000 + "\n")
    (workspace / "latin.txt").write_bytes(b"needle caf\xe9\n")
    env = await make_agent(workspace).call("grep", {"pattern": "needle"})
    by_path = {os.path.basename(m["path"]): m["text"] for m in env.data["matches"]}
    assert by_path["latin.txt"] == "needle caf\ufffd"
    assert by_path["long.txt"].startswith("needle xxx") and len(by_path["long.txt"]) < 2100


@pytest.mark.parametrize("many", [1, 300])  # 300 files take the bulk path (one rg output rewritten at once)
async def test_grep_cuts_lines_longer_than_2000_bytes_only(workspace: Path, make_agent: Callable[..., Any], many: int) -> None:
    """FILE-14: exactly 2000 bytes (newline or not) stays whole; 2001 is cut at 2000 and marked. rg alone cuts at 2000 with the newline."""
    mark = " [... omitted end of long line]"
    lines = {"exact.txt": "n" * 2000 + "\n", "exact_last.txt": "n" * 2000, "over.txt": "n" * 2001 + "\n", "over_last.txt": "n" * 2001, "short.txt": "n" * 1999 + "\n"}
    for i in range(many):
        for name, text in lines.items():
            (workspace / f"{i:03d}-{name}").write_text(text)
    env = await make_agent(workspace).call("grep", {"pattern": "^n"})
    got = {os.path.basename(m["path"])[4:]: m["text"] for m in env.data["matches"] if m["path"].endswith(tuple(lines)) and "/000-" in m["path"]}
    assert got["exact.txt"] == got["exact_last.txt"] == "n" * 2000
    assert got["short.txt"] == "n" * 1999
    assert got["over.txt"] == got["over_last.txt"] == "n" * 2000 + mark
    assert env.data["total"] == 5 * many


async def test_grep_truncation_at_200(workspace: Path, make_agent: Callable[..., Any]) -> None:
    (workspace / "many.txt").write_text("".join(f"hit {i}\n" for i in range(250)))
    (workspace / "z.txt").write_text("hit z\n")
    agent = make_agent(workspace)
    env = await agent.call("grep", {"pattern": "^hit"})
    assert env.truncated and env.data["total"] == 251
    assert len(env.data["matches"]) == 200
    assert env.data["matches"][0] == {"path": os.fspath(workspace / "many.txt"), "line": 1, "text": "hit 0"}
    expected = [f"{workspace / 'many.txt'}:{i + 1}:hit {i}" for i in range(250)] + [f"{workspace / 'z.txt'}:1:hit z"]
    assert env.data["head"] == "\n".join(expected[:200])
    sidecar = Path(env.output_path)
    assert sidecar.read_text().splitlines() == expected
    env2 = await agent.call("read", {"path": os.fspath(sidecar), "offset": 251})
    assert env2.ok and env2.data["content"] == expected[250] + "\n"
    # Exactly at the limit: not cut.
    (workspace / "many.txt").write_text("".join(f"hit {i}\n" for i in range(199)))
    env = await agent.call("grep", {"pattern": "^hit"})
    assert not env.truncated and env.data["total"] == 200 and env.output_path is None
    agent.session.close()
    assert not sidecar.exists()


async def test_grep_many_files_in_batches_stay_sorted(workspace: Path, make_agent: Callable[..., Any]) -> None:
    names = [f"d{i % 7}/{'-' if i % 3 == 0 else ''}f{i:04d}.txt" for i in range(1500)]
    names.append("-dash-top.txt")
    for n in names:
        p = workspace / n
        p.parent.mkdir(exist_ok=True)
        p.write_text("hit\n")
    agent = make_agent(workspace, limits={"grep_matches": 5000})
    env = await agent.call("grep", {"pattern": "hit"})
    got = [os.path.relpath(m["path"], workspace) for m in env.data["matches"]]
    assert got == byte_sorted(names)


async def test_an_ask_rule_hides_from_search_but_the_default_ask_does_not(tree: dict[str, Path], make_agent: Callable[..., Any]) -> None:
    """PERM-14: a rule that asks before reading a path keeps grep from showing its contents; no rule at all does not."""
    ws = tree["ws"]
    (ws / "keys").mkdir()
    (ws / "keys" / "prod.pem").write_text("needle PRIVATE KEY\n")
    search_only = [{"permission": "grep", "pattern": "*", "action": "allow"}, {"permission": "glob", "pattern": "*", "action": "allow"}]
    # Reading is never allowed here, only asked by default: every file is still searched.
    agent = make_agent(ws, rules=search_only)
    paths = {m["path"] for m in (await agent.call("grep", {"pattern": "needle"})).data["matches"]}
    assert str(ws / "keys" / "prod.pem") in paths and str(ws / "a.py") in paths
    asked = [*search_only, {"permission": "read", "pattern": "{workspace}/keys/**", "action": "ask"}]
    agent = make_agent(ws, rules=asked)
    env = await agent.call("grep", {"pattern": "needle"})
    paths = {m["path"] for m in env.data["matches"]}
    assert str(ws / "keys" / "prod.pem") not in paths and str(ws / "a.py") in paths
    assert "PRIVATE KEY" not in str(env.to_dict())
    assert env.data["total"] == len(env.data["matches"])
    listed = rel(ws, (await agent.call("glob", {"pattern": "**"})).data["paths"])
    assert "keys/prod.pem" not in listed and "a.py" in listed
    # The ask rule itself still works for `read`: headless, it is refused rather than read.
    env = await agent.call("read", {"path": "keys/prod.pem"})
    assert env.type == "error" and "PRIVATE KEY" not in str(env.to_dict())


def test_ripgrep_is_never_taken_from_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """rg runs outside the sandbox: one planted in a directory on PATH (a project's `bin/` that direnv adds)
    must never be the one run. Without an rg beside this Python, searching fails closed instead."""
    import sys
    import sysconfig

    from agentcore.errors import ToolFailure
    from agentcore.runtime import ProcessSurface, _installed_rg

    assert ProcessSurface.rg_binary() == os.fspath(Path(sys.executable).parent / "rg")  # the wheel's, in this venv
    planted = tmp_path / "bin"
    planted.mkdir()
    (planted / "rg").write_text("#!/bin/sh\ntouch planted-rg-ran\n")
    (planted / "rg").chmod(0o755)
    elsewhere = tmp_path / "python" / "bin"
    elsewhere.mkdir(parents=True)
    monkeypatch.setenv("PATH", f"{planted}:/usr/bin:/bin")
    monkeypatch.setattr(sys, "executable", os.fspath(elsewhere / "python3"))
    monkeypatch.setattr(sysconfig, "get_path", lambda *_a, **_k: os.fspath(elsewhere))
    _installed_rg.cache_clear()
    try:
        with pytest.raises(ToolFailure) as failed:
            ProcessSurface.rg_binary()
        assert failed.value.code == "rg_missing"
    finally:
        _installed_rg.cache_clear()
