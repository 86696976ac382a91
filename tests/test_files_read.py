"""`read` through the pipeline (FILE-1 to FILE-4, TRUNC-7, TRUNC-8)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

TEN = "".join(f"line {i}\n" for i in range(1, 11))


@pytest.fixture
def agent(workspace: Path, make_agent: Callable[..., Any]) -> Any:
    (workspace / "ten.txt").write_text(TEN)
    return make_agent(workspace)


def lines_of(text: str) -> list[str]:
    return text.splitlines(keepends=True)


async def test_whole_small_file(agent: Any, workspace: Path) -> None:
    env = await agent.call("read", {"path": "ten.txt"})
    assert env.ok
    assert env.data == {
        "path": os.fspath(workspace / "ten.txt"), "content": TEN, "start_line": 1, "end_line": 10, "total_lines": 10, "next_offset": None,
    }
    assert env.to_dict()["metadata"].get("truncated") is None and "output_path" not in env.to_dict()["metadata"]


@pytest.mark.parametrize(
    ("offset", "limit", "first", "last", "next_offset"),
    [(3, 4, 3, 6, 7), (1, 1, 1, 1, 2), (9, 5, 9, 10, None), (10, 1, 10, 10, None), (1, 10, 1, 10, None), (5, None, 5, 10, None), (None, 3, 1, 3, 4)],
)
async def test_line_windows(agent: Any, offset: int | None, limit: int | None, first: int, last: int, next_offset: int | None) -> None:
    args: dict[str, Any] = {"path": "ten.txt"}
    if offset is not None:
        args["offset"] = offset
    if limit is not None:
        args["limit"] = limit
    env = await agent.call("read", args)
    assert env.ok, env.to_dict()
    assert env.data["content"] == "".join(lines_of(TEN)[first - 1 : last])
    assert (env.data["start_line"], env.data["end_line"], env.data["next_offset"], env.data["total_lines"]) == (first, last, next_offset, 10)
    assert env.truncated is False  # a line window asked for is not a cut (TRUNC-7)


@pytest.mark.parametrize("offset", [11, 12, 1000])
async def test_offset_past_the_end_is_empty_not_error(agent: Any, offset: int) -> None:
    env = await agent.call("read", {"path": "ten.txt", "offset": offset})
    assert env.ok
    assert env.data["content"] == "" and env.data["next_offset"] is None and env.data["end_line"] == offset - 1


@pytest.mark.parametrize(
    ("content", "total"),
    [("", 0), ("no newline", 1), ("a\n", 1), ("a\nb", 2), ("\n\n\n", 3), ("a\r\nb\r\n", 2)],
)
async def test_line_counting_and_verbatim_content(workspace: Path, make_agent: Callable[..., Any], content: str, total: int) -> None:
    (workspace / "f.txt").write_bytes(content.encode())
    env = await make_agent(workspace).call("read", {"path": "f.txt"})
    assert env.ok
    assert env.data["content"] == content and env.data["total_lines"] == total and env.data["next_offset"] is None


async def test_read_limit_cuts_window_without_gaps(workspace: Path, make_agent: Callable[..., Any]) -> None:
    # Line 2 does not fit after line 1; lines 3 and 4 would: they must not slip in after the gap.
    text = "x" * 60 + "\n" + "y" * 50 + "\n" + "z\n" + "w\n"
    (workspace / "f.txt").write_text(text)
    agent = make_agent(workspace, limits={"read_bytes": 100})
    env = await agent.call("read", {"path": "f.txt"})
    assert env.data["content"] == "x" * 60 + "\n"
    assert (env.data["end_line"], env.data["next_offset"], env.data["total_lines"]) == (1, 2, 4)
    assert env.truncated is True and env.output_path is None  # cut by the byte limit, no sidecar
    env = await agent.call("read", {"path": "f.txt", "offset": 2})
    assert env.data["content"] == "y" * 50 + "\nz\nw\n" and env.data["next_offset"] is None


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lines=st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r\x00"), max_size=60), max_size=30),
    final_newline=st.booleans(),
    read_bytes=st.integers(8, 120),
    limit=st.integers(1, 7),
)
async def test_paging_by_next_offset_reassembles_the_file(
    workspace: Path, make_agent: Callable[..., Any], lines: list[str], final_newline: bool, read_bytes: int, limit: int
) -> None:
    text = "\n".join(lines) + ("\n" if final_newline and lines else "")
    (workspace / "p.txt").write_text(text, encoding="utf-8")
    agent = make_agent(workspace, limits={"read_bytes": read_bytes})
    got: list[str] = []
    offset: int | None = 1
    steps = 0
    while offset is not None:
        env = await agent.call("read", {"path": "p.txt", "offset": offset, "limit": limit})
        assert env.ok, env.to_dict()
        assert env.data["start_line"] == offset
        got.append(env.data["content"])
        if env.data["next_offset"] is not None:
            assert env.data["next_offset"] > offset  # always progress
        offset = env.data["next_offset"]
        steps += 1
        assert steps <= len(text) + 2
    # Every line verbatim, except that a line longer than the limit comes back as
    # its head cut at a character boundary (FILE-3).
    expected = []
    for raw in text.encode().splitlines(keepends=True):
        expected.append(raw.decode() if len(raw) <= read_bytes else raw[:read_bytes].decode("utf-8", errors="ignore"))
    assert got and "".join(got) == "".join(expected)


async def test_first_line_longer_than_limit_returns_its_head(workspace: Path, make_agent: Callable[..., Any]) -> None:
    (workspace / "long.txt").write_text("é" * 100 + "\nshort\n")  # 200 bytes + newline
    agent = make_agent(workspace, limits={"read_bytes": 51})
    env = await agent.call("read", {"path": "long.txt"})
    assert env.ok
    assert env.data["content"] == "é" * 25  # cut at a character boundary at or below 51 bytes
    assert (env.data["start_line"], env.data["end_line"], env.data["next_offset"], env.data["total_lines"]) == (1, 1, 2, 2)
    env = await agent.call("read", {"path": "long.txt", "offset": 2})
    assert env.data["content"] == "short\n"


@pytest.mark.parametrize(
    ("byte_offset", "byte_length", "content", "real_offset", "real_length", "next_offset"),
    [
        (0, 4, "aéa", 0, 4, 4),       # a(1) é(2) a(1)
        (4, 4, "éa", 4, 3, 7),        # would end inside the next é: narrowed
        (2, 4, "aé", 3, 3, 6),        # starts inside an é: narrowed forward
        (0, 1000, "aé" * 10, 0, 30, None),
        (28, 5, "é", 28, 2, None),
        (29, 5, "", 30, 0, None),     # inside the last é: narrowed to the end
        (30, 5, "", 30, 0, None),
        (100, 5, "", 100, 0, None),
    ],
)
async def test_byte_windows(
    workspace: Path, make_agent: Callable[..., Any], byte_offset: int, byte_length: int, content: str, real_offset: int, real_length: int, next_offset: int | None
) -> None:
    (workspace / "u.txt").write_text("aé" * 10)  # 30 bytes
    env = await make_agent(workspace).call("read", {"path": "u.txt", "byte_offset": byte_offset, "byte_length": byte_length})
    assert env.ok, env.to_dict()
    assert env.data["content"] == content
    assert (env.data["byte_offset"], env.data["byte_length"], env.data["total_bytes"], env.data["next_offset"]) == (real_offset, real_length, 30, next_offset)


@pytest.mark.parametrize("step", [4, 5, 6, 7, 64])
async def test_byte_paging_reassembles_multibyte_text(workspace: Path, make_agent: Callable[..., Any], step: int) -> None:
    text = "a€b😀c\né" * 7 + "end"
    (workspace / "m.txt").write_text(text)
    agent = make_agent(workspace)
    out, offset = [], 0
    while offset is not None:
        env = await agent.call("read", {"path": "m.txt", "byte_offset": offset, "byte_length": step})
        assert env.ok, env.to_dict()
        out.append(env.data["content"])
        offset = env.data["next_offset"]
    assert "".join(out) == text


async def test_byte_length_above_read_limit_is_reduced_and_truncated(workspace: Path, make_agent: Callable[..., Any]) -> None:
    (workspace / "b.txt").write_text("0123456789" * 10)
    agent = make_agent(workspace, limits={"read_bytes": 30})
    env = await agent.call("read", {"path": "b.txt", "byte_offset": 0, "byte_length": 50})
    assert env.data["byte_length"] == 30 and env.data["next_offset"] == 30
    assert env.truncated is True and env.output_path is None
    env = await agent.call("read", {"path": "b.txt", "byte_offset": 80, "byte_length": 50})
    assert env.data["content"] == "0123456789" * 2 and env.data["next_offset"] is None and env.truncated is False


@pytest.mark.parametrize(
    "data",
    [
        b"text\x00more",
        b"\x00",
        b"a" * 8000 + b"\x00" + b"tail\n",
        b"\xff\xfe hello",
        b"caf\xe9\n",
        b"ok line\n" * 10 + b"bad \xc3\x28 byte\n",
        b"\x80start",
    ],
)
async def test_binary_is_refused(workspace: Path, make_agent: Callable[..., Any], data: bytes) -> None:
    (workspace / "bin.dat").write_bytes(data)
    agent = make_agent(workspace)
    env = await agent.call("read", {"path": "bin.dat"})
    assert env.type == "error" and env.error_code == "binary", env.to_dict()
    assert env.refusal is None  # a tool error, not a refusal


async def test_nul_in_first_8kib_refuses_every_window(workspace: Path, make_agent: Callable[..., Any]) -> None:
    (workspace / "bin.dat").write_bytes(b"\x00" + b"clean text\n" * 2000)
    agent = make_agent(workspace)
    for args in ({"offset": 100, "limit": 2}, {"byte_offset": 9000, "byte_length": 20}):
        env = await agent.call("read", {"path": "bin.dat", **args})
        assert env.error_code == "binary"


async def test_directory_missing_and_special_files(workspace: Path, make_agent: Callable[..., Any]) -> None:
    (workspace / "d").mkdir()
    os.mkfifo(workspace / "fifo")
    agent = make_agent(workspace)
    assert (await agent.call("read", {"path": "d"})).error_code == "is_directory"
    assert (await agent.call("read", {"path": "."})).error_code == "is_directory"
    assert (await agent.call("read", {"path": "missing.txt"})).error_code == "not_found"
    assert (await agent.call("read", {"path": "fifo"})).error_code == "not_regular"  # and does not hang


async def test_text_size_bound(workspace: Path, make_agent: Callable[..., Any]) -> None:
    big = "".join(f"{i:05d}\n" for i in range(400))  # 2400 bytes
    (workspace / "big.txt").write_text(big)
    agent = make_agent(workspace, limits={"text_bytes": 1000})
    env = await agent.call("read", {"path": "big.txt"})
    assert env.type == "error" and env.refusal == {"layer": "limit", "code": "too_large"}
    env = await agent.call("read", {"path": "big.txt", "offset": 100, "limit": 3})
    assert env.ok and env.data["content"] == "00099\n00100\n00101\n" and env.data["next_offset"] == 103
    env = await agent.call("read", {"path": "big.txt", "limit": 2})
    assert env.ok and env.data["content"] == "00000\n00001\n"
    env = await agent.call("read", {"path": "big.txt", "byte_offset": 2394})
    assert env.ok and env.data["content"] == "00399\n"
    at_bound = make_agent(workspace, limits={"text_bytes": len(big)})
    assert (await at_bound.call("read", {"path": "big.txt"})).ok  # only *larger* than the bound is refused


async def test_byte_window_too_small_for_one_character(workspace: Path, make_agent: Callable[..., Any]) -> None:
    (workspace / "e.txt").write_text("😀x")
    env = await make_agent(workspace).call("read", {"path": "e.txt", "byte_offset": 0, "byte_length": 2})
    assert env.type == "error" and env.error_code == "invalid_arguments"


async def test_plain_read_passes_the_default_watchdog(workspace: Path, make_agent: Callable[..., Any]) -> None:
    (workspace / "notes.txt").write_text("hello\n")
    agent = make_agent(workspace, engine_kwargs={"watchdog": "default"})
    env = await agent.call("read", {"path": "notes.txt"})
    assert env.ok and env.data["content"] == "hello\n"


async def test_a_huge_line_before_the_window_is_skipped_in_bounded_memory(workspace: Path, make_agent: Callable[..., Any]) -> None:
    """64 MiB without a newline, then the lines asked for: the long line is counted, never held."""
    import tracemalloc

    big = workspace / "one-line.txt"
    with open(big, "wb") as f:
        chunk = b"x" * (1 << 20)
        for _ in range(64):
            f.write(chunk)
        f.write(b"\nsecond\nthird\n")
    agent = make_agent(workspace)
    tracemalloc.start()
    try:
        env = await agent.call("read", {"path": "one-line.txt", "offset": 2, "limit": 1})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert env.ok and env.data["content"] == "second\n" and env.data["start_line"] == 2 and env.data["next_offset"] == 3
    assert peak < 8 << 20, f"peak {peak / 2**20:.1f} MiB while skipping a 64 MiB line"
    # The same line as the first of the window: its head, within the read limit.
    env = await agent.call("read", {"path": "one-line.txt", "offset": 1, "limit": 1})
    assert env.ok and set(env.data["content"]) == {"x"} and env.data["next_offset"] == 2


@settings(max_examples=300, deadline=None)
@given(data=st.lists(st.sampled_from([b"a", b"bb", b"\n", b"\xc3\xa9", b"xyz" * 5]), max_size=40).map(b"".join), keep=st.integers(1, 12))
def test_line_reader_agrees_with_splitlines(data: bytes, keep: int) -> None:
    import io

    from agentcore.tools.read import _lines

    got = list(_lines(io.BufferedReader(io.BytesIO(data)), keep))
    want = data.splitlines(keepends=True)
    assert [length for _, length in got] == [len(line) for line in want]
    assert [head for head, _ in got] == [line[:keep] for line in want]
