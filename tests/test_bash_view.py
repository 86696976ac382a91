"""What `bash` sees of the host (ENV-5, revision 3): fs.read holds inside the sandbox.

By default (`sandbox.view: minimal`) the root shows only the system
directories programs need (`/usr`, `/bin`, `/sbin`, `/lib*`, `/etc`) plus
the workspace and the fs.read and fs.write roots; `sandbox.view: full` is the
documented opt-in to the whole root read-only (user areas and secret stores
still hidden). Every test runs the real pipeline with real bwrap; the secrets
are real files in real host directories.
"""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentcore.environments.bwrap import SYSTEM_DIRS
from test_bash_support import Lab, arity, assert_ran

pytestmark = [pytest.mark.bwrap, pytest.mark.anyio, pytest.mark.timeout(120)]

SECRET = "host-secret-" + uuid.uuid4().hex[:12]
SHELL = [arity("cat", 1), arity("ls", 1), arity("ls", 2), arity("sh", 1), arity("sh", 3), arity("touch", 1), arity("mkdir", 1)]


@pytest.fixture
def planted() -> Iterator[dict[str, Path]]:
    """A secret file in /var/tmp, /opt and /srv (real host directories outside every root)."""
    made: dict[str, Path] = {}
    try:
        for area in ("/var/tmp", "/opt", "/srv"):
            d = Path(area) / f"agentcore-view-{uuid.uuid4().hex[:10]}"
            try:
                d.mkdir()
            except OSError as exc:
                if os.environ.get("CI") == "true":
                    raise
                pytest.skip(f"cannot create a directory in {area}: {exc.strerror}")
            (d / "secret.txt").write_text(SECRET + "\n")
            made[area] = d
        yield made
    finally:
        for d in made.values():
            shutil.rmtree(d, ignore_errors=True)


async def run(agent: Any, command: str) -> dict[str, Any]:
    return assert_ran(await agent.call("bash", {"command": command}))


@pytest.mark.parametrize("area", ["/var/tmp", "/opt", "/srv"])
async def test_secrets_outside_the_roots_are_not_in_the_sandbox(agent_for: Callable[..., Any], planted: dict[str, Path], area: str) -> None:
    secret = planted[area] / "secret.txt"
    data = await run(agent_for(SHELL), f"cat {secret}")
    assert data["exit_code"] != 0 and SECRET not in data["output"]
    assert "No such file or directory" in data["output"]
    data = await run(agent_for(SHELL), f"ls {planted[area].parent}")
    assert planted[area].name not in data["output"]


async def test_control_the_full_view_shows_them_except_user_areas(agent_for: Callable[..., Any], planted: dict[str, Path]) -> None:
    agent = agent_for(SHELL, sandbox_view="full")
    for area in ("/var/tmp", "/opt"):
        assert (await run(agent, f"cat {planted[area] / 'secret.txt'}"))["output"] == SECRET + "\n"
    assert SECRET not in (await run(agent, f"cat {planted['/srv'] / 'secret.txt'}"))["output"]  # /srv is a user area


async def test_fs_read_shows_what_it_grants_and_no_more(agent_for: Callable[..., Any], planted: dict[str, Path], lab: Lab) -> None:
    granted = planted["/opt"]
    (granted / "tool").mkdir()
    (granted / "tool" / "run.sh").write_text("echo tool ran\n")
    agent = agent_for(SHELL, read=("{workspace}/**", f"{granted}/tool/**"), watchdog_enabled=False)  # a script outside the workspace
    assert (await run(agent, f"sh {granted}/tool/run.sh"))["output"] == "tool ran\n"
    # Beside the granted tree: its parent's other files stay out.
    data = await run(agent, f"cat {granted / 'secret.txt'}")
    assert SECRET not in data["output"] and data["exit_code"] != 0
    assert (await run(agent, f"touch {granted}/tool/new"))["exit_code"] != 0
    assert not (granted / "tool" / "new").exists()


async def test_the_root_lists_only_system_entries_and_the_roots(agent_for: Callable[..., Any], lab: Lab) -> None:
    shown = sorted(
        {Path(d).name for d in SYSTEM_DIRS if os.path.lexists(d)} | {"dev", "proc", "tmp", lab.ws.parts[1]}
    )
    assert (await run(agent_for(SHELL), "ls -A /"))["output"].split() == shown
    for hidden in ("/run", "/sys", "/boot", "/root", "/home", "/var/lib", "/mnt", "/media"):
        data = await run(agent_for(SHELL), f"ls {hidden}")
        if lab.ws.parts[1] != Path(hidden).parts[1]:
            assert "No such file or directory" in data["output"], (hidden, data)


async def test_the_root_itself_is_read_only(agent_for: Callable[..., Any], lab: Lab) -> None:
    agent = agent_for(SHELL)
    for command in ("touch /planted", "mkdir /planted", "touch /etc/planted", "touch /usr/planted"):
        data = await run(agent, command)
        assert data["exit_code"] != 0 and "Read-only file system" in data["output"], (command, data)
    assert not os.path.exists("/etc/planted") and not os.path.exists("/usr/planted")
    data = await run(agent, "touch /tmp/scratch")  # the private /tmp stays writable
    assert data["exit_code"] == 0, data


async def test_common_programs_still_run(agent_for: Callable[..., Any], lab: Lab) -> None:
    lab.git_init()
    rg = Path(sys.executable).parent / "rg"  # the ripgrep the package ships (the search tools' own)
    shell = [*SHELL, arity("git", 1), arity("python3", 2), {"cmd": os.fspath(rg), "args": ["-c", {"wildcard": True}, "a.txt"]}]
    agent = agent_for(shell, read=("{workspace}/**", os.fspath(rg)), watchdog_enabled=False)
    assert (await run(agent, "sh -c 'echo $0' ran"))["output"] == "ran\n"
    assert "a.txt" in (await run(agent, "ls -A ."))["output"]
    assert (await run(agent, "cat a.txt"))["output"] == "alpha\n"
    data = await run(agent, "git status")
    assert data["exit_code"] == 0 and "a.txt" in data["output"], data
    data = await run(agent, "python3 -c 'import json, ssl, sqlite3; print(json.dumps([1]))'")
    assert data["output"] == "[1]\n", data
    data = await run(agent, f"{rg} -c alpha a.txt")
    assert data["output"] == "1\n", data
