"""The per-call walk: protected names below writable roots, files wildcard read denies name (ENV-6, ENV-7)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentcore.environments.calltree import WalkBounded, scan
from agentcore.environments.denies import READ_DENY_PERMISSIONS, WRITE_DENY_PERMISSIONS, manifest_denies
from agentcore.rules.model import Rule, compile_rules
from agentcore.variables import Bindings
from clock_support import early_in_a_second


def denies(ws: Path, *patterns: str, permission: str = "read", action: str = "deny", writes: bool = False) -> tuple:
    rules = [Rule(permission, p, action, scope="manifest", index=i) for i, p in enumerate(patterns)]
    return manifest_denies(compile_rules(rules, Bindings.for_workspace(ws)), WRITE_DENY_PERMISSIONS if writes else READ_DENY_PERMISSIONS).wildcard


def test_protected_names_below_writable_roots_only(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "sub" / ".git" / "hooks").mkdir(parents=True)
    (ws / "sub" / ".vscode").mkdir()
    (ws / ".bashrc").write_text("")  # the top of a root is the policy's job, not the walk's
    (ws / "ro" / "deep").mkdir(parents=True)
    (ws / "ro" / "deep" / ".envrc").write_text("")
    found = scan([ws / "sub"], [ws], denies(ws, "**/*.pem"))
    assert set(found.protected) == {
        ws / "sub" / ".git",  # the whole repository (ENV-7); the three below are kept for older callers
        ws / "sub" / ".git" / "hooks", ws / "sub" / ".git" / "config", ws / "sub" / ".git" / "info" / "attributes", ws / "sub" / ".vscode",
    }  # nothing outside the writable root, even below a read root that holds it


def test_wildcard_denies_name_files_and_whole_directories(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "a" / "private" / "x").mkdir(parents=True)
    (ws / "a" / "private" / "x" / "k.txt").write_text("k")
    (ws / "a" / "cert.pem").write_text("p")
    (ws / "a" / "cert.pem.txt").write_text("not a pem")
    (ws / "b.pem").mkdir()  # a directory the file pattern names: not hidden (its contents are not denied)
    os.symlink(ws / "a" / "cert.pem", ws / "link.pem")  # never followed, never mounted over
    found = scan([], [ws], denies(ws, "**/*.pem", "**/private/**", "{workspace}/literal.txt", "*"))
    assert set(found.denied) == {ws / "a" / "cert.pem", ws / "a" / "private"}
    # Only deny rules on reading count; an allow or an ask, or a write deny, hides nothing.
    assert scan([], [ws], denies(ws, "**/*.pem", action="ask")).denied == ()
    assert scan([], [ws], denies(ws, "**/*.pem", permission="fs.write")).denied == ()
    assert scan([], [ws], []).denied == ()  # no denies: the read roots are not even walked


def test_the_walk_is_bounded_and_fails_closed(tmp_path: Path) -> None:
    """ENV-6: hunting read denies, a walk cut short is an error; otherwise what it left unlisted is read-only."""
    ws = tmp_path / "ws"
    deep = ws.joinpath(*[f"d{i}" for i in range(12)])
    deep.mkdir(parents=True)
    (deep / "far.pem").write_text("")
    (ws / "near.pem").write_text("")
    assert set(scan([], [ws], denies(ws, "**/*.pem"), max_depth=32).denied) == {ws / "near.pem", deep / "far.pem"}
    for bounds in ({"max_depth": 8}, {"max_entries": 1}):
        with pytest.raises(WalkBounded, match="limits.walk_entries or limits.walk_depth"):
            scan([], [ws], denies(ws, "**/*.pem"), **bounds)
    # Writable and nothing to hunt: the unlisted directories are read-only (covered), the listed ones are not.
    found = scan([ws], max_depth=8)
    assert found.bounded == 1 and found.linked == (ws.joinpath(*[f"d{i}" for i in range(9)]),) and found.frozen == ()
    found = scan([ws], max_entries=1)
    assert found.bounded == 1 and found.linked == (ws / "d0",)
    assert scan([ws], max_depth=32).bounded == 0 and scan([ws], max_depth=32).linked == ()
    # A second root never listed at all is read-only whole.
    other = tmp_path / "other"
    (other / "o1").mkdir(parents=True)
    (other / "o2").write_text("")  # whichever root is listed first passes the bound alone
    found = scan([ws, other], max_entries=1)
    assert found.frozen in ((ws,), (other,)) and found.bounded >= 1


NAMES = st.sampled_from(["a", "b.pem", "c.key", "private", "x.txt", ".env", "n", ".github", ".vscode", "pyvenv.cfg", ".git"])


def _build(ws: Path, tree: list[list[str]]) -> None:
    """Files at the given paths, skipping any that would need a file as a directory."""
    for parts in tree:
        target = ws.joinpath(*parts)
        if any(p.is_file() for p in [ws.joinpath(*parts[:i]) for i in range(1, len(parts))]) or target.is_dir():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            target.write_text("x")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tree=st.lists(st.lists(NAMES, min_size=1, max_size=4), max_size=12))
@pytest.mark.parametrize("writable", [False, True])
def test_denied_files_match_a_brute_force_walk(tmp_path_factory, tree: list[list[str]], writable: bool) -> None:  # type: ignore[no-untyped-def]
    """Wherever a file lies (in a protected directory or an environment too; only `.git` is not entered),
    and whether the root is writable or not, the walk finds what a plain walk finds."""
    ws = tmp_path_factory.mktemp("ws")
    _build(ws, tree)
    rules = denies(ws, "**/*.pem", "**/.env", "**/private/**")
    got = set(scan([ws] if writable else [], [ws], rules).denied)
    want: set[Path] = set()
    for dirpath, dirnames, filenames in os.walk(ws):
        d = Path(dirpath)
        if any(p in want for p in [d, *d.parents]) or ".git" in d.relative_to(ws).parts:
            continue
        for name in dirnames:
            if name == "private":
                want.add(d / name)
        for name in filenames:
            if name.endswith(".pem") or name == ".env" or (name == "private"):
                want.add(d / name)
    assert got == want


def test_wildcard_write_denies_keep_existing_files_read_only(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "gen" / "out").mkdir(parents=True)
    (ws / "a.lock").write_text("")
    (ws / "sub").mkdir()
    (ws / "sub" / "b.lock").write_text("")
    (ws / "c.txt").write_text("")
    write = denies(ws, "**/*.lock", "**/gen/**", permission="fs.write", writes=True)
    found = scan([ws], [ws], (), write)
    assert {ws / "a.lock", ws / "sub" / "b.lock", ws / "gen"} <= set(found.protected)
    assert ws / "c.txt" not in found.protected and found.denied == ()
    # Outside a writable root everything is read-only already: nothing to add.
    assert scan([], [ws], denies(ws, "**/*.pem"), write).protected == ()


def test_literal_and_relative_denies_are_the_policys(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    rules = compile_rules(
        [Rule("read", ".env", "deny", scope="manifest"), Rule("read", "secrets/**", "deny", scope="manifest", index=1),
         Rule("fs.write", "{workspace}/locked.txt", "deny", scope="manifest", index=2), Rule("read", "*", "deny", scope="manifest", index=3)],
        Bindings.for_workspace(ws),
    )
    assert manifest_denies(rules, READ_DENY_PERMISSIONS).literal == (ws / ".env", ws / "secrets")
    assert manifest_denies(rules, WRITE_DENY_PERMISSIONS).literal == (ws / "locked.txt",)
    assert manifest_denies(rules, READ_DENY_PERMISSIONS).wildcard == ()


# -- hard links (ENV-13) ------------------------------------------------------------------


def test_hard_links_not_wholly_inside_the_writable_roots_are_kept(tmp_path: Path) -> None:
    ws, out = tmp_path / "ws", tmp_path / "out"
    (ws / "d").mkdir(parents=True)
    out.mkdir()
    (out / "o").write_text("o")
    os.link(out / "o", ws / "d" / "to_out")  # one name outside: kept
    (ws / "a").write_text("a")
    os.link(ws / "a", ws / "d" / "a2")  # both names inside: writable
    (ws / "p").write_text("p")
    os.link(ws / "p", ws / "d" / "p2")  # one name protected by the policy: both kept (except the protected one, already read-only)
    (ws / "plain").write_text("x")
    found = scan([ws], protected_paths=[ws / "p"])
    assert set(found.linked) == {ws / "d" / "to_out", ws / "d" / "p2"} and found.frozen == ()
    # A read-only area's names count as "elsewhere": the writable name is kept.
    assert set(scan([ws / "d"], [ws]).linked) >= {ws / "d" / "a2"}


def test_other_names_of_a_denied_file_are_hidden(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "secret").write_text("s")
    os.link(ws / "secret", ws / "sub" / "twin")
    found = scan([ws], denied_paths=[ws / "secret"])
    assert found.denied == (ws / "sub" / "twin",) and found.linked == ()
    # In a read-only workspace too (the walk looks there because a denied file has links).
    assert scan([], [ws], denied_paths=[ws / "secret"]).denied == (ws / "sub" / "twin",)
    # And for a file a wildcard deny names.
    assert set(scan([ws], [ws], denies(ws, "**/secret")).denied) == {ws / "secret", ws / "sub" / "twin"}


def test_directories_never_count_as_hard_links(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "a" / "b" / "c").mkdir(parents=True)
    assert os.stat(ws / "a").st_nlink > 1
    assert scan([ws]).linked == ()


PATHS = st.lists(st.lists(st.sampled_from("abcdef"), min_size=1, max_size=5), min_size=1, max_size=60)


@settings(max_examples=200, deadline=None)
@given(paths=PATHS, cap=st.integers(min_value=1, max_value=8))
def test_cover_covers_everything_within_the_cap_and_never_a_root(paths: list[list[str]], cap: int) -> None:
    from agentcore.environments.calltree import cover

    roots = [Path("/r1"), Path("/r2")]
    files = sorted({roots[len(p) % 2].joinpath(*p, "f") for p in paths})
    targets, frozen = cover(files, roots, cap)
    assert len(targets) <= cap
    for f in files:
        if not any(r in f.parents for r in frozen):
            assert any(t == f or t in f.parents for t in targets), f
    for t in targets:
        assert t not in roots and any(r in t.parents for r in roots)
    if not frozen:
        assert cover(files, roots, len(files)) == (files, [])  # within the cap nothing is widened


def _settle(root: Path) -> None:
    """Wait until every directory under `root` changed long enough ago that its ctime would tell a later
    change apart (`timestamps.recent`): a tree nobody touched for a while. ctime cannot be dated back."""
    import time

    from agentcore.timestamps import settling_ns

    stamps = [os.lstat(d).st_ctime_ns for d, _dirs, _files in os.walk(root)]
    wait_ns = max(s + settling_ns(s) for s in stamps) - time.time_ns()
    if wait_ns >= 0:
        time.sleep(wait_ns / 1e9 + 0.01)


def test_reused_links_match_a_fresh_walk_until_a_directory_changes(tmp_path: Path) -> None:
    from agentcore.environments import calltree

    ws, out = tmp_path / "ws", tmp_path / "out"
    (ws / "a" / "b").mkdir(parents=True)
    out.mkdir()
    (out / "o").write_text("o")
    os.link(out / "o", ws / "a" / "to_out")
    (ws / "a" / "b" / "plain").write_text("p")
    _settle(ws)
    calltree._cache.clear()
    first = scan([ws])
    assert first.linked == (ws / "a" / "to_out",) and calltree._cache  # a settled tree is remembered
    assert scan([ws]) == first
    # A new name anywhere in the walk changes a directory: the links are looked at again.
    os.link(ws / "a" / "b" / "plain", ws / "twin")
    (out / "o2").write_text("x")
    os.link(out / "o2", ws / "a" / "b" / "late")
    again = scan([ws])
    assert set(again.linked) == {ws / "a" / "to_out", ws / "a" / "b" / "late"}
    calltree._cache.clear()
    assert scan([ws]) == again


def test_links_are_reused_while_the_names_are_unchanged_whatever_the_ctimes(tmp_path: Path) -> None:
    """ENV-13: the groups depend on which names the tree gives each inode, so a directory whose ctime moved
    without a net change of names (bwrap's mount points, a scratch file) does not make every file lstat'ed
    again; a net change of names, even in a directory other than the file's, does."""
    from agentcore.environments import calltree

    ws, out = tmp_path / "ws", tmp_path / "out"
    (ws / "a").mkdir(parents=True)
    (ws / "b").mkdir()
    out.mkdir()
    (out / "o").write_text("o")
    os.link(out / "o", ws / "a" / "x")
    (ws / "a" / "y").write_text("y")
    calltree._cache.clear()
    first = scan([ws])
    assert first.linked == (ws / "a" / "x",)
    kept = next(iter(calltree._cache.values()))[1]
    (ws / "a" / ".scratch").write_text("")  # made and removed: ctime moved, names as they were
    (ws / "a" / ".scratch").unlink()
    assert scan([ws]) == first and next(iter(calltree._cache.values()))[1] is kept  # reused, not recomputed
    os.link(ws / "a" / "y", out / "z")  # from outside the walk, names in it unchanged: not noticed (SPEC ENV-13)
    assert scan([ws]) == first
    os.link(ws / "a" / "y", ws / "b" / "twin")  # a new name in another directory: looked at again
    assert set(scan([ws]).linked) == {ws / "a" / "x", ws / "a" / "y", ws / "b" / "twin"}  # y's third name is outside
    (ws / "b" / "twin").unlink()
    assert set(scan([ws]).linked) == {ws / "a" / "x", ws / "a" / "y"}
    (out / "z").unlink()
    os.rename(ws / "a" / "y", ws / "b" / "y")  # names changed: y has one link again
    assert scan([ws]).linked == (ws / "a" / "x",)


# -- directory listings reused between walks (ctime-keyed) -------------------------------------------

OLDER_THAN_VOLATILE_S = 0.06  # the listings' ctimes must be older than timestamps.FINE_NS (50 ms) to be reused

MUTATION = st.tuples(st.sampled_from(["file", "dir", "remove", "rename", "utime"]), st.lists(NAMES, min_size=1, max_size=3))


def _mutate(ws: Path, kind: str, parts: list[str]) -> None:
    import shutil

    target = ws.joinpath(*parts)
    parent = target.parent
    if any(p.is_file() for p in [parent, *parent.parents] if ws in p.parents):
        return
    parent.mkdir(parents=True, exist_ok=True)
    if kind == "file" and not target.exists():
        target.write_text("y")
    elif kind == "dir" and not target.exists():
        target.mkdir()
    elif kind == "remove" and target.exists():
        shutil.rmtree(target) if target.is_dir() else target.unlink()
    elif kind == "rename" and target.exists():
        target.rename(parent / (target.name + ".pem"))
    elif kind == "utime":
        # A command setting a directory's mtime back after changing it: ctime still moves, so it is seen.
        before = os.stat(parent)
        (parent / "planted.pem").write_text("z")
        os.utime(parent, ns=(before.st_atime_ns, before.st_mtime_ns))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tree=st.lists(st.lists(NAMES, min_size=1, max_size=4), max_size=12), mutations=st.lists(MUTATION, max_size=4))
