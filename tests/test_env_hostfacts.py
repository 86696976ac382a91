"""Host path lookups kept between sandbox plans (`environments.hostfacts`): a kept answer is always the one a
fresh lookup gives, whatever changed in between, and nothing is kept that a change could leave looking the same."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentcore.environments import SandboxPolicy, bwrap, hostfacts
from agentcore.environments.hostfacts import Observation, _look
from agentcore.timestamps import recent

LATER = 10**19  # an observation "now" long after every stamp: every directory counts as settled
NAMES = ["a", "b", "c"]
REL = st.lists(st.sampled_from(NAMES), min_size=1, max_size=3).map("/".join)
STEP = st.tuples(st.sampled_from(["mkdir", "file", "link", "abslink", "remove", "rename"]), REL, REL)


@pytest.fixture
def root() -> Iterator[Path]:
    d = Path(os.path.realpath(tempfile.mkdtemp(prefix="hostfacts-", dir="/var/tmp")))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _clock_past(root: Path) -> None:
    """Wait until a change made now gets a later ctime than anything made so far: the stamps an
    observation kept can then no longer match a change made after it (the filesystem's clock moves in
    ticks, and two changes within one tick carry the same stamp)."""
    probe = root / ".probe"
    probe.touch()
    first = probe.stat().st_ctime_ns
    while probe.stat().st_ctime_ns == first:
        os.chmod(probe, 0o644)  # sets the ctime to the filesystem's clock now
    probe.unlink()
    later = root / ".probe2"
    later.touch()
    later.unlink()


def _apply(root: Path, step: tuple[str, str, str]) -> None:
    kind, rel, other = step
    p, q = root / rel, root / other
    try:
        if kind == "mkdir":
            p.mkdir()
        elif kind == "file":
            p.write_text("x")
        elif kind == "link":
            os.symlink(os.path.relpath(q, p.parent), p)
        elif kind == "abslink":
            os.symlink(q, p)
        elif kind == "remove":
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
        else:
            os.rename(p, q)
    except OSError:
        pass  # a step that does not apply to the tree as it is: the next observation is still checked


def _candidates(root: Path) -> list[str]:
    out = [str(root)]
    for a in NAMES:
        out.append(str(root / a))
        for b in NAMES:
            out.append(str(root / a / b))
            out += [str(root / a / b / c) for c in NAMES]
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(STEP, min_size=1, max_size=8))
def test_a_kept_answer_is_what_a_fresh_lookup_gives(root: Path, steps: list[tuple[str, str, str]]) -> None:
    for name in os.listdir(root):
        _apply(root, ("remove", name, name))
    hostfacts.clear()
    paths = _candidates(root)
    group = tuple(map(Path, paths))
    for step in [("mkdir", "a", "a"), *steps]:
        _apply(root, step)
        _clock_past(root)
        fresh = [_look(p) for p in paths]
        assert list(Observation(now_ns=LATER).facts(group)) == fresh, step  # the set as a whole
        obs = Observation(now_ns=LATER)
        for p, f in zip(paths, fresh):
            assert obs.fact(p) == f, (p, step)  # and path by path


def test_an_answer_is_kept_only_while_its_directories_are_settled(root: Path) -> None:
    (root / "etc").mkdir()
    target = str(root / "etc" / "shadow")
    assert Observation().fact(target).lexists is False
    assert target not in hostfacts._memo  # its directory just changed: a change in the same tick would look the same
    assert Observation(now_ns=LATER).fact(target).lexists is False
    assert target in hostfacts._memo
    _clock_past(root)
    (root / "etc" / "shadow").write_text("secret")
    assert Observation(now_ns=LATER).fact(target).lexists is True  # the directory's ctime moved: looked up again


def test_a_path_through_a_symbolic_link_is_looked_up_every_time(root: Path) -> None:
    (root / "run").mkdir()
    (root / "var").mkdir()
    (root / "var" / "run").symlink_to(root / "run")
    target = str(root / "var" / "run" / "secrets")
    assert Observation(now_ns=LATER).fact(target).real == root / "run" / "secrets"
    assert target not in hostfacts._memo
    (root / "run" / "secrets").mkdir()
    fact = Observation(now_ns=LATER).fact(target)
    assert fact.exists and fact.is_dir


def test_a_path_below_a_file_is_kept_on_the_files_directory(root: Path) -> None:
    (root / "f").write_text("x")
    target = str(root / "f" / "x")
    assert Observation(now_ns=LATER).fact(target) == _look(target)
    assert [d for d, _s in hostfacts._memo[target][1]][-1] == str(root)  # the file's directory says it is a file


def test_a_denied_path_appearing_outside_the_workspace_is_masked_at_the_next_plan(root: Path) -> None:
    ws, home = root / "ws", root / "home"
    ws.mkdir()
    home.mkdir()
    pol = SandboxPolicy(cwd=ws, write_roots=(ws,), read_denied=(home / ".netrc",), read_roots=(home,), protected=(),
                        env={"PATH": "/usr/bin:/bin"})
    before = bwrap.build_plan(pol).args
    assert str(home / ".netrc") not in before and before == bwrap._build_plan_uncached(pol).args
    (home / ".netrc").write_text("machine x password y")
    after = bwrap.build_plan(pol).args
    assert str(home / ".netrc") in after and after == bwrap._build_plan_uncached(pol).args
    # Settled: now kept, and still followed when it goes away again.
    _clock_past(root)
    bwrap.build_plan(pol)
    (home / ".netrc").unlink()
    assert str(home / ".netrc") not in bwrap.build_plan(pol).args


def test_a_kept_answer_costs_no_lookup_of_the_path_itself(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (root / "etc").mkdir()
    target = str(root / "etc" / "shadow")
    first = Observation(now_ns=LATER).fact(target)
    looked: list[str] = []
    monkeypatch.setattr(hostfacts, "_look", lambda p: looked.append(p) or _look(p))
    assert Observation(now_ns=LATER).fact(target) == first and looked == []  # only its directories were examined


def _settled(p: Path) -> None:
    """Wait until every directory on the way to `p` counts as settled by the real clock (an attacker can wait too)."""
    dirs = [d for d in map(Path, hostfacts._ancestors(str(p))) if d.is_dir()]
    deadline = time.monotonic() + 20
    while any(recent(d.stat().st_ctime_ns, time.time_ns()) for d in dirs):
        assert time.monotonic() < deadline, "the directories never settled"


def _policy(ws: Path, denied: Path) -> SandboxPolicy:
    return SandboxPolicy(cwd=ws, write_roots=(ws,), read_denied=(denied,), read_roots=(denied.parent,), protected=(),
                         env={"PATH": "/usr/bin:/bin"})


def _loop_of_links(root: Path) -> Path:
    """`ws/.env` -> `sub/l/.env` with `sub/l` -> `..`: a loop; `ws/d/.env` is where it leads once `l` is re-pointed."""
    ws = root / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "d").mkdir()
    (ws / "d" / ".env").write_text("machine x password y")
    (ws / ".env").symlink_to("sub/l/.env")
    (ws / "sub" / "l").symlink_to("..")
    return ws


def test_a_loop_of_links_is_looked_up_again_when_its_far_link_changes(root: Path) -> None:
    """`realpath` leaves a loop as it is: `.env` -> `sub/l/.env` with `sub/l` -> `..` looks like a path without a
    link. Re-pointing `sub/l` changes only `sub`, which no ancestor of `.env` is: the loop must not have been kept."""
    ws = _loop_of_links(root)
    target = str(ws / ".env")
    assert os.path.realpath(target) == target and not os.path.exists(target)
    assert Observation(now_ns=LATER).fact(target) == _look(target)
    (ws / "sub" / "l").unlink()
    (ws / "sub" / "l").symlink_to("../d")
    fact = Observation(now_ns=LATER).fact(target)
    assert fact == _look(target) and fact.is_file and fact.real == ws / "d" / ".env"


def test_a_loop_of_links_as_a_denied_path_is_masked_where_it_leads_now(root: Path) -> None:
    """The same with the real clock through the plan: the mask goes where the path leads at this call."""
    ws = _loop_of_links(root)
    pol = _policy(ws, ws / ".env")
    _settled(ws / ".env")
    bwrap.build_plan(pol)
    (ws / "sub" / "l").unlink()
    (ws / "sub" / "l").symlink_to("../d")
    _settled(ws / ".env")
    args = bwrap.build_plan(pol).args
    assert str(ws / "d" / ".env") in args and args == bwrap._build_plan_uncached(pol).args


def _failing_lstat(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    """`os.lstat` of `path` fails as a network share or a failing disk may, once (EIO)."""
    real_lstat = os.lstat

    def lstat(p: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if os.fspath(p) == str(path):
            raise OSError(errno.EIO, "Input/output error", os.fspath(p))
        return real_lstat(p, *args, **kwargs)

    monkeypatch.setattr(os, "lstat", lstat)


def test_a_path_that_could_not_be_examined_is_looked_up_again(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (root / "home").mkdir()
    secret = root / "home" / ".netrc"
    secret.write_text("machine x password y")
    _failing_lstat(monkeypatch, secret)
    assert Observation(now_ns=LATER).fact(secret).lexists is False  # what that lookup found
    monkeypatch.undo()
    assert Observation(now_ns=LATER).fact(secret) == _look(str(secret)) and secret.exists()


def test_a_denied_file_that_could_not_be_examined_once_is_masked_at_the_next_plan(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws, home = root / "ws", root / "home"
    ws.mkdir()
    home.mkdir()
    secret = home / ".netrc"
    secret.write_text("machine x password y")
    pol = _policy(ws, secret)
    _settled(secret)
    _failing_lstat(monkeypatch, secret)
    assert str(secret) not in bwrap.build_plan(pol).args  # that plan could not know
    monkeypatch.undo()
    args = bwrap.build_plan(pol).args
    assert str(secret) in args and args == bwrap._build_plan_uncached(pol).args


def test_a_link_on_the_way_is_never_watched_even_where_realpath_misses_it(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`realpath` takes a component it cannot lstat (EIO) for no link: the link itself must keep the answer from
    being kept, or the path would be kept as leading to itself."""
    (root / "real").mkdir()
    (root / "real" / "secret").write_text("x")
    (root / "lnk").symlink_to(root / "real")
    target = str(root / "lnk" / "secret")
    monkeypatch.setattr(os.path, "realpath", lambda p, **_kw: os.fspath(p))
    assert Observation(now_ns=LATER).fact(target).real == Path(target)  # what that lookup found
    monkeypatch.undo()
    fact = Observation(now_ns=LATER).fact(target)
    assert fact == _look(target) and fact.real == root / "real" / "secret"
