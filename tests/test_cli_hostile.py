"""The command line against hostile input: endless files, closed streams, escape sequences in arguments.

Every test runs the real `agentcore` console script as a subprocess.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from cli_support import cli_project

EXE = str(Path(sys.executable).parent / "agentcore")
HOSTILE = "x\u001b[2K\r\u001b]52;c;cm0gLXJmIH4=\u0007\u202eyp"
RAW = ("\x1b", "\x07", "\r", "\u202e")


def _capped_memory() -> None:
    # Without a bound of its own the CLI would read /dev/zero until the kernel kills it (or another
    # process): cap its address space so a regression fails this test instead of the machine.
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def run(*args: str, stdin: str | None = None, capped: bool = False, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EXE, *args], input=stdin, capture_output=True, text=True, timeout=120,
                          preexec_fn=_capped_memory if capped else None, **kwargs)  # type: ignore[call-overload]


@pytest.fixture
def proj(tmp_path: Path) -> tuple[Path, Path]:
    return cli_project(tmp_path, "*")


def _one_line_usage_error(r: subprocess.CompletedProcess[str]) -> None:
    assert r.returncode == 2, (r.returncode, r.stderr[-1000:])
    assert r.stdout == "" and r.stderr.startswith("agentcore: ") and r.stderr.count("\n") == 1, r.stderr[-1000:]


def test_endless_arguments_are_refused_without_reading_them_all(proj: tuple[Path, Path]) -> None:
    """`@/dev/zero` or `- < /dev/zero` is a usage error after a bounded read, not a process the kernel kills."""
    ws, m = proj
    call = ("call", "--manifest", str(m), "--workspace", str(ws), "--headless", "write")
    via_file = run(*call, "@/dev/zero", capped=True)
    _one_line_usage_error(via_file)
    assert "larger than" in via_file.stderr
    with open("/dev/zero", "rb") as zero:
        via_stdin = subprocess.run([EXE, *call, "-"], stdin=zero, capture_output=True, text=True, timeout=120,
                                   preexec_fn=_capped_memory)
    _one_line_usage_error(via_stdin)
    assert list((ws / "src").iterdir()) == []


def test_arguments_on_a_closed_stdin_are_a_usage_error(proj: tuple[Path, Path]) -> None:
    ws, m = proj
    r = subprocess.run(["sh", "-c", 'exec "$@" <&-', "sh", EXE, "call", "--manifest", str(m), "--workspace", str(ws),
                        "--headless", "write", "-"], capture_output=True, text=True, timeout=120)
    _one_line_usage_error(r)
    assert "standard input" in r.stderr and list((ws / "src").iterdir()) == []


def test_arguments_that_are_not_utf8_on_stdin_are_a_usage_error(proj: tuple[Path, Path]) -> None:
    ws, m = proj
    r = subprocess.run([EXE, "call", "--manifest", str(m), "--workspace", str(ws), "--headless", "write", "-"],
                       input=b'{"path": "src/a", "content": "\xff"}', capture_output=True, timeout=120)
    assert r.returncode == 2 and r.stdout == b"" and b"UTF-8" in r.stderr, r.stderr
    assert list((ws / "src").iterdir()) == []


def test_an_endless_manifest_is_refused_without_reading_it_all(proj: tuple[Path, Path]) -> None:
    ws, _ = proj
    r = run("manifest", "check", "/dev/zero", "--workspace", str(ws), capped=True)
    _one_line_usage_error(r)
    assert "larger than" in r.stderr
    r = run("call", "--manifest", "/dev/zero", "--workspace", str(ws), "--headless", "write", '{"path": "src/a", "content": "x"}',
            capped=True)
    _one_line_usage_error(r)
    assert list((ws / "src").iterdir()) == []


def test_escape_sequences_in_arguments_never_reach_the_terminal(proj: tuple[Path, Path], tmp_path: Path) -> None:
    """An argument echoed into an error is shown escaped: `ESC]52` would set the clipboard, `ESC[2K` erase a line."""
    ws, m = proj
    missing = str(tmp_path / HOSTILE)
    results = {
        "call --workspace": run("call", "--manifest", str(m), "--workspace", missing, "read", "{}"),
        "call @FILE": run("call", "--manifest", str(m), "--workspace", str(ws), "read", "@" + missing),
        "call --manifest": run("call", "--manifest", missing, "--workspace", str(ws), "read", "{}"),
        "manifest check": run("manifest", "check", missing),
        "tools (unknown argument)": run("tools", HOSTILE),
        "run --workspace": run("run", "--manifest", str(m), "--workspace", missing, "--model", "script:x", "hi"),
        "mcp list --workspace": run("mcp", "list", "--manifest", str(m), "--workspace", missing),
        "mcp list --manifest": run("mcp", "list", "--manifest", missing, "--workspace", str(ws)),
    }
    problems = {name: r.stderr for name, r in results.items() if r.returncode != 2 or any(c in r.stderr for c in RAW)}
    assert problems == {}
    assert all("\\x1b]52;c;cm0gLXJmIH4=\\x07\\u202eyp" in r.stderr for r in results.values())


def test_explain_shows_a_hostile_path_escaped(proj: tuple[Path, Path]) -> None:
    """ASK-13: explain's text puts the model's path on the terminal; it must not drive the terminal."""
    ws, m = proj
    r = run("explain", "--manifest", str(m), "--workspace", str(ws), "write", json.dumps({"path": "src/" + HOSTILE, "content": "x"}))
    assert r.returncode == 0, r.stderr
    assert not any(c in r.stdout for c in RAW), repr(r.stdout)
    assert "\\x1b]52;c;cm0gLXJmIH4=\\x07\\u202eyp" in r.stdout
    assert list((ws / "src").iterdir()) == []  # explained, not executed


def test_a_closed_stdout_is_not_a_traceback(proj: tuple[Path, Path]) -> None:
    ws, m = proj
    for args in (["tools"], ["call", "--manifest", str(m), "--workspace", str(ws), "--headless", "read", '{"path": "src"}']):
        r = subprocess.run(["sh", "-c", 'exec "$@" >&-', "sh", EXE, *args], capture_output=True, text=True, timeout=120)
        assert r.returncode in (0, 141) and "Traceback" not in r.stderr, (args[0], r.returncode, r.stderr[-1000:])


def test_an_endless_tasks_file_or_script_is_refused_without_reading_it_all(proj: tuple[Path, Path], tmp_path: Path) -> None:
    """`batch /dev/zero` and `--model script:/dev/zero` are errors after a bounded read, not the kernel's kill."""
    ws, m = proj
    out = tmp_path / "out"
    r = run("batch", "/dev/zero", "--manifest", str(m), "--out", str(out), capped=True)
    assert r.returncode == 2 and "cannot read the tasks file" in r.stderr and "larger than" in r.stderr, (r.returncode, r.stderr[-500:])
    r = run("run", "--manifest", str(m), "--workspace", str(ws), "--model", "script:/dev/zero", "hello", capped=True)
    assert r.returncode == 2 and "cannot read the script" in r.stderr and "larger than" in r.stderr, (r.returncode, r.stderr[-500:])