def test_a_walk_reusing_listings_finds_what_a_fresh_walk_finds(tmp_path_factory, tree, mutations) -> None:  # type: ignore[no-untyped-def]
    """Walk, let the listings age past the volatile window, change the tree (including a changed directory
    whose mtime is set back), walk again: the result equals a walk with every listing forgotten."""
    import time

    from agentcore.environments import calltree

    ws = tmp_path_factory.mktemp("ws")
    _build(ws, tree)
    reads, writes = denies(ws, "**/*.pem", "**/private/**"), denies(ws, "**/*.lock", writes=True)

    def walk() -> object:
        return scan([ws], [ws], reads, writes)

    time.sleep(OLDER_THAN_VOLATILE_S)  # the tree's age is what makes its listings reusable
    walk()
    assert calltree._listings  # remembered
    for kind, parts in mutations:
        _mutate(ws, kind, parts)
    reused = walk()
    calltree._listings.clear()
    assert reused == walk()


def test_listings_are_reused_only_while_a_directory_keeps_its_ctime(tmp_path: Path) -> None:
    import time

    from agentcore.environments import calltree

    ws = tmp_path / "ws"
    (ws / "a" / "b").mkdir(parents=True)
    (ws / "a" / "b" / "f.txt").write_text("x")
    reads = denies(ws, "**/*.pem")
    time.sleep(OLDER_THAN_VOLATILE_S)
    calltree._listings.clear()
    assert scan([ws], [ws], reads).denied == ()
    listed = next(iter(calltree._listings.values()))
    assert all(v.ident is not None for v in listed.values())  # old enough: every listing may be reused
    before = os.stat(ws / "a" / "b")
    (ws / "a" / "b" / "key.pem").write_text("secret")
    os.utime(ws / "a" / "b", ns=(before.st_atime_ns, before.st_mtime_ns))  # the mtime set back
    assert scan([ws], [ws], reads).denied == (ws / "a" / "b" / "key.pem",)
    # Just listed, within the volatile window: not reusable next time, whatever its ctime then.
    listed = next(iter(calltree._listings.values()))
    assert listed[os.fspath(ws / "a" / "b")].ident is None


