"""Host path lookups kept between sandbox plans (`environments.hostfacts`): a kept answer is always the one a
fresh lookup gives, whatever changed in between, and nothing is kept that a change could leave looking the same."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentcore.environments import SandboxPolicy, bwrap, hostfacts
from agentcore.environments.hostfacts import Observation, _look

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
