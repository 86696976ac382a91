"""Spools (TRUNC-2, TRUNC-5, TRUNC-6): bounded heads, complete sidecars, streamed."""

from __future__ import annotations

import hashlib
import os
import stat
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore.truncation import ByteSpool, LineSpool

pytestmark = [pytest.mark.timeout(120)]

MiB = 1 << 20


def test_byte_spool_50mb_keeps_head_bounded_and_sidecar_complete(tmp_path: Path) -> None:
    limit = 64 * 1024
    spool = ByteSpool(tmp_path / "sidecars", "bash", limit)
    digest = hashlib.sha256()
    first = b""
    total = 0
    sizes = [1, limit - 1, 3, MiB, 7 * MiB + 13, 5]  # crosses the limit mid-chunk, then big chunks
    tracemalloc.start()
    try:
        i = 0
        while total < 50 * MiB:
            n = min(sizes[i % len(sizes)], 50 * MiB - total)
            chunk = bytes([i % 251]) * n
            i += 1
            if len(first) < limit:
                first += chunk[: limit - len(first)]
            digest.update(chunk)
            spool.write_sync(chunk)
            total += n
            del chunk
            assert len(spool._head) <= limit  # never more than the limit in memory
        spool.close()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # The largest single chunk (~7 MiB) plus the head and file buffer; never the 50 MiB written.
    assert peak < 12 * MiB, peak
    assert spool.truncated and spool.total == 50 * MiB
    assert spool.head_bytes() == first
    assert spool.path is not None and spool.path.parent == tmp_path / "sidecars"
    assert spool.path.stat().st_size == 50 * MiB
    h = hashlib.sha256()
    with open(spool.path, "rb") as fh:
        for block in iter(lambda: fh.read(4 * MiB), b""):
            h.update(block)
    assert h.hexdigest() == digest.hexdigest()
    assert stat.S_IMODE(os.stat(spool.path).st_mode) == 0o600


@pytest.mark.parametrize(("sizes", "limit", "truncated"), [([10], 10, False), ([10, 1], 10, True), ([5, 5], 10, False), ([11], 10, True), ([], 10, False), ([0, 0, 3], 0, True)])
def test_byte_spool_triggers_only_when_longer_than_limit(tmp_path: Path, sizes: list[int], limit: int, truncated: bool) -> None:
    spool = ByteSpool(tmp_path, "t", limit)
    data = b""
    for n in sizes:
        chunk = os.urandom(n)
        data += chunk
        spool.write_sync(chunk)
    spool.close()
    assert spool.truncated is truncated
    assert spool.head_bytes() == data[:limit]
    if truncated:
        assert spool.path is not None and spool.path.read_bytes() == data
    else:
        assert spool.path is None and list(tmp_path.iterdir()) == []


@settings(max_examples=100, deadline=None)
@given(chunks=st.lists(st.binary(max_size=300), max_size=20), limit=st.integers(0, 1000))
def test_byte_spool_property(tmp_path_factory: pytest.TempPathFactory, chunks: list[bytes], limit: int) -> None:
    d = tmp_path_factory.mktemp("spool")
    spool = ByteSpool(d, "t", limit)
    for c in chunks:
        spool.write_sync(c)
        assert len(spool.head_bytes()) <= limit
    spool.close()
    data = b"".join(chunks)
    assert spool.total == len(data)
    assert spool.head_bytes() == data[:limit]
    assert spool.truncated == (len(data) > limit)
    if spool.truncated:
        assert spool.path is not None and spool.path.read_bytes() == data


def test_byte_spool_head_text_cut_at_character_boundary(tmp_path: Path) -> None:
    spool = ByteSpool(tmp_path, "t", 5)
    spool.write_sync("aé€x".encode())  # 1 + 2 + 3 + 1 bytes: the limit cuts the euro sign
    spool.close()
    assert spool.head_text() == "aé"
    assert spool.path is not None and spool.path.read_text(encoding="utf-8") == "aé€x"


def test_sidecar_names_are_unique(tmp_path: Path) -> None:
    paths = set()
    for _ in range(20):
        s = ByteSpool(tmp_path, "grep", 0)
        s.write_sync(b"x")
        s.close()
        paths.add(s.path)
    assert len(paths) == 20


@pytest.mark.parametrize(("n", "limit"), [(0, 3), (3, 3), (4, 3), (1000, 7), (1, 0)])
def test_line_spool(tmp_path: Path, n: int, limit: int) -> None:
    spool = LineSpool(tmp_path, "glob", limit)
    lines = [f"/ws/file-{i:04d}.txt" for i in range(n)]
    for ln in lines:
        spool.add(ln, ln)
        assert len(spool.head) <= limit
    spool.close()
    assert spool.total == n
    assert spool.head == lines[:limit]
    assert spool.head_text() == "\n".join(lines[:limit])
    assert spool.truncated == (n > limit)
    if spool.truncated:
        assert spool.path is not None
        assert spool.path.read_text().splitlines() == lines
        assert stat.S_IMODE(os.stat(spool.path).st_mode) == 0o600
    else:
        assert spool.path is None
