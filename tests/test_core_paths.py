"""Capability layer, paths: traversal, prefixes, symlinks, case, metacharacters, protected files, races.

Every call goes through `Engine.call` against real files and symlinks; the
race tests call the runtime surface (`ScopedFS`) and `open_nofollow` directly
after swapping a component for a symlink.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentcore.errors import ToolFailure
from agentcore.paths import PathRefused, canonicalize, is_within, open_nofollow, open_parent_nofollow
from agentcore.runtime import ScopedFS

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

SECRET = "TOP-SECRET-OUTSIDE"


@pytest.fixture
def tree(tmp_path: Path, make_workspace: Callable[..., Path]) -> dict[str, Path]:
    """ws (the workspace), ws_evil (a sibling sharing its prefix) and outside."""
    ws = make_workspace("ws", {"a.txt": "alpha\n", "sub/b.txt": "beta\n", "src/m.py": "x = 1\n"})
    evil = make_workspace("ws_evil", {"x.txt": SECRET + "\n"})
    out = make_workspace("outside", {"secret.txt": SECRET + "\n", "sub/b.txt": SECRET + "\n"})
    return {"ws": ws, "evil": evil, "out": out, "tmp": Path(os.path.realpath(tmp_path))}


def refusal(env: Any) -> tuple[str, str]:
    assert env.type == "error", env.to_dict()
    assert env.refusal is not None, env.to_dict()
    return env.refusal["layer"], env.refusal["code"]


def assert_refused(env: Any, *codes: str) -> None:
    layer, code = refusal(env)
    assert layer == "capability", env.to_dict()
    assert code in codes, env.to_dict()
    assert SECRET not in (env.error_text or "")


def snapshot(root: Path) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames + dirnames:
            p = Path(dirpath) / name
            out[os.fspath(p.relative_to(root))] = p.read_bytes() if p.is_file() and not p.is_symlink() else b"<dir>"
    return out


# -- unit: containment and canonicalisation ------------------------------------------


@pytest.mark.parametrize(
    ("path", "root", "inside"),
    [
        ("/ws", "/ws", True),
        ("/ws/a", "/ws", True),
        ("/ws_evil", "/ws", False),
        ("/ws_evil/a", "/ws", False),
        ("/wsa", "/ws", False),
        ("/w", "/ws", False),
        ("/", "/ws", False),
        ("/anything", "/", True),
    ],
)
def test_is_within_is_component_wise(path: str, root: str, inside: bool) -> None:
    assert is_within(path, root) is inside


def test_canonicalize_refuses_empty_and_nul(tree: dict[str, Path]) -> None:
    for raw in ("", "a\x00b", "\x00"):
        with pytest.raises(PathRefused):
            canonicalize(raw, tree["ws"])


def test_canonicalize_missing_tail_is_appended(tree: dict[str, Path]) -> None:
    ws = tree["ws"]
    assert canonicalize("new/dir/f.txt", ws) == ws / "new" / "dir" / "f.txt"
    assert canonicalize("./sub/./c.txt", ws) == ws / "sub" / "c.txt"
    with pytest.raises(PathRefused) as exc:
        canonicalize("missing/../../outside/secret.txt", ws)
    assert exc.value.code == "unresolvable"


# -- traversal and prefix confusion ----------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        "../outside/secret.txt",
        "sub/../../outside/secret.txt",
        "./../ws/../outside/secret.txt",
        "../../../../../../../../../etc/passwd",
        "../ws_evil/x.txt",
        "sub/../../ws_evil/x.txt",
        "{ws}/../outside/secret.txt",
        "{tmp}/ws_evil/x.txt",
        "{tmp}/ws/../ws_evil/x.txt",
        "nosuchdir/../../outside/secret.txt",
    ],
)
async def test_traversal_and_prefix_confusion_refused(tree: dict[str, Path], make_agent: Callable[..., Any], raw: str) -> None:
    agent = make_agent(tree["ws"])
    path = raw.format(ws=tree["ws"], tmp=tree["tmp"])
    before_out, before_evil = snapshot(tree["out"]), snapshot(tree["evil"])
    assert_refused(await agent.call("read", {"path": path}), "out_of_scope", "unresolvable")
    assert_refused(await agent.call("write", {"path": path, "content": "pwned"}), "out_of_scope", "unresolvable")
    assert_refused(await agent.call("edit", {"path": path, "old_string": "TOP", "new_string": "X"}), "out_of_scope", "unresolvable")
    assert_refused(await agent.call("grep", {"pattern": "SECRET", "path": path}), "out_of_scope", "unresolvable")
    assert snapshot(tree["out"]) == before_out and snapshot(tree["evil"]) == before_evil


@pytest.mark.parametrize("raw", ["sub/../a.txt", "./a.txt", "sub/./../sub/../a.txt", "{ws}/sub/../a.txt", "{ws}//a.txt"])
async def test_dotdot_that_stays_inside_is_allowed(tree: dict[str, Path], make_agent: Callable[..., Any], raw: str) -> None:
    agent = make_agent(tree["ws"])
    env = await agent.call("read", {"path": raw.format(ws=tree["ws"])})
    assert env.ok, env.to_dict()
    assert env.data["content"] == "alpha\n"
    assert env.data["path"] == os.fspath(tree["ws"] / "a.txt")


# -- symlinks ---------------------------------------------------------------------


async def test_symlink_inside_to_outside_file(tree: dict[str, Path], make_agent: Callable[..., Any]) -> None:
    ws, out = tree["ws"], tree["out"]
    os.symlink(out / "secret.txt", ws / "link.txt")
    os.symlink("../outside/secret.txt", ws / "rel_link.txt")
    agent = make_agent(ws)
    before = snapshot(out)
    for name in ("link.txt", "rel_link.txt"):
        assert_refused(await agent.call("read", {"path": name}), "out_of_scope")
        assert_refused(await agent.call("write", {"path": name, "content": "pwned"}), "out_of_scope")
        assert_refused(await agent.call("edit", {"path": name, "old_string": "TOP", "new_string": "X"}), "out_of_scope")
    assert snapshot(out) == before
    assert (ws / "link.txt").is_symlink()


async def test_symlink_inside_to_outside_dir(tree: dict[str, Path], make_agent: Callable[..., Any]) -> None:
    ws, out = tree["ws"], tree["out"]
    os.symlink(out, ws / "linkdir")
    agent = make_agent(ws)
    before = snapshot(out)
    assert_refused(await agent.call("read", {"path": "linkdir/secret.txt"}), "out_of_scope")
    assert_refused(await agent.call("write", {"path": "linkdir/new.txt", "content": "x"}), "out_of_scope")
    assert_refused(await agent.call("write", {"path": "linkdir/deep/new.txt", "content": "x"}), "out_of_scope")
    assert_refused(await agent.call("write", {"path": "linkdir/secret.txt", "content": "x"}), "out_of_scope")
    assert_refused(await agent.call("glob", {"pattern": "*", "path": "linkdir"}), "out_of_scope")
    assert snapshot(out) == before


async def test_symlink_outside_to_inside_resolves_to_inside(tree: dict[str, Path], make_agent: Callable[..., Any]) -> None:
    ws, out = tree["ws"], tree["out"]
    os.symlink(ws / "a.txt", out / "to_inside.txt")
    os.symlink(ws / "sub", out / "to_inside_dir")
    agent = make_agent(ws)
    env = await agent.call("read", {"path": os.fspath(out / "to_inside.txt")})
    assert env.ok and env.data["content"] == "alpha\n"
    assert env.data["path"] == os.fspath(ws / "a.txt")  # the subject is the canonical inside path
    env = await agent.call("read", {"path": os.fspath(out / "to_inside_dir" / "b.txt")})
    assert env.ok and env.data["path"] == os.fspath(ws / "sub" / "b.txt")
    env = await agent.call("write", {"path": os.fspath(out / "to_inside_dir" / "c.txt"), "content": "c"})
    assert env.ok and (ws / "sub" / "c.txt").read_text() == "c"

    # A rule on the inside path applies whatever path the model used to reach it.
    denied = make_agent(
        ws, rules=[{"permission": "read", "pattern": "{workspace}/a.txt", "action": "deny"}, {"permission": "*", "pattern": "*", "action": "allow"}]
    )
    env = await denied.call("read", {"path": os.fspath(out / "to_inside.txt")})
    assert refusal(env)[0] == "permission"


@pytest.mark.parametrize("kind", ["pair", "self", "dir_component", "chain"])
async def test_symlink_loops_refused(tree: dict[str, Path], make_agent: Callable[..., Any], kind: str) -> None:
    ws = tree["ws"]
    if kind == "pair":
        os.symlink("loop2", ws / "loop1")
        os.symlink("loop1", ws / "loop2")
        target = "loop1"
    elif kind == "self":
        os.symlink("self", ws / "self")
        target = "self"
    elif kind == "dir_component":
        os.symlink("loopdir", ws / "loopdir")
        target = "loopdir/x.txt"
    else:
        os.symlink("c2", ws / "c1")
        os.symlink("c3", ws / "c2")
        os.symlink("c1", ws / "c3")
        target = "c1/deeper/file.txt"
    agent = make_agent(ws)
    before = snapshot(ws)
    assert_refused(await agent.call("read", {"path": target}), "unresolvable")
    assert_refused(await agent.call("write", {"path": target, "content": "x"}), "unresolvable")
    assert_refused(await agent.call("edit", {"path": target, "old_string": "a", "new_string": "b"}), "unresolvable")
    assert snapshot(ws) == before


@pytest.mark.parametrize(
    ("link", "target", "write_path", "must_not_exist"),
    [
        ("dangle", "{out}/nothing.txt", "dangle", "{out}/nothing.txt"),
        ("dangle_rel", "../outside/nothing2.txt", "dangle_rel", "{out}/nothing2.txt"),
        ("dangle_in", "{ws}/missing_target.txt", "dangle_in", "{ws}/missing_target.txt"),
        ("dangle_dir", "{out}/newdir", "dangle_dir/x.txt", "{out}/newdir"),
        ("dangle_dir2", "{out}/newdir2", "dangle_dir2/a/b/x.txt", "{out}/newdir2"),
    ],
)
async def test_write_through_dangling_symlink_refused(
    tree: dict[str, Path], make_agent: Callable[..., Any], link: str, target: str, write_path: str, must_not_exist: str
) -> None:
    ws, out = tree["ws"], tree["out"]
    fmt = {"out": out, "ws": ws}
    os.symlink(target.format(**fmt), ws / link)
    agent = make_agent(ws)
    before = snapshot(out)
    assert_refused(await agent.call("write", {"path": write_path, "content": "pwned"}), "unresolvable")
    assert_refused(await agent.call("read", {"path": write_path}), "unresolvable")
    assert not os.path.lexists(must_not_exist.format(**fmt))
    assert snapshot(out) == before


# -- case variants (Linux is case-sensitive) --------------------------------------


def _case_variant(p: Path) -> str:
    return os.fspath(p.parent / p.name.upper())


async def test_case_variant_of_workspace_refused(tree: dict[str, Path], make_agent: Callable[..., Any]) -> None:
    ws = tree["ws"]
    agent = make_agent(ws)
    upper = _case_variant(ws)  # .../WS
    # The variant does not exist yet: nothing may be created there.
    assert_refused(await agent.call("read", {"path": upper + "/a.txt"}), "out_of_scope")
    assert_refused(await agent.call("write", {"path": upper + "/new.txt", "content": "x"}), "out_of_scope")
    assert not os.path.lexists(upper)
    # Now it exists as a different directory: still a different path.
    Path(upper).mkdir()
    Path(upper, "a.txt").write_text(SECRET)
    assert_refused(await agent.call("read", {"path": upper + "/a.txt"}), "out_of_scope")
    assert_refused(await agent.call("write", {"path": upper + "/a.txt", "content": "x"}), "out_of_scope")
    assert Path(upper, "a.txt").read_text() == SECRET


async def test_case_variant_inside_scope_patterns(tree: dict[str, Path], make_agent: Callable[..., Any]) -> None:
    ws = tree["ws"]
    (ws / "SRC").mkdir()
    (ws / "SRC" / "up.py").write_text("UP\n")
    agent = make_agent(ws, read=["{workspace}/src/**"], write=["{workspace}/src/**"])
    assert (await agent.call("read", {"path": "src/m.py"})).ok
    assert_refused(await agent.call("read", {"path": "SRC/up.py"}), "out_of_scope")
    assert_refused(await agent.call("read", {"path": "Src/m.py"}), "out_of_scope")
    assert_refused(await agent.call("write", {"path": "SRC/new.py", "content": "x"}), "out_of_scope")
    assert_refused(await agent.call("write", {"path": "sRc/new.py", "content": "x"}), "out_of_scope")
    assert not (ws / "sRc").exists()


# -- glob metacharacters in the workspace path ------------------------------------


@pytest.mark.parametrize("name", ["ws[1]*?", "w*", "ws[!x]", "ws{a,b}"])
async def test_metacharacters_in_workspace_path(make_workspace: Callable[..., Path], make_agent: Callable[..., Any], name: str) -> None:
    ws = make_workspace(name, {"a.txt": "inside\n", "docs/d.md": "doc needle\n", "secret.txt": "hidden needle\n"})
    siblings = {
        "ws[1]*?": ["ws1x", "ws1ab", "ws[1]*?x"],
        "w*": ["wx", "w", "ws"],
        "ws[!x]": ["wsa", "ws!"],
        "ws{a,b}": ["wsa", "wsb"],
    }[name]
    sib_paths = [make_workspace(s, {"secret.txt": SECRET + " needle\n"}) for s in siblings]
    agent = make_agent(ws, rules=[{"permission": "read", "pattern": "{workspace}/secret.txt", "action": "deny"}, {"permission": "*", "pattern": "*", "action": "allow"}])
    assert agent.engine.manifest.workspace == ws
    assert (await agent.call("read", {"path": "a.txt"})).data["content"] == "inside\n"
    for sib in sib_paths:
        assert_refused(await agent.call("read", {"path": os.fspath(sib / "secret.txt")}), "out_of_scope")
        assert_refused(await agent.call("write", {"path": os.fspath(sib / "new.txt"), "content": "x"}), "out_of_scope")
        assert not (sib / "new.txt").exists()
    # The escaped rule still matches the literal path inside the workspace.
    assert refusal(await agent.call("read", {"path": "secret.txt"}))[0] == "permission"
    env = await agent.call("glob", {"pattern": "**/*"})
    assert env.ok, env.to_dict()
    assert env.data["paths"] == [os.fspath(ws / "a.txt"), os.fspath(ws / "docs" / "d.md")]
    env = await agent.call("grep", {"pattern": "needle"})
    assert env.ok, env.to_dict()
    assert [m["path"] for m in env.data["matches"]] == [os.fspath(ws / "docs" / "d.md")]
    # A relative pattern is anchored at the (escaped) workspace too.
    rel = make_agent(ws, read=["docs/**"], write=[])
    assert (await rel.call("read", {"path": "docs/d.md"})).ok
    assert_refused(await rel.call("read", {"path": "a.txt"}), "out_of_scope")
    for sib in sib_paths:
        assert_refused(await rel.call("read", {"path": os.fspath(sib / "secret.txt")}), "out_of_scope")


# -- relative patterns, dir/**, narrower write scope -------------------------------


async def test_relative_patterns_anchor_at_workspace(tree: dict[str, Path], make_agent: Callable[..., Any]) -> None:
    ws = tree["ws"]
    (ws / "README.md").write_text("readme\n")
    (ws / "srcx").mkdir()
    (ws / "srcx" / "m.py").write_text("no\n")
    agent = make_agent(ws, read=["src/**", "README.md"], write=["src/*.py"])
    assert (await agent.call("read", {"path": "src/m.py"})).ok
    assert (await agent.call("read", {"path": os.fspath(ws / "README.md")})).ok
    assert_refused(await agent.call("read", {"path": "a.txt"}), "out_of_scope")
    assert_refused(await agent.call("read", {"path": "srcx/m.py"}), "out_of_scope")
    assert (await agent.call("write", {"path": "src/n.py", "content": "n\n"})).ok
    assert_refused(await agent.call("write", {"path": "src/deep/n.py", "content": "n\n"}), "out_of_scope")
    assert_refused(await agent.call("write", {"path": "src/n.txt", "content": "n\n"}), "out_of_scope")
    eff = agent.engine.manifest.effective
    assert eff.can_read(os.fspath(ws / "src" / "m.py")) and not eff.can_read(os.fspath(tree["out"] / "src" / "m.py"))


async def test_dir_double_star_covers_dir_itself(tree: dict[str, Path], make_agent: Callable[..., Any]) -> None:
    ws = tree["ws"]
    agent = make_agent(ws, read=["{workspace}/src/**"], write=["{workspace}/src/**"])
    eff = agent.engine.manifest.effective
    assert eff.can_read(os.fspath(ws / "src"))
    assert eff.can_read(os.fspath(ws / "src" / "a" / "b" / "c"))
    assert not eff.can_read(os.fspath(ws / "srcx"))
    assert not eff.can_read(os.fspath(ws))
    env = await agent.call("read", {"path": "src"})
    assert env.error_code == "is_directory"  # passed the capability check, failed as a directory
    env = await agent.call("glob", {"pattern": "*", "path": "src"})
    assert env.ok and env.data["paths"] == [os.fspath(ws / "src" / "m.py")]


async def test_write_scope_narrower_than_read_scope(tree: dict[str, Path], make_agent: Callable[..., Any]) -> None:
    ws = tree["ws"]
    agent = make_agent(ws, read=["{workspace}/**"], write=["{workspace}/out/**"])
    assert (await agent.call("read", {"path": "a.txt"})).ok
    assert_refused(await agent.call("write", {"path": "a.txt", "content": "x"}), "out_of_scope")
    assert_refused(await agent.call("edit", {"path": "a.txt", "old_string": "alpha", "new_string": "x"}), "out_of_scope")
    assert_refused(await agent.call("write", {"path": "newdir/x.txt", "content": "x"}), "out_of_scope")
    assert not (ws / "newdir").exists()
    assert (ws / "a.txt").read_text() == "alpha\n"
    env = await agent.call("write", {"path": "out/deep/er/f.txt", "content": "f"})
    assert env.ok, env.to_dict()
    assert (ws / "out" / "deep" / "er" / "f.txt").read_text() == "f"


async def test_no_write_scope_is_empty_scope(tree: dict[str, Path], make_agent: Callable[..., Any]) -> None:
    agent = make_agent(tree["ws"], write=[])
    assert_refused(await agent.call("write", {"path": "a.txt", "content": "x"}), "empty_scope")


# -- protected files ----------------------------------------------------------------


@pytest.mark.parametrize(
    "rel",
    [
        ".git/hooks/pre-commit",
        ".git/hooks/x",
        ".git/config",
        ".git/info/attributes",
        ".bashrc",
        "sub/.bashrc",
        ".gitmodules",
        ".gitconfig",
        ".profile",
        ".vscode/settings.json",
        ".agentcore/rules.yaml",
        "sub/.git/hooks/post-checkout",
    ],
)
@pytest.mark.parametrize("exists", [True, False])
async def test_protected_files_refused_for_write_and_edit(
    tree: dict[str, Path], make_agent: Callable[..., Any], rel: str, exists: bool
) -> None:
    ws = tree["ws"]
    target = ws / rel
    if exists:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("original\n")
    agent = make_agent(ws)
    assert_refused(await agent.call("write", {"path": rel, "content": "evil\n"}), "protected")
    assert_refused(await agent.call("edit", {"path": rel, "old_string": "original", "new_string": "evil"}), "protected")
    if exists:
        assert target.read_text() == "original\n"
        assert (await agent.call("read", {"path": rel})).ok  # protection is about writing only
    else:
        assert not target.exists()


async def test_manifest_file_itself_is_protected(tree: dict[str, Path], make_agent: Callable[..., Any], write_manifest: Callable[..., Path], manifest_data: Callable[..., dict]) -> None:
    ws = tree["ws"]
    mpath = write_manifest(manifest_data(), directory=ws, name="agent")
    original = mpath.read_bytes()
    os.symlink(mpath, ws / "m-link.yaml")
    agent = make_agent(ws, mpath)
    for raw in ("agent.yaml", os.fspath(mpath), "m-link.yaml", "sub/../agent.yaml"):
        assert_refused(await agent.call("write", {"path": raw, "content": "name: pwned\n"}), "protected")
        assert_refused(await agent.call("edit", {"path": raw, "old_string": "allow", "new_string": "deny"}), "protected")
    assert mpath.read_bytes() == original
    assert (ws / "m-link.yaml").is_symlink()


# -- a symlink swapped in after the check ------------------------------------------


@pytest.fixture
def scoped(tree: dict[str, Path], make_agent: Callable[..., Any]) -> tuple[Any, Callable[[str], ScopedFS]]:
    agent = make_agent(tree["ws"])
    return agent, lambda tool: ScopedFS(agent.engine.manifest, agent.session, tool)


def _swap_dir_for_link(real: Path, target: Path) -> None:
    real.rename(real.with_name(real.name + ".moved"))
    os.symlink(target, real)


async def test_swapped_directory_component_open_read(tree: dict[str, Path], scoped: Any) -> None:
    _, make_fs = scoped
    ws, out = tree["ws"], tree["out"]
    canonical = canonicalize("sub/b.txt", ws)
    fs = make_fs("read")
    fd = fs.open_read(canonical)  # fine before the swap
    os.close(fd)
    _swap_dir_for_link(ws / "sub", out / "sub")
    with pytest.raises(ToolFailure) as exc:
        fs.open_read(canonical)
    assert exc.value.code == "symlink_race"
    with pytest.raises(ToolFailure) as exc:
        fs.read_bytes(canonical, 1 << 20)
    assert exc.value.code == "symlink_race"


async def test_swapped_final_component_open_read(tree: dict[str, Path], scoped: Any) -> None:
    _, make_fs = scoped
    ws, out = tree["ws"], tree["out"]
    canonical = canonicalize("a.txt", ws)
    (ws / "a.txt").unlink()
    os.symlink(out / "secret.txt", ws / "a.txt")
    with pytest.raises(ToolFailure) as exc:
        make_fs("read").open_read(canonical)
    assert exc.value.code == "symlink_race"


@pytest.mark.parametrize("rel", ["sub/b.txt", "sub/new.txt"])
async def test_swapped_directory_component_write_atomic(tree: dict[str, Path], scoped: Any, rel: str) -> None:
    _, make_fs = scoped
    ws, out = tree["ws"], tree["out"]
    canonical = canonicalize(rel, ws)
    _swap_dir_for_link(ws / "sub", out / "sub")
    before = snapshot(out)
    with pytest.raises(ToolFailure) as exc:
        make_fs("write").write_atomic(canonical, b"pwned")
    assert exc.value.code == "symlink_race"
    assert snapshot(out) == before


async def test_swapped_final_component_write_atomic(tree: dict[str, Path], scoped: Any) -> None:
    _, make_fs = scoped
    ws, out = tree["ws"], tree["out"]
    canonical = canonicalize("a.txt", ws)
    (ws / "a.txt").unlink()
    os.symlink(out / "secret.txt", ws / "a.txt")
    before = snapshot(out)
    with pytest.raises(ToolFailure) as exc:
        make_fs("write").write_atomic(canonical, b"pwned")
    assert exc.value.code == "symlink_race"
    assert snapshot(out) == before
    assert (ws / "a.txt").is_symlink()


async def test_open_nofollow_refuses_links_met_after_the_check(tree: dict[str, Path]) -> None:
    """The lowest layer: even without the re-check, a symlink on the way is never followed."""
    ws, out = tree["ws"], tree["out"]
    file_path = canonicalize("sub/b.txt", ws)
    os.close(open_nofollow(file_path, os.O_RDONLY))
    _swap_dir_for_link(ws / "sub", out / "sub")
    for call in (
        lambda: open_nofollow(file_path, os.O_RDONLY),
        lambda: open_parent_nofollow(file_path),  # the swapped component is the last one opened
        lambda: open_nofollow(file_path.parent, os.O_RDONLY | os.O_DIRECTORY),
        lambda: open_nofollow(file_path, os.O_WRONLY | os.O_CREAT, 0o644),
    ):
        with pytest.raises(PathRefused) as exc:
            call()
        assert exc.value.code == "symlink_race"
    (ws / "a.txt").unlink()
    os.symlink(out / "secret.txt", ws / "a.txt")
    with pytest.raises(PathRefused) as exc:
        open_nofollow(ws / "a.txt", os.O_RDONLY)
    assert exc.value.code == "symlink_race"
    assert (out / "sub" / "b.txt").read_text() == SECRET + "\n"
