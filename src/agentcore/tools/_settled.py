"""Proof that what rg reported beneath its root was reached without a symlink (FILE-11).

rg runs on the host, started in the root the runtime opened, and opens what
lies beneath it by relative name. A directory or file another process swaps
for a symlink between rg's listing of its parent and rg's open of it is
followed, wherever it points; rg cannot be told not to. So what rg reports is
proven afterwards, from the root's descriptor and never by name:

- each component is reached with O_NOFOLLOW, so the path holds no symlink now;
- a component whose inode change time (ctime) is older than the search's start
  sat at that name all through the search: every way of putting an inode at a
  name (rename, RENAME_EXCHANGE, link, mkdir, create) sets that inode's ctime,
  so a swap and its undoing both mark what is there afterwards. A directory's
  ctime also moves when an entry is added to it or removed;
- what is not proven so ("changed") is taken as it is now: `glob` lists a
  name only if it is a regular file there now, and `grep` searches the file
  again through a descriptor opened without following links.

The start is the kernel's coarse clock, which is what it stamps inodes with;
a margin covers file systems that keep coarser times. Changes made in that
margin before the search only cost a second look.
"""

from __future__ import annotations

import os
import stat
import time
from typing import AnyStr

from ._rg import open_root

SETTLED, CHANGED, GONE = range(3)
_COARSE = getattr(time, "CLOCK_REALTIME_COARSE", 5)  # Linux's id; the clock inode times are taken from
_MARGIN_NS = 10_000_000  # a file system keeping times in units up to 10 ms
_SECONDS = 1_000_000_000
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class TreeProof:
    """The search root, opened once (rg is started in it), and the proof of the paths found beneath it."""

    def __init__(self, root: str) -> None:
        self.since = time.clock_gettime_ns(_COARSE) - _MARGIN_NS  # taken before any rg starts
        # A file system that keeps whole seconds (two, for FAT) stamps a later change with an earlier second.
        self.since_coarse = self.since - self.since % (2 * _SECONDS)
        self.fd = open_root(root)
        self._chain: list[tuple[str | bytes, int]] = []  # (relative dir, fd) along the last directory walked
        self._state: dict[str | bytes, int] = {}

    def close(self) -> None:
        self.forget()
        os.close(self.fd)

    def forget(self) -> None:
        """Drop the directories walked so far. A walk shows a directory sat at its name from the start until
        then, which says nothing about an rg that ran after it: call this once an rg has run, before `matched`."""
        for _rel, fd in self._chain:
            os.close(fd)
        self._chain = []
        self._state = {}

    def __enter__(self) -> TreeProof:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def settled(self, st: os.stat_result) -> bool:
        ns = st.st_ctime_ns
        return ns < (self.since_coarse if ns % _SECONDS == 0 else self.since)

    def listed(self, rels: list[AnyStr], dirs: set[bytes] | None = None) -> list[AnyStr]:
        """The names (relative, sorted) rg listed that are proven, or are regular files there now.

        `dirs`: the directories of the names, if already known (of these or of more names).
        """
        if not rels:
            return rels
        if dirs is None:
            dirs = {os.fsencode(rel.rpartition("/" if isinstance(rel, str) else b"/")[0]) for rel in rels}
        if self.dirs_settled(dirs):
            return rels  # the usual case: nothing changed beneath the root while rg walked it
        self.forget()
        return [rel for rel in rels if self._regular_now(rel)]

    def dirs_settled(self, dirs: set[bytes]) -> bool:
        """Whether every directory in `dirs` (relative, "" the root) and above it is a directory settled since the start.

        One stat by relative name each, from the root: cheaper than a walk by
        descriptors, and as sound, because each directory is looked at before
        every directory above it. A name resolved through a component proven
        afterwards resolved through that same inode, which sat there from the
        start until that later look (and so also when rg went through it).
        """
        todo = set(dirs)
        for d in dirs:
            cut = d.rfind(b"/")
            while cut > 0 and d[:cut] not in todo:
                todo.add(d[:cut])
                cut = d.rfind(b"/", 0, cut)
        todo.discard(b"")
        for d in sorted(todo, key=lambda d: d.count(b"/"), reverse=True):
            try:
                st = os.stat(d, dir_fd=self.fd, follow_symlinks=False)
            except OSError:
                return False
            if not stat.S_ISDIR(st.st_mode) or not self.settled(st):
                return False
        return True

    def _regular_now(self, rel: AnyStr) -> bool:
        parent, _, name = rel.rpartition("/" if isinstance(rel, str) else b"/")
        state, fd = self.directory(parent)
        if state == SETTLED:
            return True
        if fd is None:
            return False
        try:
            return stat.S_ISREG(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)
        except OSError:
            return False

    def file_states(self, rels: list[bytes]) -> list[int]:
        """For files grep reported lines of: SETTLED, GONE (missing, not a regular file, or with other hard
        links: CAP-13), or CHANGED, by one stat each by relative name from the root.

        Holds only if `dirs_settled` then proves every directory above them
        (looked at after them, as there); otherwise each is decided by `matched`.
        """
        out: list[int] = []
        for rel in rels:
            try:
                st = os.stat(rel, dir_fd=self.fd, follow_symlinks=False)
            except OSError:
                out.append(GONE)
                continue
            if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
                out.append(GONE)
            else:
                out.append(SETTLED if self.settled(st) else CHANGED)
        return out

    def matched(self, rel: bytes) -> tuple[int, int | None]:
        """A file grep reported lines of: SETTLED (its lines stand), GONE (none may be shown: missing, not a
        regular file, or with other hard links, CAP-13) or CHANGED with the file opened now to search again."""
        parent, _, name = rel.rpartition(b"/")
        state, dir_fd = self.directory(parent)
        if dir_fd is None:
            return GONE, None
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            return GONE, None
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            return GONE, None
        if state == SETTLED and self.settled(st):
            return SETTLED, None
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)
        except OSError:
            return GONE, None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            os.close(fd)
            return GONE, None
        return CHANGED, fd

    def directory(self, rel: AnyStr) -> tuple[int, int | None]:
        """(state, fd) of the directory `rel` beneath the root ("" is the root), walked without following links.

        Walks on from the deepest directory still open from the last walk:
        callers go through sorted paths, so each directory is opened once.
        Only walks made since the last `forget` are reused.
        """
        if not rel:
            return SETTLED, self.fd
        if self._state.get(rel) == GONE:
            return GONE, None
        sep = "/" if isinstance(rel, str) else b"/"
        while self._chain and not (rel == self._chain[-1][0] or rel.startswith(self._chain[-1][0] + sep)):  # type: ignore[operator]
            os.close(self._chain.pop()[1])
        done, fd = self._chain[-1] if self._chain else (rel[:0], self.fd)
        state = self._state.get(done, SETTLED)
        rest = rel[len(done) + 1 :] if done else rel
        for name in rest.split(sep) if rest else ():  # type: ignore[arg-type]
            done = done + sep + name if done else name  # type: ignore[operator]
            if state == GONE or self._state.get(done) == GONE:
                state = GONE
                break
            try:
                fd = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError:  # a symlink (ELOOP, ENOTDIR), missing, not a directory: nothing there to show
                state = GONE
                self._state[done] = GONE
                break
            self._chain.append((done, fd))
            if state == SETTLED and not self.settled(os.fstat(fd)):
                state = CHANGED
            self._state[done] = state
        if state == GONE:
            self._state[rel] = GONE
            return GONE, None
        return state, fd
