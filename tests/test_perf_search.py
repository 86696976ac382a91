"""glob and grep after the performance work: the fast paths return exactly what the careful paths do.

grep has two ways to a result (one parallel rg over the whole tree when
visibility is proven for it at once; listed files searched in concurrent
batches otherwise), glob skips its regex when rg's prefilter is exact and
its per-name work when visibility is proven. Each test runs the same call
both ways on the same real tree — the careful way forced by a session deny
rule that reaches the root but matches nothing — and compares everything,
truncation and sidecars included.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentcore.runtime import ProcessSurface
from agentcore.tools._rg import decode_all, list_files, list_files_raw
from agentcore.tools.glob import basename_prefilter, compile_relative_glob, prefilter_is_exact
from agentcore.tools.grep import BATCH_FILES_MIN
from agentcore.truncation import LineSpool

pytestmark = [pytest.mark.timeout(120)]
TOOLS = ("read", "glob", "grep")
NOTHING = ("read", "{workspace}/**/no-such-name-anywhere", "deny")  # reaches every root, matches nothing


def build(ws: Path) -> None:
    files: dict[str, bytes] = {
        "a.py": b"import os\nneedle = 1\n",
        "foo-x.txt": b"needle dash\n",
        "foo.txt": b"needle dot\n",
        "foo/bar.txt": b"needle in foo\n",
        "foo/bar.py": b"needle py\n",
        ".hidden/needle.py": b"# needle hidden\n",
        "dir with space/f.py": b"needle space\n",
        "\u00e9/\u00fc.py": b"needle unicode\n",
        "t.py ": b"needle trailing space\n",
        "#x.py": b"needle hash\n",
        "sub/dot.": b"needle dot end\n",
        ".git/config": b"needle in git\n",
        "sub/.git/HEAD": b"needle in nested git\n",
        "early.bin": b"needle\x00binary\n",
        "late.txt": b"needle A\n" * 12000 + b"x\x00y\n" + b"needle Z\n",
        "latin.txt": b"needle caf\xe9\n",
        "long.txt": b"needle " + b"x" * 5000 + b"\n",
    }
    for i in range(BATCH_FILES_MIN * 3 + 17):  # enough files for several batches on the careful path
        files[f"many/d{i % 7}/f{i:04d}.txt"] = b"alpha\nneedle %d\nbeta needle\n" % i
    for rel, data in files.items():
        p = ws / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    weird = os.fsencode(ws) + b"/bad\xffname.py"
    with open(weird, "wb") as fh:
        fh.write(b"needle bad name\n")
    (ws / "nl\nname.py").write_text("needle newline name\n")
    (ws / "nl\ndir").mkdir()
    (ws / "nl\ndir" / "in.py").write_text("needle in newline dir\n")
    os.symlink(ws / "a.py", ws / "link.py")
    os.mkfifo(ws / "pipe.py")


@pytest.fixture
def tree(make_workspace: Callable[..., Path]) -> Path:
    ws = make_workspace("ws")
    build(ws)
    return ws


def both(make_agent: Callable[..., Any], ws: Path, **kw: Any) -> tuple[Any, Any]:
    fast = make_agent(ws, tools=TOOLS, **kw)
    careful = make_agent(ws, tools=TOOLS, **kw)
    careful.session.set_session_rules([NOTHING])
    return fast, careful


def sidecar(env: Any) -> bytes | None:
    return Path(env.output_path).read_bytes() if env.output_path else None


async def same(fast: Any, careful: Any, tool: str, args: dict[str, Any]) -> Any:
    a = await fast.call(tool, args)
    b = await careful.call(tool, args)
    assert a.type == b.type, (a.to_dict(), b.to_dict())
    assert a.data == b.data and a.truncated == b.truncated and a.error_code == b.error_code
    assert sidecar(a) == sidecar(b)
    return a


def keys(paths: list[str]) -> list[bytes]:
    return [p.encode("utf-8", "surrogateescape") for p in paths]


@pytest.mark.anyio
@pytest.mark.parametrize("args", [
    {"pattern": "needle"},
    {"pattern": "NEEDLE", "case_insensitive": True},
    {"pattern": "needle", "path": "many"},
    {"pattern": "needle", "path": "foo.txt"},
    {"pattern": "needle", "path": "late.txt"},
    {"pattern": "needle", "glob": "*.py"},
    {"pattern": "needle (A|Z)"},
    {"pattern": "no-such-text"},
])
async def test_grep_fast_and_careful_paths_agree(tree: Path, make_agent: Callable[..., Any], args: dict[str, Any]) -> None:
    fast, careful = both(make_agent, tree)
    env = await same(fast, careful, "grep", args)
    assert env.ok
    paths = [m["path"] for m in env.data["matches"]]
    assert keys(paths) == sorted(keys(paths))  # FILE-16
    order = [(m["path"].encode("utf-8", "surrogateescape"), m["line"]) for m in env.data["matches"]]
    assert order == sorted(order)
    assert not any("/.git/" in p or "\n" in p or p.endswith("early.bin") or "link.py" in p for p in paths)


@pytest.mark.anyio
async def test_grep_paths_agree_when_truncated(tree: Path, make_agent: Callable[..., Any]) -> None:
    fast, careful = both(make_agent, tree, limits={"grep_matches": 7})
    env = await same(fast, careful, "grep", {"pattern": "needle"})
    assert env.truncated and env.data["total"] > 1000
    lines = sidecar(env).splitlines()  # type: ignore[union-attr]
    assert len(lines) == env.data["total"]


@pytest.mark.anyio
async def test_grep_invalid_pattern_on_both_paths(tree: Path, make_agent: Callable[..., Any]) -> None:
    fast, careful = both(make_agent, tree)
    env = await same(fast, careful, "grep", {"pattern": "needle(("})
    assert env.error_code == "invalid_pattern"


@pytest.mark.anyio
async def test_grep_late_nul_is_handled_the_same_whatever_the_batch(tree: Path, make_agent: Callable[..., Any]) -> None:
    """rg memory-maps up to ten explicit files unless told not to, and then searches past a late NUL."""
    fast, careful = both(make_agent, tree, limits={"grep_matches": 100_000})
    alone = await careful.call("grep", {"pattern": "needle", "path": "late.txt"})
    in_tree = await fast.call("grep", {"pattern": "needle"})
    late = [m for m in in_tree.data["matches"] if m["path"].endswith("/late.txt")]
    assert alone.data["matches"] == late
    assert late and all(m["text"] == "needle A" for m in late)  # the search stopped at the NUL's block


@pytest.mark.anyio
@pytest.mark.parametrize("pattern", ["**/*.py", "**", "**/*", "*.py", "many/**/f00*.txt", "**/t.py ", "**/#x*", "**/f0?1.txt", "**/dot."])
async def test_glob_fast_and_careful_paths_agree(tree: Path, make_agent: Callable[..., Any], pattern: str) -> None:
    fast, careful = both(make_agent, tree)
    env = await same(fast, careful, "glob", {"pattern": pattern})
    assert env.ok
    assert keys(env.data["paths"]) == sorted(keys(env.data["paths"]))
    # The careful oracle: every regular file under the tree, outside `.git`, matched by our own regex.
    regex = compile_relative_glob(pattern)
    expected = []
    for dirpath, dirnames, names in os.walk(tree):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for n in names:
            full = os.path.join(dirpath, n)
            rel = os.path.relpath(full, tree)
            if os.path.isfile(full) and not os.path.islink(full) and regex.match(rel):
                expected.append(full)
    assert sorted(keys(expected)) == keys(env.data["paths"])


@pytest.mark.anyio
async def test_glob_paths_agree_when_truncated(tree: Path, make_agent: Callable[..., Any]) -> None:
    fast, careful = both(make_agent, tree, limits={"glob_entries": 9})
    env = await same(fast, careful, "glob", {"pattern": "**/*.txt"})
    assert env.truncated and len(sidecar(env).splitlines()) == env.data["total"]  # type: ignore[union-attr]


def test_gitignore_readings_of_a_prefilter_are_avoided() -> None:
    # rg reads `--glob` like a gitignore line: a leading `#` is a comment, trailing spaces are dropped.
    assert basename_prefilter("**/t.py ") is None
    assert basename_prefilter("**/#x*") is None
    assert basename_prefilter("**/a.") is None  # rg 14 never matches a glob ending in `.`
    assert basename_prefilter("**/*.py") == "*.py"
    assert prefilter_is_exact("**/*.py", "*.py")
    assert not prefilter_is_exact("**/?.py", "?.py") and not prefilter_is_exact("src/*.py", "*.py")


BASENAME = st.text(alphabet="ab.-_*x\u00e9 #?", min_size=1, max_size=5)
NAMES = st.lists(st.text(alphabet="ab.-_x\u00e9 #", min_size=1, max_size=4).filter(lambda s: s not in (".", "..")), min_size=1, max_size=3)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(base=BASENAME, deep=st.booleans(), layout=st.lists(NAMES, min_size=1, max_size=6))
def test_prefilter_never_narrows_and_is_exact_when_it_says_so(
    tmp_path_factory: pytest.TempPathFactory, base: str, deep: bool, layout: list[list[str]]
) -> None:
    pattern = ("**/" if deep else "") + base
    try:
        regex = compile_relative_glob(pattern)
    except Exception:
        return  # refused by the tool before any listing
    prefilter = basename_prefilter(pattern)
    root = tmp_path_factory.mktemp("pf")
    for parts in layout:
        target = root.joinpath(*parts)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists():
                target.write_text("x")
        except (NotADirectoryError, FileExistsError):
            pass
    rg = ProcessSurface.rg_binary()
    everything = anyio.run(list_files, rg, os.fspath(root))
    wanted = sorted(r for r in everything if regex.match(r))
    by_rg = sorted(anyio.run(lambda: list_files(rg, os.fspath(root), prefilter=prefilter)))
    assert set(wanted) <= set(by_rg), (pattern, prefilter)  # rg's prefilter only ever narrows what we then match
    if prefilter_is_exact(pattern, prefilter):
        assert by_rg == wanted, (pattern, prefilter)


@given(st.lists(st.binary(min_size=1, max_size=12).filter(lambda b: b"\0" not in b), max_size=30))
def test_decode_all_equals_decoding_each_name(raws: list[bytes]) -> None:
    assert decode_all(raws) == [r.decode("utf-8", "surrogateescape") for r in raws]


@pytest.mark.anyio
async def test_listing_splits_names_exactly(tmp_path: Path) -> None:
    names = [b"plain", b"a/.gitignore", b".github/x", b"sp ace", b"bad\xff", b"x/./y".replace(b"/./", b"/dot./"), b"nl\nname"]
    for n in names:
        p = os.fsencode(tmp_path) + b"/" + n
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as fh:
            fh.write(b"x")
    (tmp_path / "sub" / ".git").mkdir(parents=True)
    (tmp_path / "sub" / ".git" / "c").write_text("x")
    got = await list_files_raw(ProcessSurface.rg_binary(), os.fspath(tmp_path))
    assert sorted(got) == sorted(names)


# What file names can hold: any character but a newline (excluded by the tools) or NUL, undecodable bytes as surrogate escapes.
TEXT = st.one_of(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\0"), st.sampled_from(["\udcff", "\udc80"]))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    limit=st.integers(min_value=1, max_value=6),
    before=st.lists(st.text(alphabet=TEXT, max_size=4), max_size=4),
    lines=st.lists(st.text(alphabet=TEXT, max_size=5), max_size=12),
    prefix=st.sampled_from(["", "/ws/", "/\u00e9/"]),
    raw=st.booleans(),
)
def test_spool_extend_equals_adding_one_by_one(tmp_path: Path, limit: int, before: list[str], lines: list[str], prefix: str, raw: bool) -> None:
    one, bulk = LineSpool(tmp_path / "one", "t", limit), LineSpool(tmp_path / "bulk", "t", limit)
    for ln in before:
        one.add(ln, ln)
        bulk.add(ln, ln)
    for ln in lines:
        one.add(prefix + ln, prefix + ln)
    if raw:
        bulk.extend_raw([ln.encode("utf-8", "surrogateescape") for ln in lines], prefix)
    else:
        bulk.extend(lines, prefix)
    one.close()
    bulk.close()
    assert (one.head, one.total, one.truncated, one.head_text()) == (bulk.head, bulk.total, bulk.truncated, bulk.head_text())
    if one.path is not None:
        assert bulk.path is not None and one.path.read_bytes() == bulk.path.read_bytes()
        one.path.unlink()
        bulk.path.unlink()


@pytest.mark.anyio
@pytest.mark.parametrize("careful", [False, True])
async def test_grep_sidecar_lines_match_an_independent_reading(tree: Path, make_agent: Callable[..., Any], careful: bool) -> None:
    """Past the head, sidecar lines are written in bulk; check them against the files themselves."""
    (tree / "many" / "d0" / "\u00e9t\u00e9.txt").write_text("needle \u00e9t\u00e9 \u2603\n")
    fast, slow = both(make_agent, tree, limits={"grep_matches": 3})
    agent = slow if careful else fast
    env = await agent.call("grep", {"pattern": "needle", "path": "many"})
    expected: list[bytes] = []
    files = sorted(os.fsencode(os.path.join(d, n)) for d, _, names in os.walk(tree / "many") for n in names)
    for f in files:
        with open(f, "rb") as fh:
            for i, line in enumerate(fh.read().split(b"\n")[:-1], start=1):
                if b"needle" in line:
                    expected.append(f + b":" + str(i).encode() + b":" + line)
    assert env.truncated and env.data["total"] == len(expected)
    assert sidecar(env).split(b"\n")[:-1] == expected  # type: ignore[union-attr]
    assert [f"{m['path']}:{m['line']}:{m['text']}".encode() for m in env.data["matches"]] == expected[:3]


def _running_with(marker: str) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    if marker.encode() in fh.read():
                        pids.append(int(entry))
            except OSError:
                pass
    return pids


@pytest.mark.anyio
@pytest.mark.parametrize("route", ["output", "blocks"])
async def test_a_cancelled_rg_is_killed_and_reaped(tmp_path: Path, route: str) -> None:
    from agentcore.tools._rg import rg_blocks, rg_output

    marker = f"never-matches-{os.getpid()}-{route}"
    # An explicit /dev/zero is read for ever (no match, so no binary stop): rg only ends when killed.
    argv = [ProcessSurface.rg_binary(), "--no-mmap", "-e", marker, "--", "/dev/zero"]
    with anyio.move_on_after(0.5) as scope:
        if route == "output":
            await rg_output(argv, os.fspath(tmp_path))
        else:
            await rg_blocks(argv, os.fspath(tmp_path), lambda _block: None)
    assert scope.cancelled_caught
    assert _running_with(marker) == []  # killed (without the kill, the shielded reap would wait for ever)
