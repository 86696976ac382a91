"""A hostile harness: what its replies and processes could do to the runner's reports, console and machine.

Each test shows one way a harness reached past its replies: text that
acted on the terminal or broke junit.xml and summary.md, a saved reply
value that crashed the whole run, children that outlived it, a link in the
fixture tree whose target the cleanup changed, a message of any length
kept for every case.
"""

from __future__ import annotations

import io
import json
import os
import re
import select
import stat
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import anyio
import pytest

from conformance import runner
from conformance.cli import Progress, execute
from conformance.connectors import HarnessClient, transport_for
from conformance.report import header, junit, markdown
from conformance.runner import DETAIL_LIMIT, CaseResult, Tree

EVIL = "boom \x1b[31mred\x1b]0;title\x07 \x00\x01\r\n| row | <!-- \u202e ]]> </error>"


def _harness(tmp_path: Path, call_reply: dict, *, name: str = "evil", prelude: str = "") -> str:
    """A command harness that claims every feature a case needs and answers each call with `call_reply`."""
    script = tmp_path / "harness.py"
    script.write_text(textwrap.dedent(f"""\
        import json, os, subprocess, sys
        {prelude}
        for line in sys.stdin:
            r = json.loads(line)
            if r["op"] == "start":
                body = {{"result": {{"protocol": 1, "implementation": {{"name": {name!r}}},
                        "features": ["tool.read", "tool.glob", "limits", "capability"]}}}}
            elif r["op"] == "call":
                body = json.loads({json.dumps(call_reply)!r})
            else:
                body = {{"result": {{}}}}
            sys.stdout.write(json.dumps({{"seq": r["seq"], **body}}) + "\\n")
            sys.stdout.flush()
        """))
    return f"command:{sys.executable} {script}"


def test_harness_text_cannot_break_junit_or_markdown() -> None:
    # An error message reached junit.xml raw: a control character made the file not well-formed XML,
    # and in summary.md a newline in the implementation's name added a heading, `<!--` hid the rest.
    result = CaseResult("file.x", "FILE", "MUST", ("FILE-1",), "error", message=f"harness error in call: {EVIL}")
    head = header(digest="d" * 64, seed=1, implementation={"name": "evil\n# Injected", "version": "<!--"},
                  features=[], connector="command:x", case_count=1)
    root = ET.fromstring(junit(head, [result]).split("\n", 1)[1])
    assert "\x1b" not in ET.tostring(root, encoding="unicode")
    md = markdown(head, [result])
    assert md.splitlines()[0].startswith("# Conformance: evil") and "# Injected" not in md.splitlines()[1]
    row = next(line for line in md.splitlines() if line.startswith("| `file.x`"))
    assert len(re.split(r"(?<!\\)\|", row)) == 9 and "<!--" not in md and "\x1b" not in md  # seven cells


@pytest.mark.parametrize("tty", [False, True])
def test_progress_never_writes_a_harness_escape_sequence(tty: bool) -> None:
    stream = io.StringIO()
    stream.isatty = lambda: tty  # type: ignore[method-assign]
    Progress(stream, quiet=False)(CaseResult("file.x", "FILE", "MUST", (), "error", message=EVIL), 1, 1)
    shown = stream.getvalue().replace("\r\x1b[2K", "")  # the progress line's own control
    assert not any(ch in shown for ch in "\x1b\x07\x00\r\u202e")
    assert "\\x1b[31m" in shown and "row" in shown.splitlines()[-1 if not tty else 1]


def test_a_saved_reply_value_that_is_no_path_is_an_error_not_a_crash(tmp_path: Path) -> None:
    # The case saves /metadata/output_path and checks that path in a files step: a number there
    # raised TypeError out of the runner, ending the run without a report.
    impl = _harness(tmp_path, {"envelope": {"type": "output", "output": "x", "metadata": {"truncated": True, "output_path": 123}}})
    _h, results, _s, _r = anyio.run(lambda: execute(impl, seed=1, patterns=["trunc.sidecars-deleted-on-close"], all_checks=True))
    assert results[0].status in ("fail", "error"), results[0].message


def test_a_harness_message_of_any_length_is_kept_bounded(tmp_path: Path) -> None:
    impl = _harness(tmp_path, {"error": {"message": "x" * (1 << 20)}})
    _h, results, _s, _r = anyio.run(lambda: execute(impl, seed=1, patterns=["file.read-typed-failures"]))
    assert results[0].status == "error" and len(results[0].message) <= DETAIL_LIMIT


def test_children_of_the_harness_end_with_it(tmp_path: Path) -> None:
    # A harness's child kept running after the run (holding the harness's pipes): only the harness was killed.
    fifo = tmp_path / "held"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    prelude = f"held = open({os.fspath(fifo)!r}, 'wb'); subprocess.Popen(['sleep', '60'], stdout=held); held.close()"
    impl = _harness(tmp_path, {"error": {"message": "no"}}, prelude=prelude)

    async def go() -> None:
        async with HarnessClient(transport_for(impl), timeout=10, max_restarts=0):
            pass

    try:
        anyio.run(go)
        ready, _w, _x = select.select([reader], [], [], 10)  # EOF once every writer (the child) is gone
        assert ready and os.read(reader, 1) == b"", "the harness's child is still running"
    finally:
        os.close(reader)


def test_tree_removal_never_changes_a_file_a_link_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A harness plants ws/locked/link -> a file outside and makes ws/locked read-only: unlinking fails,
    # and the cleanup's retry used chmod on the link, which follows it and changed the file outside.
    victim = tmp_path / "key"
    victim.write_text("secret")
    victim.chmod(0o600)
    tree = Tree()
    locked = tree.ws / "locked"
    locked.mkdir()
    (locked / "link").symlink_to(victim)
    locked.chmod(0o500)
    real_unlink = os.unlink

    def unlink(path: object, *, dir_fd: int | None = None) -> None:
        # What a non-root user sees in a directory without write permission (root is never refused).
        if os.fspath(path) in ("link", os.fspath(locked / "link")) and not stat.S_IMODE(os.stat(locked).st_mode) & 0o200:
            raise PermissionError(13, "Permission denied", os.fspath(path))
        real_unlink(path, dir_fd=dir_fd)

    monkeypatch.setattr(os, "unlink", unlink)
    tree.remove()
    assert stat.S_IMODE(victim.stat().st_mode) == 0o600 and victim.read_text() == "secret"
    assert not tree.root.exists(), "the tree is removed once the locked directory is opened up"
    assert runner.REMOVE_PASSES > 1
