"""Helpers shared by tests/test_bash_*.py (no tests here).

Every bash test runs the real pipeline (`Engine.call(session, "bash", ...)`)
with real bwrap. The trees live under /var/tmp, NOT /tmp: the sandbox mounts
a private /tmp, so a write "outside the workspace" aimed at /tmp would land
in that throw-away tmpfs and a test could pass for the wrong reason.

    with lab_tree() as lab:
        data = bash_manifest([allow("touch", ANY)])
        ...
        before = lab.snapshot()
        env = await agent.call("bash", {"command": "touch $(echo S)"})
        assert_refused(env, "capability", "shell_substitution")
        assert lab.snapshot() == before
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

import external_support
from agentcore.envelope import Envelope

ANY: dict[str, bool] = {"wildcard": True}
ALLOW_ALL: tuple[dict[str, str], ...] = ({"permission": "*", "pattern": "*", "action": "allow"},)
LAB_PARENT = Path("/var/tmp")


def allow(cmd: str, *args: str | Mapping[str, Any]) -> dict[str, Any]:
    """One shell requirement: `allow("touch", ANY)`, `allow("sed", "-n", ANY)`."""
    return {"cmd": cmd, "args": [a if isinstance(a, str) else dict(a) for a in args]}


def arity(cmd: str, n: int) -> dict[str, Any]:
    """`cmd` with exactly `n` arguments, each anything."""
    return allow(cmd, *([ANY] * n))


def bash_manifest(
    shell: Sequence[Mapping[str, Any]],
    *,
    hosts: Sequence[str] = (),
    rules: Sequence[Mapping[str, str]] = ALLOW_ALL,
    read: Sequence[str] = ("{workspace}/**",),
    write: Sequence[str] = ("{workspace}/**",),
    watchdog_disable: Sequence[str] = (),
    watchdog_enabled: bool = True,
    limits: Mapping[str, Any] | None = None,
    environment: str | None = "bwrap",
    sandbox_view: str | None = None,
) -> dict[str, Any]:
    """A manifest enabling only `bash` with the given shell requirements (bwrap unless told)."""
    data: dict[str, Any] = {
        "name": "bash-test",
        "tools": ["bash"],
        "requires": {
            "fs": {"read": list(read), "write": list(write)},
            "net": {"hosts": list(hosts)},
            "shell": [dict(s) for s in shell],
        },
        "rules": [dict(r) for r in rules],
        "watchdog": {"enabled": watchdog_enabled, "disable": list(watchdog_disable)},
    }
    if environment is not None:
        data["environment"] = environment
    if limits:
        data["limits"] = dict(limits)
    if sandbox_view is not None:
        data["sandbox"] = {"view": sandbox_view}
    return data


# -- the lab tree -------------------------------------------------------------------


@dataclass
class Lab:
    root: Path
    ws: Path
    outside: Path

    def snapshot(self) -> dict[str, tuple[int, bytes]]:
        """Every entry under the lab root: (file type, content or link target)."""
        out: dict[str, tuple[int, bytes]] = {}
        for dirpath, dirnames, filenames in os.walk(self.root):
            for name in dirnames + filenames:
                p = Path(dirpath) / name
                st = os.lstat(p)
                if stat.S_ISREG(st.st_mode):
                    body = p.read_bytes()
                elif stat.S_ISLNK(st.st_mode):
                    body = os.fsencode(os.readlink(p))
                else:
                    body = b""
                out[os.fspath(p.relative_to(self.root))] = (stat.S_IFMT(st.st_mode), body)
        return out

    def git_init(self) -> None:
        subprocess.run(["git", "init", "-q", os.fspath(self.ws)], check=True, capture_output=True, env=_git_env())


def _git_env() -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1"}


@contextmanager
def lab_tree(ws_name: str = "ws") -> Iterator[Lab]:
    """root/{ws_name}/{a.txt, sub/, .git/config}, root/outside/target.txt, root/ws_evil/."""
    root = Path(os.path.realpath(tempfile.mkdtemp(prefix="bashlab-", dir=LAB_PARENT)))
    ws = root / ws_name
    (ws / "sub").mkdir(parents=True)
    (ws / "a.txt").write_text("alpha\n")
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n")
    outside = root / "outside"
    outside.mkdir()
    (outside / "target.txt").write_text("original\n")
    (root / "ws_evil").mkdir()
    try:
        yield Lab(root, ws, outside)
    finally:
        shutil.rmtree(root, ignore_errors=True)


# -- assertions -------------------------------------------------------------------


def assert_refused(env: Envelope, layer: str, code: str) -> None:
    wire = env.to_dict()
    assert env.type == "error", wire
    assert env.refusal is not None and env.refusal.get("layer") == layer and env.refusal.get("code") == code, wire
    assert wire["metadata"]["error_code"] == code, wire
    assert "data" not in wire


def assert_ran(env: Envelope) -> dict[str, Any]:
    assert env.type == "output", env.to_dict()
    assert isinstance(env.data, dict)
    return env.data


# What a command reports when the sandbox keeps it from a path: read-only (the default view shows
# system directories and granted roots read-only), absent (everything else), or a cross-mount link.
OS_REFUSALS = ("Read-only file system", "Invalid cross-device link", "No such file or directory", "Not a directory", "dangling symlink")


def assert_os_refused(env: Envelope) -> str:
    """The call went through every layer, ran, and the command failed on the sandbox's mounts."""
    data = assert_ran(env)
    assert data["exit_code"] not in (0, None), data
    return str(data["output"])


# -- processes ----------------------------------------------------------------------


def live_pids_with(marker: str) -> list[int]:
    """Host pids of non-zombie processes whose argv contains `marker` (visible across pid namespaces)."""
    needle = os.fsencode(marker)
    found: list[int] = []
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in argv and state not in (b"Z", b"X"):
            found.append(int(entry))
    return found


async def wait_for(condition: Callable[[], bool], *, timeout_s: float = 15.0, what: str = "condition") -> None:
    """Poll `condition` every 10 ms until it holds; fail after `timeout_s` (a wait, not a fixed sleep)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await anyio.sleep(0.01)



def require_bwrap() -> None:
    external_support.require_bwrap("bash sandbox tests")
