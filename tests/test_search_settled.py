"""What rg reports beneath its root is proven after it ran (FILE-11, CAP-13; `tools._settled`).

rg opens what lies beneath its root by relative name, so a component swapped
for a symlink while it walks is followed (the race itself: test_files_races).
These tests take the proof apart on real trees: a swap and its undoing are
seen, a name that only existed through the swap is dropped, a changed file is
searched again as it is now, and a search that takes every path as changed
still gives exactly the results of an ordinary one.
"""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentcore.tools import _settled
from agentcore.tools._settled import CHANGED, GONE, SETTLED, TreeProof

pytestmark = pytest.mark.anyio

_libc = ctypes.CDLL(None, use_errno=True)


def _exchange(a: Path, b: Path) -> None:
    """renameat2(RENAME_EXCHANGE): `a` and `b` trade places atomically."""
    if _libc.renameat2(-100, os.fsencode(a), -100, os.fsencode(b), 2) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")


@pytest.fixture
def tree(make_workspace: Callable[..., Path]) -> dict[str, Path]:
    ws = make_workspace("ws", {"sub/a.txt": "inside needle\n", "sub/deep/b.txt": "inside needle\n", "top.txt": "needle\n"})
    out = make_workspace("outside", {"a.txt": "OUTSIDE needle\n", "secret-name.txt": "OUTSIDE needle\n"})
    os.symlink(out, ws / ".twin")
    _backdate(ws)
    return {"ws": ws, "out": out}


def _backdate(root: Path) -> None:
    """Wait until everything made so far is older than a proof started now (its margin is 10 ms)."""
    newest = max(os.lstat(p).st_ctime_ns for p in [root, *root.rglob("*")])
    while _now() - _settled._MARGIN_NS <= newest:  # at most a clock tick or two
        os.sched_yield()


def _now() -> int:
    return time.clock_gettime_ns(_settled._COARSE)


def test_an_untouched_tree_is_proven_without_a_second_look(tree: dict[str, Path]) -> None:
    with TreeProof(os.fspath(tree["ws"])) as proof:
        names = [b"sub/a.txt", b"sub/deep/b.txt", b"top.txt"]
        assert proof.listed(names) is names
        assert proof.file_states(names) == [SETTLED] * 3
        assert proof.dirs_settled({b"sub", b"sub/deep", b""})
        assert proof.matched(b"sub/deep/b.txt") == (SETTLED, None)


def test_a_directory_swapped_and_back_is_seen_and_only_its_real_names_survive(tree: dict[str, Path]) -> None:
    ws = tree["ws"]
    with TreeProof(os.fspath(ws)) as proof:
        # What a concurrent process does while rg walks: `sub` becomes the link (rg lists and reads the
        # outside directory as `sub/...`), then the real directory is put back before anyone looks.
        _exchange(ws / "sub", ws / ".twin")
        _exchange(ws / "sub", ws / ".twin")
        assert not proof.dirs_settled({b"sub"})
        # rg could have listed these two names from outside: only the one that really is in `sub` stays.
        assert proof.listed([b"sub/a.txt", b"sub/secret-name.txt"]) == [b"sub/a.txt"]
        assert proof.file_states([b"sub/a.txt"]) == [SETTLED]  # the file itself did not move: the directory did
        state, fd = proof.matched(b"sub/a.txt")
        assert state == CHANGED and fd is not None
        try:
            assert os.pread(fd, 100, 0) == b"inside needle\n"  # searched again: the real file, not the outside one
        finally:
            os.close(fd)
        assert proof.matched(b"sub/secret-name.txt") == (GONE, None)


def test_a_link_left_in_place_shows_nothing_beneath_it(tree: dict[str, Path]) -> None:
    ws = tree["ws"]
    with TreeProof(os.fspath(ws)) as proof:
        _exchange(ws / "sub", ws / ".twin")  # `sub` is now the link to outside
        assert proof.listed([b"sub/a.txt", b"sub/secret-name.txt", b"top.txt"]) == [b"top.txt"]
        assert proof.matched(b"sub/a.txt") == (GONE, None)
        assert proof.directory(b"sub") == (GONE, None)
        assert proof.directory(b"sub/deep") == (GONE, None)


def test_a_file_written_during_the_search_is_searched_again(tree: dict[str, Path]) -> None:
    ws = tree["ws"]
    with TreeProof(os.fspath(ws)) as proof:
        (ws / "top.txt").write_text("needle now\n")
        assert proof.file_states([b"top.txt", b"sub/a.txt"]) == [CHANGED, SETTLED]
        state, fd = proof.matched(b"top.txt")
        assert state == CHANGED and fd is not None
        os.close(fd)