def test_listings_are_kept_for_a_few_configurations_least_recently_walked_first_out(tmp_path: Path) -> None:
    from agentcore.environments import calltree

    calltree._listings.clear()
    roots = []
    for i in range(calltree._LISTINGS_MAX + 1):
        root = tmp_path / f"ws{i}"
        root.mkdir()
        roots.append(root)
    for root in roots[:-1]:
        scan([root])
    scan([roots[0]])  # walked again: now the most recent
    scan([roots[-1]])  # one configuration too many: the least recently walked one goes
    kept = {cfg[0] for cfg in calltree._listings}
    assert len(calltree._listings) == calltree._LISTINGS_MAX
    assert (os.fspath(roots[0]),) in kept and (os.fspath(roots[1]),) not in kept and (os.fspath(roots[-1]),) in kept


def test_a_filesystem_that_keeps_seconds_cannot_hide_a_denied_file(whole_second_fs: Path) -> None:
    """On ext4 with 128-byte inodes a file made in the same second as the directory's last change leaves
    its ctime as the previous walk saw it: that listing is not reused, and the new file is denied."""

    from agentcore.environments import calltree

    ws = whole_second_fs / "ws"
    (ws / "sub").mkdir(parents=True)
    reads = denies(ws, "**/*.pem")
    calltree._listings.clear()
    same_second = 0
    for attempt in range(3):
        early_in_a_second()
        (ws / "sub" / f"x{attempt}").write_text("x")
        scan([ws], [ws], reads)
        stamp = os.lstat(ws / "sub").st_ctime_ns
        (ws / "sub" / f"key{attempt}.pem").write_text("secret")
        same_second += os.lstat(ws / "sub").st_ctime_ns == stamp
        assert ws / "sub" / f"key{attempt}.pem" in scan([ws], [ws], reads).denied
    assert same_second >= 1  # the case this test is about really happened
    calltree._listings.clear()


