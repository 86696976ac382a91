"""Where a host path leads and what is there, reused while the directories the answer depends on are unchanged.

Every sandbox plan asks the same questions again: which of some thirty secret
files exist (`/etc/shadow`, `~/.ssh`, ...), where the write and read roots
really are, which user areas to empty. Asked afresh they cost about 60 path
lookups a call, and right after a sandbox has exited (its mount namespace is
still being torn down) each lookup costs several times what it does at rest:
a fifth of the pipeline's own time on `bash true`.

An answer about a path with no symbolic link on the way depends only on the
entries of its existing ancestors: the name it has in each of them, and the
absence of the first missing one. A directory's entries cannot change without
its change time (ctime) moving, and no process can set a ctime back
(`timestamps`). So an answer is kept with the identity and times of those
directories, taken *before* it was looked up (a change made meanwhile shows
as a difference next time), and reused while each of them is the same; a
directory whose ctime is too recent to tell a later change apart, or that
cannot be examined, keeps the answer from being kept at all. A path through a
symbolic link is always looked up afresh (its target's directories would
need watching too): an ancestor that is a link is never watched, and a path
that is itself a link is never kept, even one `realpath` leaves as it is (a
loop of links, whose last link may lie in a directory nobody watches and lead
somewhere real next time). Nor is an answer kept when the path could not be
examined for a reason that may pass (an I/O error, a network share timing
out): only a path found, found missing (ENOENT, ENOTDIR) or out of reach
(EACCES, which the modes of the watched directories decide) is. Mounting
over a path changes neither its existence nor its type; mounting over one of
its ancestors changes that ancestor's identity. The answer is what a fresh lookup would give.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from ..timestamps import recent

DirState = tuple[int, int, int, int]  # (st_dev, st_ino, st_mtime_ns, st_ctime_ns)
_MEMO_MAX = 4096
_STOP = (-1, -1, -1, -1)  # missing, or not a directory: its parent's entries already say so
# Why a path may be missing for as long as its directories stay the same. Any other error (EIO, ETIMEDOUT,
# ESTALE, ENOMEM...) may be gone next call: kept, it would leave an existing secret unmasked call after call.
_LASTING = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EACCES})


@dataclass(frozen=True)
class Fact:
    """What a lookup of one absolute, normalised path found."""

    real: Path  # os.path.realpath
    lexists: bool  # the path itself exists (a dangling link counts)
    exists: bool  # it leads somewhere (links followed)
    is_dir: bool  # it leads to a directory
    is_file: bool  # it leads to a regular file


_memo: dict[str, tuple[Fact, tuple[tuple[str, DirState], ...]]] = {}
_GROUPS_MAX = 64
_groups: dict[tuple[Path, ...], tuple[tuple[Fact | None, ...], tuple[tuple[str, DirState], ...]]] = {}


def _ancestors(p: str) -> list[str]:
    """`/a/b/c` -> `/`, `/a`, `/a/b`."""
    if p == "/":
        return []
    out = ["/"]
    i = p.find("/", 1)
    while i != -1:
        out.append(p[:i])
        i = p.find("/", i + 1)
    return out


def _look(p: str) -> Fact:
    return _lookup(p)[0]


def _lookup(p: str) -> tuple[Fact, bool]:
    """The fact, and whether it may be kept: the path is no symbolic link (a loop of links is one that
    `realpath` leaves unchanged) and what was found lasts while its directories do (`_LASTING`)."""
    real = os.path.realpath(p)
    try:
        st = os.lstat(p)
    except OSError as e:
        return Fact(Path(real), False, False, False, False), e.errno in _LASTING
    if not stat.S_ISLNK(st.st_mode):
        return Fact(Path(real), True, True, stat.S_ISDIR(st.st_mode), stat.S_ISREG(st.st_mode)), True
    try:
        st = os.stat(p)
    except OSError:
        return Fact(Path(real), True, False, False, False), False
    return Fact(Path(real), True, True, stat.S_ISDIR(st.st_mode), stat.S_ISREG(st.st_mode)), False


class Observation:
    """Lookups made at one moment: each directory is examined at most once, each path answered at most once."""

    def __init__(self, now_ns: int | None = None) -> None:
        self._now = time.time_ns() if now_ns is None else now_ns  # a later `now_ns` (tests) counts every time as settled
        self._states: dict[str, DirState | None] = {}
        self._facts: dict[str, Fact] = {}

    def fact(self, p: Path | str) -> Fact:
        key = os.fspath(p)
        got = self._facts.get(key)
        if got is None:
            hit = _memo.get(key)
            if hit is not None and all(self._state(d) == s for d, s in hit[1]):
                got = hit[0]
            else:
                got = self._fresh(key)
            self._facts[key] = got
        return got

    def facts(self, paths: tuple[Path, ...]) -> tuple[Fact, ...]:
        """`fact` of each path; a set asked again (the thirty secret files of every plan) is checked as a whole,
        each directory once, rather than path by path."""
        hit = _groups.get(paths)
        if hit is not None and all(self._state(d) == s for d, s in hit[1]):
            return tuple(self.fact(p) if f is None else f for p, f in zip(paths, hit[0]))
        got = tuple(self.fact(p) for p in paths)
        kept: list[Fact | None] = []
        watched: dict[str, DirState] = {}
        for p, f in zip(paths, got):
            entry = _memo.get(os.fspath(p))
            if entry is None or entry[0] != f:
                kept.append(None)  # looked up afresh every time (a link on the way, or a directory not settled)
                continue
            kept.append(f)
            for d, state in entry[1]:
                if watched.setdefault(d, state) != state:
                    return got  # kept at different moments: not one consistent set
        if len(_groups) >= _GROUPS_MAX:
            _groups.clear()
        _groups[paths] = (tuple(kept), tuple(watched.items()))
        return got

    def real(self, p: Path | str) -> Path:
        return self.fact(p).real

    def _fresh(self, p: str) -> Fact:
        watched = self._watch(p)  # before the lookup: a change made during it shows next time
        fact, lasting = _lookup(p)
        if watched is not None and lasting and os.fspath(fact.real) == p:
            if len(_memo) >= _MEMO_MAX:
                _memo.clear()
            _memo[p] = (fact, watched)
        else:
            _memo.pop(p, None)
        return fact

    def _watch(self, p: str) -> tuple[tuple[str, DirState], ...] | None:
        """The states of `p`'s existing ancestors, down to the first one missing; None when one cannot tell."""
        if not p.startswith("/") or os.path.normpath(p) != p:
            return None
        out: list[tuple[str, DirState]] = []
        for d in _ancestors(p):
            state = self._state(d)
            if state is None:
                return None
            if state == _STOP:
                break
            out.append((d, state))
        return tuple(out)

    def _state(self, d: str) -> DirState | None:
        if d in self._states:
            return self._states[d]
        try:
            st = os.lstat(d)  # not followed: `realpath` takes a link it cannot examine (EIO) for a directory
        except (FileNotFoundError, NotADirectoryError):
            state: DirState | None = _STOP
        except OSError:
            state = None  # cannot be examined (EACCES, EIO...): never reused
        else:
            if stat.S_ISLNK(st.st_mode):
                state = None  # a path through it depends on where it leads: never kept
            elif not stat.S_ISDIR(st.st_mode):
                state = _STOP
            elif recent(st.st_ctime_ns, self._now):
                state = None
            else:
                state = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
        self._states[d] = state
        return state


def clear() -> None:
    """Forget every kept answer (tests comparing with fresh lookups)."""
    _memo.clear()
    _groups.clear()