def test_a_file_swapped_for_a_link_or_given_a_second_link_is_gone(tree: dict[str, Path]) -> None:
    ws, out = tree["ws"], tree["out"]
    with TreeProof(os.fspath(ws)) as proof:
        os.link(ws / "sub" / "a.txt", out / "second-name")
        os.unlink(ws / "top.txt")
        os.symlink(out / "a.txt", ws / "top.txt")
        assert proof.file_states([b"sub/a.txt", b"top.txt"]) == [GONE, GONE]
        assert proof.matched(b"sub/a.txt") == (GONE, None)
        assert proof.matched(b"top.txt") == (GONE, None)


def test_whole_second_file_systems_are_compared_in_their_own_units(tree: dict[str, Path]) -> None:
    """A file system keeping whole seconds stamps a change made just after the start with the second before it."""
    with TreeProof(os.fspath(tree["ws"])) as proof:
        st = os.lstat(tree["ws"] / "top.txt")
        second = proof.since - proof.since % 1_000_000_000
        coarse = os.stat_result((st.st_mode, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, second))
        assert not proof.settled(coarse)
        fine = os.stat_result((st.st_mode, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, proof.since - 1))
        assert proof.settled(fine)


# -- the tools, with every path taken as changed: the second look gives exactly the ordinary results -----------


CALLS = [
    ("grep", {"pattern": "needle"}),  # one rg over the whole tree
    ("grep", {"pattern": "needle", "glob": "**/*.txt"}),  # listed, then searched in batches
    ("grep", {"pattern": "needle", "path": "sub"}),
    ("grep", {"pattern": "secret"}),  # markers: `.env` withheld, `.env.example` searched on its own
    ("glob", {"pattern": "**"}),
    ("glob", {"pattern": "**/*.txt"}),  # the prefilter alone decides
    ("glob", {"pattern": "sub/**/b*"}),
]


@pytest.fixture
def busy_tree(make_workspace: Callable[..., Path]) -> Path:
    files = {f"d{i}/e{j}/f{k}.txt": f"line\nneedle {i} {j} {k}\nmore needle\n" for i in range(3) for j in range(3) for k in range(4)}
    files |= {
        "sub/a.txt": "needle a\n",
        "sub/deep/b.txt": "needle b\n",
        "top.txt": "needle top\n",
        ".env": "secret=1\n",
        ".env.example": "secret=example\n",
        "bin.dat": "needle\0binary\n",
        "linked.txt": "needle linked\n",
    }
    ws = make_workspace("ws", files)
    os.link(ws / "linked.txt", ws / "d0" / "second-name.txt")  # grep shows neither name's lines (CAP-13)
    os.symlink(ws / "top.txt", ws / "link.txt")  # never followed, never listed
    _backdate(ws)  # so that the ordinary search finds everything settled
    return ws


def _timeless(envelope: dict[str, Any]) -> dict[str, Any]:
    envelope["metadata"].pop("duration_ms")
    return envelope


@pytest.mark.parametrize(("tool", "args"), CALLS)
async def test_taking_every_path_as_changed_changes_no_result(
    busy_tree: Path, make_agent: Callable[..., Any], monkeypatch: pytest.MonkeyPatch, tool: str, args: dict[str, Any]
) -> None:
    agent = make_agent(busy_tree)
    ordinary = _timeless((await agent.call(tool, args)).to_dict())
    # A margin wider than the epoch: the search "began" before anything in the tree was made.
    monkeypatch.setattr(_settled, "_MARGIN_NS", 1 << 62)
    again = _timeless((await agent.call(tool, args)).to_dict())
    assert ordinary["type"] == "output"
    assert again == ordinary
    if args == {"pattern": "needle"}:
        assert ordinary["data"]["total"] > 40
        assert "linked" not in repr(ordinary)


