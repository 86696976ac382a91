"""Hard links and the file tools (CAP-13): a regular file with more than one link is unprovable.

The path of such a file may lie in scope while another name of the same
inode lies anywhere: `read` would show that other file, `write`/`edit` and a
redirection would change it (or, for the atomic rename, leave it holding the
old content under a name the agent was shown). Every file tool refuses it
with layer `capability` and code `hard_link`; `grep` never prints its lines;
`glob` still lists its name (a name in scope reveals nothing of the inode).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentcore.watchdog import Verdict, WatchdogCall

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

SECRET = "outside-secret-4f1c\n"


@pytest.fixture
def linked(tmp_path: Path, make_workspace: Callable[..., Path]) -> tuple[Path, Path]:
    """(workspace, outside file) with `ws/hl` a hard link to the outside file and `ws/plain.txt` a control."""
    ws = make_workspace("ws", {"plain.txt": SECRET})
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "secret.txt"
    target.write_text(SECRET)
    os.link(target, ws / "hl")
    return ws, target


def refused(env: Any) -> None:
    d = env.to_dict()
    assert env.type == "error", d
    assert d["metadata"]["refusal"] == {"layer": "capability", "code": "hard_link"}, d
    assert "outside-secret" not in str(d)


def unchanged(target: Path, ws: Path) -> None:
    st = os.stat(target)
    assert target.read_text() == SECRET
    assert st.st_nlink == 2 and os.stat(ws / "hl").st_ino == st.st_ino  # still the same inode, not replaced


async def test_read_of_a_hard_link_is_refused(linked: tuple[Path, Path], make_agent: Callable[..., Any]) -> None:
    ws, _target = linked
    agent = make_agent(ws)
    refused(await agent.call("read", {"path": "hl"}))
    refused(await agent.call("read", {"path": "hl", "byte_offset": 0}))
    control = await agent.call("read", {"path": "plain.txt"})
    assert control.ok and control.data["content"] == SECRET


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("write", {"path": "hl", "content": "pwned\n"}),
        ("edit", {"path": "hl", "old_string": "outside", "new_string": "pwned"}),
        ("edit", {"path": "hl", "old_string": "outside", "new_string": "pwned", "replace_all": True}),
    ],
)
async def test_write_and_edit_of_a_hard_link_are_refused(linked: tuple[Path, Path], make_agent: Callable[..., Any], tool: str, args: dict[str, Any]) -> None:
    ws, target = linked
    refused(await make_agent(ws).call(tool, args))
    unchanged(target, ws)


async def test_write_would_otherwise_only_replace_the_workspace_name(linked: tuple[Path, Path], make_agent: Callable[..., Any]) -> None:
    """Control for the rule: once the outside name is gone the file is an ordinary one and is written."""
    ws, target = linked
    target.unlink()
    env = await make_agent(ws).call("write", {"path": "hl", "content": "mine\n"})
    assert env.ok, env.to_dict()
    assert (ws / "hl").read_text() == "mine\n"


async def test_a_link_between_two_workspace_files_is_refused_too(make_workspace: Callable[..., Path], make_agent: Callable[..., Any]) -> None:
    ws = make_workspace("ws", {"a.txt": "alpha\n"})
    os.link(ws / "a.txt", ws / "b.txt")
    agent = make_agent(ws)
    for tool, args in (("read", {"path": "b.txt"}), ("write", {"path": "a.txt", "content": "x"}), ("edit", {"path": "a.txt", "old_string": "alpha", "new_string": "beta"})):
        env = await agent.call(tool, args)
        assert env.to_dict()["metadata"]["refusal"]["code"] == "hard_link", (tool, env.to_dict())
    assert (ws / "a.txt").read_text() == "alpha\n"


async def test_directories_are_not_hard_links(make_workspace: Callable[..., Path], make_agent: Callable[..., Any]) -> None:
    ws = make_workspace("ws", {"d/sub/f.txt": "found\n"})
    assert os.stat(ws / "d").st_nlink > 1
    env = await make_agent(ws).call("grep", {"pattern": "found", "path": "d"})
    assert env.ok and env.data["total"] == 1


async def test_grep_never_prints_lines_of_a_hard_link(linked: tuple[Path, Path], make_agent: Callable[..., Any]) -> None:
    ws, _target = linked
    agent = make_agent(ws)
    for args in ({"pattern": "outside-secret"}, {"pattern": "outside-secret", "glob": "*"}):
        env = await agent.call("grep", args)
        assert env.ok, env.to_dict()
        # The control file with the same line is found; the linked one is not.
        assert [m["path"] for m in env.data["matches"]] == [os.fspath(ws / "plain.txt")], env.data
    refused(await agent.call("grep", {"pattern": "outside-secret", "path": "hl"}))


async def test_grep_past_the_head_keeps_hard_links_out_of_the_sidecar(linked: tuple[Path, Path], make_agent: Callable[..., Any]) -> None:
    ws, _target = linked
    for i in range(5):
        (ws / f"f{i}.txt").write_text(SECRET)
    env = await make_agent(ws, limits={"grep_matches": 2}).call("grep", {"pattern": "outside-secret"})
    assert env.ok and env.truncated
    sidecar = Path(env.to_dict()["metadata"]["output_path"]).read_text()
    assert env.data["total"] == 6 and sidecar.count("\n") == 6
    assert "/hl:" not in sidecar


async def test_glob_lists_the_name_of_a_hard_link(linked: tuple[Path, Path], make_agent: Callable[..., Any]) -> None:
    ws, _target = linked
    env = await make_agent(ws).call("glob", {"pattern": "*"})
    assert env.ok and os.fspath(ws / "hl") in env.data["paths"]


class LinkAfterCheck:
    """Allows everything, and gives the file a second name after the capability check (the race `open` must catch)."""

    def __init__(self, victim: Path, other: Path) -> None:
        self.victim, self.other = victim, other

    async def review(self, call: WatchdogCall) -> Verdict:
        os.link(self.victim, self.other)
        return Verdict("allow")


@pytest.mark.parametrize(("tool", "args"), [("read", {"path": "v.txt"}), ("write", {"path": "v.txt", "content": "x"})])
async def test_a_link_made_after_the_check_is_refused_at_use(
    make_workspace: Callable[..., Path], tmp_path: Path, engine: Callable[..., Any], open_session: Callable[..., Any], tool: str, args: dict[str, Any]
) -> None:
    ws = make_workspace("ws", {"v.txt": "victim\n"})
    other = tmp_path / "elsewhere.txt"
    eng = engine(ws, watchdog=LinkAfterCheck(ws / "v.txt", other))
    refused(await eng.call(open_session(eng), tool, args))
    assert other.read_text() == "victim\n" and os.stat(other).st_ino == os.stat(ws / "v.txt").st_ino
