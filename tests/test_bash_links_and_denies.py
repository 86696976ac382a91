"""Hard links in the sandbox (ENV-13) and denies that follow their files (ENV-6, revision 3).

- A regular file with other hard links is kept read-only inside the
  sandbox (and cannot be renamed or moved away), unless the per-call walk saw
  every one of its names in a writable root and none is protected or denied.
- A read-denied path cannot become readable by renaming it or any of its
  ancestors, within one call or across calls: the mask is a mount point and
  every ancestor inside a write root is pinned (bound onto itself), so the
  rename fails with EBUSY. The same for the files a wildcard deny names, so
  none can be carried below the walk's depth. Other names of a denied inode
  are hidden too.

Real bwrap through the real pipeline; every adversarial test checks the side
effect on the host (content, inode, location) and has a control.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from test_bash_support import ALLOW_ALL, Lab, arity, assert_ran, bash_manifest

pytestmark = [pytest.mark.bwrap, pytest.mark.anyio, pytest.mark.timeout(120)]

SECRET = "deny-follows-3a7e91\n"
SHELL = [
    *(arity(c, n) for c in ("cat", "tee", "mv", "ln", "cp", "rm") for n in (1, 2)),
    arity("mkdir", 2),
]
DEEP = "a/b/c/d/e/f/g/h/i"  # below a walk bounded at 8 levels
SHALLOW_WALK = {"walk_depth": 8}  # DEEP lies beyond this walk (the default reaches 32 levels)


async def run(agent: Any, command: str) -> dict[str, Any]:
    return assert_ran(await agent.call("bash", {"command": command}))


def inode(p: Path) -> tuple[int, int]:
    st = os.stat(p)
    return st.st_ino, st.st_nlink


# -- hard links that already exist -------------------------------------------------------


async def test_tee_through_a_hard_link_to_an_outside_file_changes_nothing(agent_for: Callable[..., Any], lab: Lab) -> None:
    target = lab.outside / "target.txt"
    os.link(target, lab.ws / "hl")
    before = inode(target)
    agent = agent_for(SHELL)
    data = await run(agent, "tee hl")
    assert data["exit_code"] != 0 and "Read-only file system" in data["output"], data
    for command in ("rm hl", "mv hl moved", "cp a.txt hl"):  # neither replaced nor moved out of the walk's sight
        assert (await run(agent, command))["exit_code"] != 0, command
    assert target.read_text() == "original\n" and inode(target) == before
    # Control: an ordinary file beside it is written.
    assert (await run(agent, "tee sub/plain"))["exit_code"] == 0 and (lab.ws / "sub" / "plain").exists()


async def test_a_hard_link_cannot_be_carried_below_the_walk(agent_for: Callable[..., Any], lab: Lab) -> None:
    target = lab.outside / "target.txt"
    os.link(target, lab.ws / "sub" / "hl")
    agent = agent_for(SHELL, limits=SHALLOW_WALK)
    assert (await run(agent, f"mkdir -p {DEEP}"))["exit_code"] == 0
    data = await run(agent, f"mv sub {DEEP}/sub")
    # `sub` is pinned (busy), and what lies beyond the walk is read-only besides.
    assert data["exit_code"] != 0 and ("busy" in data["output"].lower() or "Read-only" in data["output"]), data
    assert (lab.ws / "sub" / "hl").exists() and not (lab.ws / DEEP / "sub").exists()
    assert (await run(agent, "tee sub/hl"))["exit_code"] != 0
    assert target.read_text() == "original\n"


async def test_links_wholly_inside_the_workspace_stay_writable(agent_for: Callable[..., Any], lab: Lab) -> None:
    """A link the sandbox itself made (both names in the write root) is provably harmless there."""
    agent = agent_for(SHELL)
    assert (await run(agent, "ln a.txt sub/twin"))["exit_code"] == 0
    assert inode(lab.ws / "a.txt")[1] == 2
    data = await run(agent, "tee sub/twin")  # next call: the walk sees both names
    assert data["exit_code"] == 0, data
    assert (lab.ws / "a.txt").read_text() == ""  # tee with no input truncated the shared inode
    assert (await run(agent, "rm sub/twin"))["exit_code"] == 0


async def test_a_link_to_a_protected_file_is_kept_read_only(agent_for: Callable[..., Any], lab: Lab) -> None:
    (lab.ws / ".bashrc").write_text("# rc\n")
    os.link(lab.ws / ".bashrc", lab.ws / "innocent.txt")
    data = await run(agent_for(SHELL), "tee innocent.txt")
    assert data["exit_code"] != 0, data
    assert (lab.ws / ".bashrc").read_text() == "# rc\n"


async def test_a_new_link_to_a_file_outside_the_roots_cannot_be_made(agent_for: Callable[..., Any], lab: Lab) -> None:
    for view in ("minimal", "full"):
        data = await run(agent_for(SHELL, sandbox_view=view), f"ln {lab.outside}/target.txt hl")
        assert data["exit_code"] != 0, (view, data)
        assert not (lab.ws / "hl").exists()
        expected = "Invalid cross-device link" if view == "full" else "No such file or directory"
        assert expected in data["output"], (view, data)


# -- a deny follows its file ---------------------------------------------------------------


def deny_read(pattern: str) -> list[dict[str, str]]:
    return [*ALLOW_ALL, {"permission": "fs.read", "pattern": pattern, "action": "deny"}]


@pytest.fixture
def config(lab: Lab) -> Path:
    (lab.ws / "config").mkdir()
    (lab.ws / "config" / "secret.txt").write_text(SECRET)
    (lab.ws / "config" / "other.txt").write_text("other\n")
    return lab.ws / "config"


async def test_renaming_the_parent_of_a_denied_file_fails_across_calls(make_agent: Callable[..., Any], lab: Lab, config: Path) -> None:
    manifest = {**bash_manifest(SHELL, rules=deny_read("config/secret.txt")), "tools": ["bash", "read"]}
    agent = make_agent(lab.ws, manifest, engine_kwargs={"watchdog": "default"})
    data = await run(agent, "mv config c2")
    assert data["exit_code"] != 0 and "busy" in data["output"].lower(), data
    assert (config / "secret.txt").read_text() == SECRET and not (lab.ws / "c2").exists()
    for path in ("c2/secret.txt", "config/secret.txt"):
        data = await run(agent, f"cat {path}")
        assert SECRET.strip() not in data["output"], (path, data)
    env = await agent.call("read", {"path": "config/secret.txt"})  # the rule still names where the file is
    assert env.refusal is not None and env.refusal["code"] == "denied"
    assert (await agent.call("read", {"path": "c2/secret.txt"})).error_code == "not_found"
    assert (await run(agent, "cat config/other.txt"))["output"] == "other\n"  # its neighbours stay readable


async def test_renaming_within_one_call_shows_nothing_either(agent_for: Callable[..., Any], lab: Lab, config: Path) -> None:
    data = await run(agent_for(SHELL, rules=deny_read("config/secret.txt")), "mv config c2; cat c2/secret.txt; cat config/secret.txt")
    assert SECRET.strip() not in data["output"], data
    assert (config / "secret.txt").read_text() == SECRET


async def test_control_without_the_deny_the_rename_carries_the_file(agent_for: Callable[..., Any], lab: Lab, config: Path) -> None:
    agent = agent_for(SHELL)
    assert (await run(agent, "mv config c2"))["exit_code"] == 0
    assert (await run(agent, "cat c2/secret.txt"))["output"] == SECRET


async def test_a_denied_file_cannot_be_linked_or_copied_out(agent_for: Callable[..., Any], lab: Lab, config: Path) -> None:
    agent = agent_for(SHELL, rules=deny_read("config/secret.txt"))
    data = await run(agent, "ln config/secret.txt sub/x")
    assert data["exit_code"] != 0 and "Invalid cross-device link" in data["output"], data
    assert not (lab.ws / "sub" / "x").exists()
    await run(agent, "cp config/secret.txt sub/y")
    assert SECRET not in (lab.ws / "sub" / "y").read_text()  # the copy is of the mask: empty
    assert (await run(agent, "mv config/secret.txt sub/z"))["exit_code"] != 0
    assert (config / "secret.txt").read_text() == SECRET


async def test_another_name_of_a_denied_file_is_hidden_too(agent_for: Callable[..., Any], lab: Lab, config: Path) -> None:
    os.link(config / "secret.txt", lab.ws / "sub" / "twin.txt")
    data = await run(agent_for(SHELL, rules=deny_read("config/secret.txt")), "cat sub/twin.txt")
    assert SECRET.strip() not in data["output"], data
    # Control: without the deny the twin shows the content.
    assert (await run(agent_for(SHELL), "cat sub/twin.txt"))["output"] == SECRET


@pytest.mark.parametrize(("pattern", "name"), [("**/vault/**", "vault"), ("**/*.secret", "keys")])
async def test_wildcard_denied_files_cannot_be_moved_below_the_walk(agent_for: Callable[..., Any], lab: Lab, pattern: str, name: str) -> None:
    d = lab.ws / name
    d.mkdir()
    (d / "k.secret").write_text(SECRET)
    agent = agent_for(SHELL, rules=deny_read(pattern))
    assert (await run(agent, f"mkdir -p {DEEP}"))["exit_code"] == 0  # within the default walk: it only shows the pins hold
    data = await run(agent, f"mv {name} {DEEP}/{name}")
    assert data["exit_code"] != 0 and "busy" in data["output"].lower(), data
    for path in (f"{DEEP}/{name}/k.secret", f"{name}/k.secret"):
        assert SECRET.strip() not in (await run(agent, f"cat {path}"))["output"], path
    assert (d / "k.secret").read_text() == SECRET and not (lab.ws / DEEP / name).exists()


async def test_a_walk_that_stops_at_a_bound_while_hunting_read_denies_refuses_the_call(agent_for: Callable[..., Any], lab: Lab) -> None:
    """Fail closed (ENV-6): a denied file beyond the walk cannot be masked, so the command does not run at all."""
    deep = lab.ws / DEEP / "vault"
    deep.mkdir(parents=True)
    (deep / "k.secret").write_text(SECRET)
    env = await agent_for(SHELL, rules=deny_read("**/vault/**"), limits=SHALLOW_WALK).call(
        "bash", {"command": f"cp {DEEP}/vault/k.secret leaked"})
    wire = env.to_dict()
    assert env.type == "error" and env.refusal == {**env.refusal, "layer": "environment", "code": "unavailable"}, wire
    assert "limits.walk_depth" in (env.error_text or "") and SECRET.strip() not in str(wire)
    assert not (lab.ws / "leaked").exists()  # the command never ran
    # The default bounds reach it: the call runs, and the directory is masked.
    data = await run(agent_for(SHELL, rules=deny_read("**/vault/**")), f"cat {DEEP}/vault/k.secret")
    assert SECRET.strip() not in data["output"] and data["exit_code"] != 0, data  # `vault/` is an empty directory there
    assert (deep / "k.secret").read_text() == SECRET


async def test_beyond_the_walk_depth_a_writable_tree_is_read_only(agent_for: Callable[..., Any], lab: Lab) -> None:
    """What the walk does not list may hold hard links to anywhere (a pnpm store): read-only for the call (ENV-13)."""
    deep = lab.ws / DEEP
    deep.mkdir(parents=True)
    target = lab.outside / "target.txt"
    os.link(target, deep / "hl")  # beyond the shallow walk: it cannot know the link leads outside
    (deep / "plain.txt").write_text("plain\n")
    agent = agent_for(SHELL, limits=SHALLOW_WALK)
    env = await agent.call("bash", {"command": f"tee -a {DEEP}/hl"})
    data = assert_ran(env)
    assert data["exit_code"] != 0 and "Read-only file system" in data["output"], data
    assert env.to_dict()["metadata"].get("walk_bounded", 0) >= 1, env.to_dict()
    assert target.read_text() == "original\n" and inode(target)[1] == 2
    assert (await run(agent, f"tee {DEEP}/plain.txt"))["exit_code"] != 0  # an ordinary file there too
    assert (deep / "plain.txt").read_text() == "plain\n"
    assert (await run(agent, "tee sub/shallow.txt"))["exit_code"] == 0  # within the walk: writable
    # Control: the default walk lists it all; the plain file is written, the link stays read-only.
    full = agent_for(SHELL)
    env = await full.call("bash", {"command": f"tee {DEEP}/plain.txt"})
    assert assert_ran(env)["exit_code"] == 0 and "walk_bounded" not in env.to_dict()["metadata"]
    assert (deep / "plain.txt").read_text() == ""
    assert (await run(full, f"tee -a {DEEP}/hl"))["exit_code"] != 0 and target.read_text() == "original\n"


async def test_beyond_the_walk_entry_bound_a_writable_tree_is_read_only(agent_for: Callable[..., Any], lab: Lab) -> None:
    target = lab.outside / "target.txt"
    os.link(target, lab.ws / "sub" / "hl")
    (lab.ws / "sub" / "plain.txt").write_text("plain\n")
    agent = agent_for(SHELL, limits={"walk_entries": 1})  # the top's listing alone passes it: `sub` is never listed
    env = await agent.call("bash", {"command": "tee -a sub/hl"})
    assert assert_ran(env)["exit_code"] != 0 and env.to_dict()["metadata"].get("walk_bounded", 0) >= 1, env.to_dict()
    assert (await run(agent, "tee sub/plain.txt"))["exit_code"] != 0
    assert target.read_text() == "original\n" and (lab.ws / "sub" / "plain.txt").read_text() == "plain\n"
    assert (await run(agent, "tee a.txt"))["exit_code"] == 0  # the top was listed: writable
    assert (lab.ws / "a.txt").read_text() == ""


async def test_a_write_root_that_is_a_hard_linked_file_is_read_only(make_agent: Callable[..., Any], lab: Lab) -> None:
    target = lab.outside / "target.txt"
    os.link(target, lab.ws / "notes.txt")
    manifest = bash_manifest(SHELL, write=(os.fspath(lab.ws / "notes.txt"),))
    agent = make_agent(lab.ws, manifest, engine_kwargs={"watchdog": "default"})
    data = await run(agent, "tee notes.txt")
    assert data["exit_code"] != 0 and "Read-only file system" in data["output"], data
    assert target.read_text() == "original\n"
    (lab.ws / "notes.txt").unlink()
    (lab.ws / "notes.txt").write_text("mine\n")  # control: the same root, one link only
    assert (await run(agent, "tee notes.txt"))["exit_code"] == 0
    assert (lab.ws / "notes.txt").read_text() == ""


async def test_many_hard_links_are_covered_by_read_only_directories(agent_for: Callable[..., Any], lab: Lab) -> None:
    """A pnpm-style tree: 200 files linked to an outside store. One mount per file would cost bwrap
    seconds; the directories holding them become read-only instead, the rest stays writable."""
    store = lab.outside / "store"
    store.mkdir()
    for i in range(200):
        pkg = lab.ws / "node_modules" / ".pnpm" / f"pkg{i // 10}" / "node_modules" / f"pkg{i // 10}"
        pkg.mkdir(parents=True, exist_ok=True)
        (store / f"f{i}").write_text("store\n")
        os.link(store / f"f{i}", pkg / f"f{i % 10}.js")
    agent = agent_for(SHELL)
    data = await run(agent, "tee node_modules/.pnpm/pkg3/node_modules/pkg3/f1.js")
    assert data["exit_code"] != 0 and "Read-only file system" in data["output"], data
    assert (await run(agent, "tee node_modules/.pnpm/pkg3/node_modules/pkg3/new.js"))["exit_code"] != 0  # the directory is covered whole
    assert (await run(agent, "tee node_modules/.pnpm/pkg3/new.js"))["exit_code"] == 0  # its parent is not
    assert all((store / f"f{i}").read_text() == "store\n" for i in range(200))
    assert (await run(agent, "tee sub/plain"))["exit_code"] == 0  # control: outside the cover


async def test_too_many_hard_links_at_the_top_freeze_the_root(agent_for: Callable[..., Any], lab: Lab) -> None:
    for i in range(70):
        (lab.outside / f"o{i}").write_text("store\n")
        os.link(lab.outside / f"o{i}", lab.ws / f"l{i}")
    agent = agent_for(SHELL)
    assert (await run(agent, "tee l1"))["exit_code"] != 0
    data = await run(agent, "tee sub/plain")  # fail closed: the whole root is read-only for this call
    assert data["exit_code"] != 0 and "Read-only file system" in data["output"], data
    assert (lab.outside / "o1").read_text() == "store\n"


@pytest.mark.parametrize("command", ["cat < hl", "tee > hl", "cat a.txt >> hl"])
async def test_redirections_to_or_from_a_hard_link_are_refused_before_running(agent_for: Callable[..., Any], lab: Lab, command: str) -> None:
    os.link(lab.outside / "target.txt", lab.ws / "hl")
    env = await agent_for([*SHELL, arity("cat", 0), arity("tee", 0)]).call("bash", {"command": command})
    assert env.refusal == {"layer": "capability", "code": "hard_link"}, env.to_dict()
    assert "original" not in str(env.to_dict())
    assert (lab.outside / "target.txt").read_text() == "original\n"
