"""A harness is untrusted: its replies must not hang, exhaust or fool the runner.

Each test shows one way a reply (or a path it names) used to get past the
runner: a reply line with no end, a sidecar path naming a FIFO, a secret
hidden from `not_contains` by JSON escaping, a search result list that
`every` accepted because it was empty.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest

from conformance import connectors
from conformance.cases import load_cases
from conformance.checks import check_expectations, check_file, predicate_failures
from conformance.connectors import HarnessClient, HarnessFault, transport_for
from conformance.generators import render


def _finishes(fn, fifo: Path, seconds: float = 3.0) -> bool:
    """Run fn in a thread; if it is stuck opening the FIFO, release it and report False."""
    done = threading.Event()

    def target() -> None:
        try:
            fn()
        finally:
            done.set()

    threading.Thread(target=target, daemon=True).start()
    if done.wait(seconds):
        return True
    fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # a writer that closes at once: the reader gets EOF
    os.close(fd)
    done.wait(seconds)
    return False


def test_file_content_of_a_harness_path_naming_a_fifo_does_not_hang(tmp_path: Path) -> None:
    # `/metadata/output_path` comes from the harness; file_content used to open it whatever it is.
    fifo = tmp_path / "sidecar"
    os.mkfifo(fifo)
    out: list[list[str]] = []
    assert _finishes(lambda: out.append(predicate_failures(os.fspath(fifo), {"file_content": "x"})), fifo)
    assert out and out[0], "a FIFO is not a sidecar holding the expected content"


def test_files_step_on_a_saved_sidecar_naming_a_fifo_does_not_hang(tmp_path: Path) -> None:
    # Cases save /metadata/output_path and then check that path in a files step (trunc.grep-limit, ...).
    fifo = tmp_path / "sidecar"
    os.mkfifo(fifo)
    out: list[list[str]] = []
    assert _finishes(lambda: out.append(check_file(fifo, {"path": os.fspath(fifo), "contains": "x"}, {})), fifo)
    assert out and out[0]


def test_file_content_reads_no_more_than_it_compares(tmp_path: Path) -> None:
    # A harness may name a huge file (or /dev/zero): the runner must not read it all. Checked in a
    # child process whose address space is capped, so a whole-file read fails there, not here.
    big = tmp_path / "big"
    with open(big, "wb") as f:
        f.truncate(2 << 30)  # sparse 2 GiB
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (768 << 20, 768 << 20))\n"
        "from pathlib import Path\n"
        "from conformance.checks import check_file, predicate_failures\n"
        "p = sys.argv[1]\n"
        "assert predicate_failures(p, {'file_content': 'x'})\n"
        "assert check_file(Path(p), {'path': 'big', 'contains': 'x'}, {})\n"
        "assert check_file(Path(p), {'path': 'big', 'max_size': 10}, {})\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.run([sys.executable, "-c", code, os.fspath(big)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-600:]


def test_endless_reply_line_is_a_protocol_violation_not_a_memory_sink(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The runner buffered a reply line until its newline, however long: a harness could fill memory.
    monkeypatch.setattr(connectors, "MAX_REPLY_BYTES", 1 << 20, raising=False)
    script = tmp_path / "flood.py"
    script.write_text(
        "import json, sys, time\n"
        "r = json.loads(sys.stdin.readline())\n"
        "print(json.dumps({'seq': r['seq'], 'result': {'protocol': 1, 'implementation': {'name': 'flood'}}}), flush=True)\n"
        "sys.stdin.readline()\n"
        "sys.stdout.write('x' * (3 << 20)); sys.stdout.flush()\n"
        "time.sleep(60)\n"
    )

    async def go() -> HarnessFault:
        async with HarnessClient(transport_for(f"command:{sys.executable} {script}"), timeout=8, max_restarts=0) as client:
            with pytest.raises(HarnessFault) as info:
                await client.request("reset")
            return info.value

    started = time.monotonic()
    fault = anyio.run(go)
    assert fault.status == "error", fault.message
    assert "long" in fault.message
    assert time.monotonic() - started < 6


def test_not_contains_sees_through_json_escaping() -> None:
    # `{pointer: "", not_contains: "${secret}"}` on a whole envelope compared with its JSON text,
    # where a quote, a backslash or a newline is escaped: a leaked value containing one passed.
    for secret in ('say "hi"', "a\\b", "line1\nline2"):
        env = {"type": "error", "error_text": f"leaked: {secret}", "metadata": {}}
        assert predicate_failures(env, {"not_contains": secret}), secret
        assert predicate_failures([f"x{secret}"], {"not_contains": secret}), secret
    assert not predicate_failures({"error_text": "clean"}, {"not_contains": 'say "hi"'})


def test_search_root_above_scope_rejects_an_empty_listing_with_the_right_total() -> None:
    # `every` holds for an empty list: total n with no paths (FILE-13: total counts what is listed) passed.
    case = next(c for c in load_cases() if c.id == "cap.search-root-above-scope")
    values = {"ws": "/w", "outside": "/o", "root": "/", "src": "src", "word": "abcdefghij", "n": 3}
    glob_expect = render(case.steps[0]["expect"], values)
    grep_expect = render(case.steps[1]["expect"], values)
    meta = {"duration_ms": 1}
    assert check_expectations({"type": "output", "data": {"paths": [], "total": 3}, "metadata": meta}, glob_expect)
    assert check_expectations({"type": "output", "data": {"matches": [], "total": 3}, "metadata": meta}, grep_expect)