def test_an_environment_is_not_walked_for_what_the_guard_keeps_whole(tmp_path: Path) -> None:
    """A virtual environment is read-only whole in the sandbox (ENV-7 rule 3): the walk neither lists its
    thousands of entries nor mounts its hard-linked files (uv links every file from its cache) one by one;
    outside it, a hard link still counts."""
    ws, cache = tmp_path / "ws", tmp_path / "cache"
    site = ws / ".venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    cache.mkdir()
    (ws / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (site / "hook.pth").write_text("import os\n")
    for name in ("mod.py", "other.py"):
        (cache / name).write_text("x")
    os.link(cache / "mod.py", site / "mod.py")
    os.link(cache / "other.py", ws / "other.py")
    found = scan([ws])
    assert found.protected == () and found.linked == (ws / "other.py",)
    # With a read deny to look for, it is walked for that alone.
    (site / "key.pem").write_text("k")
    found = scan([ws], [ws], denies(ws, "**/*.pem"))
    assert found.denied == (site / "key.pem",) and found.linked == (ws / "other.py",)


def test_a_directory_the_walk_cannot_list_is_read_only_or_refused(tmp_path: Path) -> None:
    """`chmod 000` by one command must not hide a directory (and a hard link in it) from the next call's walk.
    The walk runs without the capabilities that let root list any directory (setpriv), as a user's would."""
    import json
    import shutil
    import subprocess
    import sys

    ws = tmp_path / "ws"
    (ws / "sub" / "locked").mkdir(parents=True)
    (ws / "sub" / "locked" / "k.pem").write_text("x")
    os.chmod(ws / "sub" / "locked", 0)
    code = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from agentcore.environments.calltree import WalkBounded, scan\n"
        "from test_env_calltree import denies\n"
        "ws = Path(sys.argv[1])\n"
        "found = scan([ws])\n"
        "try:\n"
        "    scan([], [ws], denies(ws, '**/*.pem'))\n"
        "    hunted = 'ran'\n"
        "except WalkBounded as exc:\n"
        "    hunted = str(exc)\n"
        "print(json.dumps({'bounded': found.bounded, 'linked': [str(p) for p in found.linked], 'hunted': hunted}))\n"
    )
    prefix = []
    if os.getuid() == 0:
        setpriv = shutil.which("setpriv")
        assert setpriv, "setpriv (util-linux) is needed to run the walk without root's directory capabilities"
        prefix = [setpriv, "--bounding-set=-dac_override,-dac_read_search"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent.parent / "src"), str(Path(__file__).parent)])}
    try:
        proc = subprocess.run([*prefix, sys.executable, "-c", code, str(ws)], capture_output=True, text=True, timeout=60,
                              env=env, check=False)
    finally:
        os.chmod(ws / "sub" / "locked", 0o755)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout)
    assert got["bounded"] == 1 and got["linked"] == [str(ws / "sub" / "locked")], got
    assert "cannot list" in got["hunted"], got