async def test_grep_shows_a_changed_file_as_it_is_now(busy_tree: Path, make_agent: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Searched again through a descriptor: the lines are those of the file now, under its own path and line numbers."""
    agent = make_agent(busy_tree)
    monkeypatch.setattr(_settled, "_MARGIN_NS", 1 << 62)
    env = await agent.call("grep", {"pattern": "needle", "path": "sub"})
    assert [(m["path"].rsplit("/", 2)[-2:], m["line"], m["text"]) for m in env.data["matches"]] == [
        (["sub", "a.txt"], 1, "needle a"),
        (["deep", "b.txt"], 1, "needle b"),
    ]


# -- a walk proves nothing about a search that ran after it --------------------------------------------------


def _hook_first_settle(monkeypatch: pytest.MonkeyPatch, before: Callable[[Any], None], after: Callable[[], None]) -> None:
    """Run `before(output)` just before the call's first `_Output.settle` and `after()` just after it: what a
    concurrent process may do at those moments (done here in-process, so the test needs no timing luck)."""
    from agentcore.tools import grep

    real = grep._Output.settle
    calls: list[int] = []

    async def settle(self: Any, proof: TreeProof, search: list[str], limit: int) -> None:
        first = not calls
        calls.append(1)
        if first:
            before(self)
        await real(self, proof, search, limit)
        if first:
            after()

    monkeypatch.setattr(grep._Output, "settle", settle)


def _touch_first_match(ws: Path) -> Callable[[Any], None]:
    """Write a matched file again (same bytes): it is newer than the search now, so the proof walks to it by
    descriptors, through its directories, which themselves stay as they were (and are found settled)."""

    def touch(out: Any) -> None:
        path = ws / os.fsdecode(min(entry[0] for entry in out.index)).removeprefix("./")
        path.write_bytes(path.read_bytes())

    return touch


def _everything(env: Any) -> str:
    """The whole result: the head and, when it was cut, the sidecar."""
    assert env.type == "output", env.to_dict()
    return repr(env.data) + (Path(env.output_path).read_text() if env.output_path else "")


@pytest.mark.parametrize(
    ("files", "args", "engine_kwargs"),
    [
        # One rg over the tree, then the marked names (`.env.example`) searched by a second rg.
        (["sub/a.txt", "sub/.env.example"], {"pattern": "needle"}, {"watchdog": "default"}),
        # Listed: four batches of 256, the fourth started only once the first was shown.
        ([f"sub/f{i:04}.txt" for i in range(1024)], {"pattern": "needle", "glob": "**/*.txt"}, {}),
    ],
    ids=["tree", "batches"],
)
async def test_a_walk_made_before_a_later_search_proves_nothing_about_it(
    make_workspace: Callable[..., Path],
    make_agent: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
    files: list[str],
    args: dict[str, Any],
    engine_kwargs: dict[str, Any],
) -> None:
    """The first proof walks `sub` while it is real; `sub` is then swapped for a link to outside, which a
    later rg of the same call follows. Its lines must not be kept on the strength of that earlier walk."""
    ws = make_workspace("ws", {name: "needle inside\n" for name in files})
    out = make_workspace("outside", {name.removeprefix("sub/"): "OUTSIDE needle\n" for name in files})
    os.symlink(out, ws / ".twin")
    _backdate(ws)
    _backdate(out)
    _hook_first_settle(monkeypatch, _touch_first_match(ws), lambda: _exchange(ws / "sub", ws / ".twin"))
    env = await make_agent(ws, engine_kwargs=engine_kwargs).call("grep", args)
    assert "OUTSIDE" not in _everything(env), "lines read through a link were kept on the strength of an older walk"


async def test_files_searched_again_hold_a_bounded_number_of_descriptors(
    make_workspace: Callable[..., Path], make_agent: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Anything written in the tree during a search (a build, another session; one file suffices) makes every
    matched file beneath that directory be searched again. With 1024 descriptors, the common default, that must
    not run the process out of them: the call neither fails nor loses the lines of the files it could not open."""
    import resource

    ws = make_workspace("ws", {f"d/f{i:04}.txt": "needle\n" for i in range(1500)})
    agent = make_agent(ws)
    monkeypatch.setattr(_settled, "_MARGIN_NS", 1 << 62)  # every path changed, as after such a write
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    in_use = len(os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (in_use + _settled_room(), hard))
    try:
        env = await agent.call("grep", {"pattern": "needle"})
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert env.type == "output", env.to_dict()
    assert env.data["total"] == 1500


def _settled_room() -> int:
    """Descriptors left to the call: a batch searched again (256), the directories walked and rg's files."""
    from agentcore.tools.grep import AGAIN_BATCH

    return AGAIN_BATCH + 128


async def test_a_capped_second_search_keeps_a_sorted_prefix(make_workspace: Callable[..., Path]) -> None:
    """Every other file changed, searched again a batch of descriptors at a time; the second batch's rg
    reaches the limit. What stays is a sorted prefix: every file before where that rg stopped, none after."""
    from agentcore.runtime import ProcessSurface
    from agentcore.tools import grep

    names = [f"d/{i:04}" for i in range(600)]
    ws = make_workspace("ws", {name: "x\n" * (2000 if i > 520 else 1) for i, name in enumerate(names)})
    _backdate(ws)
    search = [ProcessSurface.rg_binary(), "--no-heading", "--with-filename", "--line-number", "--null", "--no-config", "--no-mmap", "-j1", "-e", "x", "--"]
    with TreeProof(os.fspath(ws)) as proof:
        for name in names[1::2]:  # changed: the second look batches these 256 at a time
            (ws / name).write_bytes((ws / name).read_bytes())
        f, capped = await grep.rg_output(search + names, proof.fd)
        out = grep._Output(f)
        try:
            await out.build_index()
            assert not capped and len(out.index) == 600
            await out.settle(proof, search, 1 << 20)
            kept = [os.fsdecode(entry[0]) for entry in out.index]
            groups = dict(out.groups(sort=False))
        finally:
            out.close()
    assert out.capped
    assert 2 * grep.AGAIN_BATCH < len(kept) < 600 and kept == names[: len(kept)]
    for name in kept[:-1]:
        assert groups[os.fsencode(name)].count(b"\n") == (2000 if int(name[2:]) > 520 else 1)


async def test_lines_searched_again_take_no_more_memory_than_the_output_may(
    make_workspace: Callable[..., Path], make_agent: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second search prints a short link (`/proc/<pid>/fd/<n>`) in each record, bounded by the call's
    output limit; given back a path of 3000 bytes, each record of a short line grows a hundredfold. What is
    held for them stays near that limit (before: a peak of 178 MiB here for a 1 MiB limit; at the default
    64 MiB, gigabytes)."""
    import tracemalloc

    deep = "/".join(["d" * 249] * 12) + "/f.txt"  # 3000 bytes: a name anyone writing the tree may make
    ws = make_workspace("ws", {deep: "x\n" * 30_000})
    _backdate(ws)
    agent = make_agent(ws, limits={"sidecar_bytes": 1 << 20})
    peaks: list[int] = []
    tracemalloc.start()
    try:
        for margin in (_settled._MARGIN_NS, 1 << 62):  # settled (the control), then changed: searched again
            monkeypatch.setattr(_settled, "_MARGIN_NS", margin)
            tracemalloc.reset_peak()
            env = await agent.call("grep", {"pattern": "x"})
            peaks.append(tracemalloc.get_traced_memory()[1])
            assert env.type == "output" and env.data["total"] > 0
    finally:
        tracemalloc.stop()
    assert peaks[0] < 16 << 20
    assert peaks[1] < 16 << 20, f"{peaks[1] >> 20} MiB held for a 1 MiB output"


@pytest.mark.parametrize("shape", ["file root with a long name", "deep root"])
async def test_rewriting_the_paths_of_many_short_lines_takes_bounded_memory(
    make_workspace: Callable[..., Path], make_agent: Callable[..., Any], shape: str
) -> None:
    """Each record rg prints carries a short path (`./f.txt`, or `/proc/self/fd/0` for a file root); the
    result carries the full one, up to thousands of bytes. The records of one file are rewritten a piece
    at a time, so what is held stays near the output limit, not a hundred times it."""
    import tracemalloc

    deep = "/".join(["d" * 249] * 12)  # a root path of 3000 bytes: directories anyone writing the tree may make
    name = "n" * 250 + ".txt"
    rel = f"{deep}/f.txt" if shape == "deep root" else name
    first = f"{deep}/a.txt" if shape == "deep root" else None  # fills the head: the big file is rewritten in runs
    ws = make_workspace("ws", {rel: "x\n" * 400_000, **({first: "x\n" * 1000} if first else {})})
    _backdate(ws)
    agent = make_agent(ws, limits={"sidecar_bytes": 4 << 20})
    tracemalloc.start()
    try:
        env = await agent.call("grep", {"pattern": "x", "path": deep if shape == "deep root" else name})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert env.type == "output" and env.data["total"] > 1000
    assert peak < 32 << 20, f"{peak >> 20} MiB held for a 4 MiB output"


async def test_a_file_named_dash_is_searched_like_any_other(make_workspace: Callable[..., Path], make_agent: Callable[..., Any]) -> None:
    """Listed files are handed to rg by name, and rg reads `-` as its standard input."""
    ws = make_workspace("ws", {"-": "needle dash\n", "a.txt": "needle a\n"})
    agent = make_agent(ws)
    for args in ({"pattern": "needle"}, {"pattern": "needle", "glob": "*"}):
        env = await agent.call("grep", args)
        assert [(m["path"], m["text"]) for m in env.data["matches"]] == [(f"{ws}/-", "needle dash"), (f"{ws}/a.txt", "needle a")], args
