"""Protected entries at every depth of a tree: found before a command runs, undone after it (ENV-7).

Binding a placeholder in every directory is impossible, and binding every
protected entry a big tree holds is slow (each mount costs bwrap more than
the last). So the sandbox works in two steps:

- before the run, `observe` lists every *protected entry* of each tree (the
  shallowest entry whose path is protected: `.git`, `.envrc`, `.github`,
  a git directory layout, a virtual environment, ...). Repositories
  (`.git`, layouts) and the entries directly at the top of a writable root
  are bound read-only by the caller; the others are recorded entry by entry;
- after the run (the sandbox and every process in it gone), `sweep` looks
  again and removes every protected entry that is new, replaced or changed
  (inside a recorded one: every new or changed entry), and the markers
  that completed a layout. Nothing the command made survives it.

Both walks are incremental: each tree's last state is kept (`_CACHE`), and
a directory is listed again only when its own `(dev, ino, ctime)` changed.
Creating, removing or renaming an entry changes its directory's ctime, and
no process can set a ctime back; a directory whose ctime was too recent when
it was recorded (`timestamps.recent`: 50 ms, or 3 s on a filesystem that
keeps whole seconds) is listed again regardless, because a change in the same
step of the filesystem's clock keeps the stamp. The walks never follow
symbolic links.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..protected import (
    LAYOUT_MARKERS,
    PROTECTED_DIRS,
    PROTECTED_NAMES,
    PROTECTED_SUFFIXES,
    SEQUENCE_TAILS,
    STARTUP_SUFFIX,
    is_layout,
    layout_reason,
    name_reason,
    protected_reason,
    sequence_match,
    startup_file,
)
from ..timestamps import recent

MAX_SWEEP_ROUNDS = 8


class GuardError(Exception):
    """A tree could not be examined or restored (the caller fails closed)."""


# (dev, ino, mode, ctime_ns): ctime is 0 for directories inside or being a recorded entry (their
# entries are compared instead). A plain tuple: millions of these are made and compared.
Ident = tuple[int, int, int, int]


@dataclass(frozen=True)
class _Dir:
    """One directory of a tree as last listed; `volatile`: its ctime was too recent to trust, so the next pass lists it again."""

    ident: Ident
    volatile: bool
    subdirs: frozenset[str]  # names of recorded subdirectories
    qs: frozenset[str]  # names of protected entries directly inside
    markers: frozenset[str]  # layout markers present


@dataclass(frozen=True)
class Entry:
    """One protected entry of a tree as recorded before the command: what the sweep compares the tree with after it."""

    kind: str  # "repo" (a `.git`), "layout" (a git directory layout or a virtual environment), "config" (anything else)
    ident: Ident
    bound: bool  # kept read-only by the sandbox (repositories, and entries at the top of a writable root)
    inner: tuple[tuple[str, Ident], ...] = ()  # unbound only: every entry beneath, by relative path


@dataclass
class TreeState:
    """What one tree (a writable or read root) holds outside its protected entries, and those entries."""

    root: str
    writable: bool
    dirs: dict[str, _Dir] = field(default_factory=dict)
    entries: dict[str, Entry] = field(default_factory=dict)
    root_protected: bool = False  # the root itself is a protected entry (or a layout)

    def copy(self) -> "TreeState":
        return TreeState(self.root, self.writable, dict(self.dirs), dict(self.entries), self.root_protected)


def _ident(st: os.stat_result, *, with_ctime: bool = True) -> Ident:
    return (st.st_dev, st.st_ino, st.st_mode, st.st_ctime_ns if with_ctime else 0)


def _same_inode(a: Ident, b: Ident) -> bool:
    return a[0] == b[0] and a[1] == b[1]


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise GuardError(f"a path cannot be examined ({exc.strerror})") from None


# (name, its lstat when it is a directory): taken through the listed directory's descriptor, so it is the
# identity of what that directory holds under that name, whatever was renamed or swapped above it.
Listing = list[tuple[str, os.stat_result | None]]
Inode = tuple[int, int]


def _listdir(path: str, expect: Inode | None = None) -> Listing | None:
    """The entries of the directory at `path` ([] when it is gone); None when `path` leads elsewhere now:
    to another directory than `expect` (its (dev, ino) as its parent's listing gave it), or, without
    `expect`, to a directory the kernel does not name `path`. A directory swapped for a symlink, itself or
    above, between a look and this listing would otherwise have the walk list, and go on to walk, whatever
    the link points at (`/`: the whole host, under workspace names)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None
        raise GuardError(f"a directory cannot be listed ({exc.strerror})") from None
    try:
        if expect is not None:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != expect:
                return None
        elif not _named(fd, path):
            return None
        out: Listing = []
        with os.scandir(fd) as it:
            for e in it:
                # d_type first: no system call for an ordinary file.
                if not _is_dir(e):
                    out.append((e.name, None))
                    continue
                try:
                    st = e.stat(follow_symlinks=False)  # fstatat on `fd`
                except FileNotFoundError:
                    continue
                out.append((e.name, st if stat.S_ISDIR(st.st_mode) else None))
        return out
    except OSError as exc:
        raise GuardError(f"a directory cannot be listed ({exc.strerror})") from None
    finally:
        os.close(fd)


def _is_dir(e: os.DirEntry[str]) -> bool:
    try:
        return e.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _named(fd: int, path: str) -> bool:
    """Whether the kernel names the directory `fd` holds `path` (canonical)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}") == path
    except OSError:
        return False  # no /proc either: nothing proves where the name led, so it is not listed


def _inode(st: os.stat_result) -> Inode:
    return (st.st_dev, st.st_ino)


def _protected_child(parent: str, name: str) -> str | None:
    """The kind of protected entry `parent/name` is by its name or path (None: not protected by name)."""
    if name not in _ANY_NAME:
        # Name endings only (a `.pth`, a workspace file): this runs for every entry of every directory listed.
        if name.endswith(STARTUP_SUFFIX) and startup_file(parent.rpartition("/")[2], name):
            return "config"
        return "config" if name.endswith(PROTECTED_SUFFIXES) else None
    if name_reason(name) is not None:
        return "repo" if name == ".git" else "config"
    if name in SEQUENCE_TAILS and sequence_match((*parent.split("/"), name)):
        return "config"
    return None


def _inner(path: str, expect: Inode) -> tuple[tuple[str, Ident], ...]:
    """Every entry beneath the directory `path` (`expect`: its identity; not following links): files and
    links with ctime, directories without."""
    out: list[tuple[str, Ident]] = []
    stack = [(path, "", expect)]
    while stack:
        d, rel, want = stack.pop()
        for name, dst in _listdir(d, want) or ():
            p = f"{d}/{name}"
            r = f"{rel}/{name}" if rel else name
            if dst is not None:
                out.append((r, _ident(dst, with_ctime=False)))
                stack.append((p, r, _inode(dst)))
                continue
            try:
                st = os.lstat(p)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise GuardError(f"a protected entry cannot be examined ({exc.strerror})") from None
            out.append((r, _ident(st, with_ctime=not stat.S_ISDIR(st.st_mode))))
    out.sort()
    return tuple(out)


def _layout_entry(st: os.stat_result) -> Entry:
    return Entry("layout", _ident(st, with_ctime=False), True)


_ANY_NAME = frozenset(PROTECTED_NAMES | PROTECTED_DIRS | SEQUENCE_TAILS)
_Todo = list[tuple[str, os.stat_result, str]]  # (directory, its lstat, its parent) still to walk


class _Walker:
    """Brings a TreeState up to date with the disk, listing only what may have changed."""

    def __init__(self, state: TreeState) -> None:
        self.s = state
        self.now = time.time_ns()
        self.fresh: set[str] = set()  # entries recorded by this pass (no need to look at them again)
        # The first thing this pass could not examine. The pass goes on past it, so that one directory
        # nobody can list (a path longer than the system allows) hides nothing elsewhere; the state is
        # then incomplete, which `state_of` and the sweep treat as a failure (after removing what was found).
        self.failed: str | None = None

    def _note(self, exc: GuardError) -> None:
        if self.failed is None:
            self.failed = str(exc)

    def _list(self, path: str, expect: Inode) -> Listing | None:
        """`_listdir`, a failure noted (None); a directory that is not there any more is listed as gone
        (its parent changed, and is listed again)."""
        try:
            listing = _listdir(path, expect)
        except GuardError as exc:
            self._note(exc)
            return None
        if listing is None and path == self.s.root:
            self._note(GuardError("a root cannot be listed where it is"))
        return listing or []

    def _stat(self, path: str) -> os.stat_result | None:
        """`_lstat`, a failure noted (None, as for a missing path)."""
        try:
            return _lstat(path)
        except GuardError as exc:
            self._note(exc)
            return None

    # -- records -------------------------------------------------------------------------

    def _drop_dir(self, path: str) -> None:
        stack = [path]  # not recursive: a command can make a tree deeper than Python recurses
        while stack:
            d = stack.pop()
            rec = self.s.dirs.pop(d, None)
            if rec is None:
                continue
            stack.extend(f"{d}/{name}" for name in rec.subdirs)
            for name in rec.qs:
                self.s.entries.pop(f"{d}/{name}", None)

    def _entry(self, path: str, parent: str, kind: str, st: os.stat_result, *, listable: bool = True) -> Entry:
        """`listable`: `st` is the identity the walk knows the entry by (from its directory's listing), so
        what lies beneath may be listed; otherwise it is left out (the entry is new or replaced anyway)."""
        if kind == "layout":
            return _layout_entry(st)
        bound = kind == "repo" or parent == self.s.root
        is_dir = stat.S_ISDIR(st.st_mode)
        if bound or not is_dir:
            return Entry(kind, _ident(st, with_ctime=not is_dir), bound)
        try:
            inner = _inner(path, _inode(st)) if listable else ()
        except GuardError as exc:
            self._note(exc)
            inner = ()  # nothing beneath counts as changed; a new entry goes whole all the same
        return Entry(kind, _ident(st, with_ctime=False), bound, inner)

    def _set_dir(self, path: str, st: os.stat_result, subdirs: frozenset[str], qs: frozenset[str], markers: frozenset[str]) -> None:
        self.s.dirs[path] = _Dir(_ident(st), recent(st.st_ctime_ns, self.now), subdirs, qs, markers)

    def _link(self, parent: str, name: str, *, as_q: bool) -> None:
        rec = self.s.dirs.get(parent)
        if rec is None:
            return
        if as_q:
            self.s.dirs[parent] = replace(rec, qs=rec.qs | {name}, subdirs=rec.subdirs - {name})
        else:
            self.s.dirs[parent] = replace(rec, subdirs=rec.subdirs | {name}, qs=rec.qs - {name})

    def _add_q(self, parent: str, name: str, entry: Entry) -> None:
        path = f"{parent}/{name}"
        if parent == self.s.root:
            entry = replace(entry, bound=True)
        self.s.entries[path] = entry
        self.fresh.add(path)
        self._link(parent, name, as_q=True)

    # -- listing -------------------------------------------------------------------------

    def _walk(self, todo: _Todo) -> None:
        """Record each queued directory and everything beneath it afresh."""
        while todo:
            d, dst, parent = todo.pop()
            listing = self._list(d, _inode(dst))
            if listing is None:
                continue
            markers = frozenset(n for n, _st in listing) & LAYOUT_MARKERS
            name = d.rsplit("/", 1)[1]
            if is_layout(markers):
                if d == self.s.root:
                    self.s.root_protected = True
                else:
                    self._add_q(parent, name, _layout_entry(dst))
                continue
            subdirs, qs = self._children(d, listing, todo)
            self._set_dir(d, dst, subdirs, qs, markers)
            if d != self.s.root:
                self._link(parent, name, as_q=False)

    def _children(self, d: str, listing: Listing, todo: _Todo) -> tuple[frozenset[str], frozenset[str]]:
        """Record the protected entries of directory `d`; queue the subdirectories not already recorded
        as the same directory. Returns (recorded subdirectories kept, protected names)."""
        qs: set[str] = set()
        subdirs: set[str] = set()
        old = self.s.dirs.get(d)
        base = d.rstrip("/") + "/"
        for name, dst in listing:
            kind = _protected_child(d, name)
            if kind is None and dst is None:
                continue  # not a directory: no system call for an ordinary file
            path = base + name
            st = dst
            if st is None:
                try:
                    st = os.lstat(path)
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    self._note(GuardError(f"an entry cannot be examined ({exc.strerror})"))
                    continue
            if kind is not None:
                if path in self.s.dirs:
                    self._drop_dir(path)  # a directory renamed to a protected name: no longer walked
                self.s.entries[path] = self._entry(path, d, kind, st, listable=dst is not None)
                self.fresh.add(path)
                qs.add(name)
                continue
            if not stat.S_ISDIR(st.st_mode):
                continue
            known = self.s.dirs.get(path)
            if old is not None and name in old.subdirs and known is not None and known.ident[0] == st.st_dev and known.ident[1] == st.st_ino:
                subdirs.add(name)  # the same directory as before: validated on its own
                continue
            if known is not None:
                self._drop_dir(path)
            self.s.entries.pop(path, None)
            todo.append((path, st, d))
        return frozenset(subdirs), frozenset(qs)

    def _relist(self, path: str) -> None:
        """List a recorded directory whose own state changed."""
        rec = self.s.dirs[path]
        try:
            st = _lstat(path)
        except GuardError as exc:
            self._note(exc)
            return
        parent = path.rpartition("/")[0]
        if st is None or not stat.S_ISDIR(st.st_mode) or not (st.st_dev == rec.ident[0] and st.st_ino == rec.ident[1]):
            self._drop_dir(path)
            if path == self.s.root:
                self._root()
            return  # the parent changed as well, and lists what is there now
        listing = self._list(path, _inode(st))
        if listing is None:
            return
        names = frozenset(n for n, _st in listing)
        markers = names & LAYOUT_MARKERS
        if is_layout(markers):
            self._drop_dir(path)
            if path == self.s.root:
                self.s.root_protected = True
            else:
                self._add_q(parent, path.rsplit("/", 1)[1], _layout_entry(st))
            return
        for n in (rec.subdirs | rec.qs) - names:
            self._drop_dir(f"{path}/{n}")
        for n in rec.qs:
            self.s.entries.pop(f"{path}/{n}", None)
        todo: _Todo = []
        subdirs, qs = self._children(path, listing, todo)
        self._set_dir(path, st, subdirs, qs, markers)
        self._walk(todo)

    def _root(self) -> None:
        root = self.s.root
        self.s.dirs.clear()
        self.s.entries.clear()
        self.s.root_protected = False
        st = _lstat(root)
        if st is None:
            raise GuardError("a root cannot be examined")
        if protected_reason(root) is not None or layout_reason(root) is not None:
            self.s.root_protected = True
            return
        if not stat.S_ISDIR(st.st_mode):
            return  # a root that is one file (fs.write on a literal path) holds nothing to protect
        self._walk([(root, st, "")])

    # -- the pass ------------------------------------------------------------------------

    def refresh(self) -> None:
        if not self.s.dirs or self.s.root_protected:
            self._root()
            return
        changed: list[str] = []
        lstat = os.lstat
        for path, rec in self.s.dirs.items():
            if rec.volatile:
                changed.append(path)
                continue
            try:
                st = lstat(path)
            except OSError:
                changed.append(path)  # gone (its parent lists that) or unreadable (the listing says so)
                continue
            i = rec.ident
            if st.st_ctime_ns != i[3] or st.st_ino != i[1] or st.st_dev != i[0] or st.st_mode != i[2]:
                changed.append(path)
        for path in sorted(changed, key=lambda p: p.count("/")):
            if path in self.s.dirs:
                self._relist(path)
        self._recheck_entries()

    def _recheck_entries(self) -> None:
        """Entries no listing re-recorded: their own state (content, what is inside) may still have changed."""
        for path, ent in list(self.s.entries.items()):
            if path in self.fresh or path not in self.s.entries:
                continue
            st = self._stat(path)
            if st is None:
                continue  # its directory changed too and was listed again (or a failure was noted)
            parent, _, name = path.rpartition("/")
            # The same inode as recorded (an identity its directory's listing gave): what lies beneath may
            # be listed. Another one by this name is new here, whatever lies beneath.
            same = _inode(st) == ent.ident[:2]
            if ent.kind == "layout" and same:
                listing = self._list(path, _inode(st))
                if listing is None:
                    continue
                if not is_layout({n for n, _st in listing} & LAYOUT_MARKERS):
                    # No longer a layout (the sweep removed a marker): an ordinary directory again.
                    self.s.entries.pop(path, None)
                    self._walk([(path, st, parent)])
                    continue
            now = self._entry(path, parent, ent.kind, st, listable=same)
            if now != ent:
                self.s.entries[path] = now


# -- the cache and the public surface ----------------------------------------------------

_CACHE_MAX = 16
_cache: dict[tuple[str, bool], TreeState] = {}
_cache_lock = threading.Lock()


def state_of(root: str, writable: bool) -> TreeState:
    """The current state of tree `root` (incremental from the last one seen for it)."""
    root = os.path.realpath(root)  # listings are checked against the kernel's (canonical) names
    key = (root, writable)
    with _cache_lock:
        prev = _cache.get(key)
    state = prev.copy() if prev is not None else TreeState(root, writable)
    walker = _Walker(state)
    walker.refresh()
    if walker.failed is not None:
        raise GuardError(walker.failed)
    remember(state)
    return state


def remember(state: TreeState) -> None:
    with _cache_lock:
        if len(_cache) >= _CACHE_MAX and (state.root, state.writable) not in _cache:
            _cache.pop(next(iter(_cache)))
        _cache[(state.root, state.writable)] = state.copy()


def forget_all() -> None:
    """Drop every cached tree (tests and benchmarks that want a cold walk)."""
    with _cache_lock:
        _cache.clear()


@dataclass(frozen=True)
class Observation:
    """Every tree's state before a command."""

    trees: tuple[TreeState, ...]
    extras: dict[str, os.stat_result | None] = field(default_factory=dict)  # further protected paths, as they were

    def entries(self) -> Iterable[tuple[str, Entry]]:
        for t in self.trees:
            yield from t.entries.items()

    def bound(self, *, writable_only: bool = True) -> list[str]:
        return [p for t in self.trees if t.writable or not writable_only for p, e in t.entries.items() if e.bound]

    def protected_roots(self) -> list[str]:
        return [t.root for t in self.trees if t.writable and t.root_protected]


def observe(write_roots: Sequence[str], read_roots: Sequence[str] = (), *,
            realpath: Callable[[str], str] = os.path.realpath) -> Observation:
    """The state of every writable root and of every read root that no writable root holds.

    `realpath`: the caller's (memoised) resolution, when it resolves the same roots again itself.
    """
    w = [realpath(r) for r in write_roots]
    trees = [state_of(r, True) for r in dict.fromkeys(w)]
    for r in dict.fromkeys(realpath(x) for x in read_roots):
        if not any(r == x or r.startswith(x.rstrip("/") + "/") for x in w) and os.path.isdir(r):
            trees.append(state_of(r, False))
    return Observation(tuple(trees))


def with_extras(obs: Observation, extras: Iterable[str]) -> Observation:
    """`obs` plus the current state of further protected paths that lie in a writable root."""
    roots = [t.root for t in obs.trees if t.writable and not t.root_protected]
    got: dict[str, os.stat_result | None] = dict(obs.extras)
    for e in extras:
        p = os.path.normpath(e)
        if any(p == r or p.startswith(r + "/") for r in roots):
            got[p] = _lstat(p)
    return Observation(obs.trees, got)


# -- the sweep ---------------------------------------------------------------------------


@dataclass
class SweepReport:
    """What a sweep did: the protected entries it removed and those it could not remove."""

    removed: int = 0  # entries removed (each counted once, with whatever was beneath it)
    failed: int = 0  # entries that could not be removed
    # Per writable root swept: the tree as the sweep last looked at it, holding nothing protected it had to remove.
    states: dict[str, TreeState] = field(default_factory=dict)


def _is_placeholder(path: str, placeholders: frozenset[str]) -> bool:
    """An empty file or directory bwrap made as a mount point (left for its own cleanup)."""
    if path not in placeholders:
        return False
    st = _lstat(path)
    if st is None:
        return True
    if stat.S_ISREG(st.st_mode):
        return st.st_size == 0
    if stat.S_ISDIR(st.st_mode):
        return _listdir(path) == []  # None: not at `path` itself (reached through a link): nothing of bwrap's
    return False


def _new_or_changed(before: TreeState, after: TreeState) -> list[str]:
    """Paths to remove: protected entries that are new or replaced, new or changed entries inside
    recorded unbound ones, and the markers that made a directory a layout (git, virtual environment)."""
    out: list[str] = []
    if after.root_protected and not before.root_protected:
        # The root itself became a layout: take back the markers it did not hold.
        rec = before.dirs.get(before.root)
        had = rec.markers if rec is not None else frozenset()
        out += [f"{before.root}/{m}" for m in sorted(LAYOUT_MARKERS - had) if os.path.lexists(f"{before.root}/{m}")]
    for path, ent in after.entries.items():
        old = before.entries.get(path)
        if old is None or old.kind != ent.kind or not _same_inode(old.ident, ent.ident):
            if ent.kind == "layout":
                # Undo the layout, not the directory: a marker it did not hold before goes (all of
                # them when the directory itself is new here); the rest is looked at again.
                drec = before.dirs.get(path)
                had = drec.markers if drec is not None and _same_inode(drec.ident, ent.ident) else frozenset()
                out += [f"{path}/{m}" for m in sorted(LAYOUT_MARKERS - had) if os.path.lexists(f"{path}/{m}")]
            else:
                out.append(path)
            continue
        if ent.bound:
            continue
        if old.ident != ent.ident:
            out.append(path)  # another type or mode, or (for a file) other content
            continue
        was = dict(old.inner)
        for rel, ident in ent.inner:
            if was.get(rel) != ident:
                out.append(f"{path}/{rel}")
    return outermost(out)


def outermost(paths: Iterable[str]) -> list[str]:
    """`paths` without those that lie beneath another of them, shallowest first. Each path's ancestors are
    looked up in a set (not compared with every kept path): a big repository protects hundreds of entries."""
    have = set(paths)
    out = [p for p in have if not any(a in have for a in _ancestors(p))]
    return sorted(out, key=lambda x: (x.count("/"), x))


def _ancestors(path: str) -> Iterable[str]:
    cur = os.path.dirname(path)
    while True:
        yield cur
        parent = os.path.dirname(cur)
        if parent == cur:
            return
        cur = parent


# Removal works through descriptors only. The sweep runs on the host while a stdio MCP server (or another
# session's command) may be writing the same tree: a directory swapped for a symlink between the walk
# and a removal by name would make the removal act wherever the link points (another repository's
# `.git`, a `.envrc` in the user's home). Every component is opened without following links instead.
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_PATH = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_LOOK, _CHANGE = 0o500, 0o700  # the owner's rights a directory needs to be listed, and to have entries removed


def _grant(fd: int, bits: int) -> None:
    """Give a directory the command shut (same owner as us) back the owner's `bits`."""
    st = os.fstat(fd)
    if st.st_uid == os.getuid() and st.st_mode & bits != bits:
        _by_fd(os.chmod, fd, stat.S_IMODE(st.st_mode) | bits)


def _readable(fd: int) -> int:
    """A readable descriptor of the directory the O_PATH `fd` holds."""
    return _by_fd(os.open, fd, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def _by_fd(call: Callable[..., Any], fd: int, *args: int) -> Any:
    """`call` on exactly the inode `fd` holds, through its magic link in /proc (no other name reaches it
    whatever was renamed or swapped since). Without /proc that is refused, never taken for a missing file."""
    try:
        return call(f"/proc/self/fd/{fd}", *args)
    except FileNotFoundError:
        raise PermissionError(errno.EACCES, "/proc is not mounted") from None


def _step(name: str, dir_fd: int) -> int:
    """The directory `name` in `dir_fd` (O_PATH), never through a link; `dir_fd` given search rights if it lacked them."""
    try:
        return os.open(name, _PATH, dir_fd=dir_fd)
    except PermissionError:
        _grant(dir_fd, _LOOK)
        return os.open(name, _PATH, dir_fd=dir_fd)


def _walk_to(path: str, bits: int) -> int:
    """A readable descriptor of the directory at the absolute `path`, reached without following a link
    (OSError otherwise: ELOOP or ENOTDIR for a link in the way), with the owner's `bits` when it is ours."""
    fd = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in path.split("/"):
            if part:
                nxt = _step(part, fd)
                os.close(fd)
                fd = nxt
        _grant(fd, bits)
        return _readable(fd)
    finally:
        os.close(fd)


def _open_child(name: str, dir_fd: int, bits: int) -> int:
    """`_walk_to` for a directory entry of `dir_fd`."""
    fd = _step(name, dir_fd)
    try:
        _grant(fd, bits)
        return _readable(fd)
    finally:
        os.close(fd)


def _remove(path: str) -> bool:
    """Remove `path` (with everything beneath it, for a directory), never following a link on the way."""
    parent, name = os.path.split(path)
    try:
        pfd = _walk_to(parent, _CHANGE)
    except FileNotFoundError:
        return True  # nothing there by that path now (the round after a removal looks again)
    except OSError:
        return False  # a link where the walk saw a directory: a concurrent swap; not removed
    try:
        try:
            st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
        except FileNotFoundError:
            return True
        if stat.S_ISDIR(st.st_mode):
            _rmtree_at(pfd, name)
        else:
            os.unlink(name, dir_fd=pfd)
        os.stat(name, dir_fd=pfd, follow_symlinks=False)
        return False  # something is there again
    except FileNotFoundError:
        return True
    except OSError:
        return False
    finally:
        os.close(pfd)


def remove_tree(path: str, *, missing_ok: bool = True) -> None:
    """Remove the absolute `path` (with everything beneath it, for a directory) through descriptors only: no
    link on the way to it or beneath it is followed (a link is removed as itself), and a directory its owner
    made read-only is opened again through its own descriptor, never by name. For a host clearing a directory
    an agent wrote, or is still writing: a directory swapped for a link meanwhile is not followed out of the
    tree. Raises OSError when something could not be removed (ELOOP or ENOTDIR: a link where a directory was)."""
    parent, name = os.path.split(path)
    if not os.path.isabs(path) or not name or name in (".", ".."):
        raise OSError(errno.EINVAL, "not an absolute path to an entry", path)
    try:
        pfd = _walk_to(parent, _CHANGE)
    except FileNotFoundError:
        if missing_ok:
            return
        raise
    try:
        try:
            st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
        except FileNotFoundError:
            if missing_ok:
                return
            raise
        if stat.S_ISDIR(st.st_mode):
            _rmtree_at(pfd, name)
        else:
            os.unlink(name, dir_fd=pfd)
    finally:
        os.close(pfd)


def _rmtree_at(parent: int, name: str) -> None:
    """Remove the directory `name` of `parent` and everything beneath it, through descriptors only: a
    link anywhere beneath is removed, never followed. Iterative: a deep tree costs descriptors, not stack.
    A branch that cannot be removed (deeper than the process may hold descriptors, swapped meanwhile) does
    not stop the others: a command must not keep `.github/workflows` by making a deep sibling. The first
    failure is raised at the end."""
    frames: list[tuple[int, str, list[str]]] = []  # (fd, name in its parent, subdirectories still to remove)
    failed: list[OSError] = []

    def enter(dir_fd: int, child: str) -> None:
        fd = _open_child(child, dir_fd, _CHANGE)
        subs: list[str] = []
        frames.append((fd, child, subs))
        with os.scandir(fd) as it:
            for entry in it:
                if entry.is_dir(follow_symlinks=False):
                    subs.append(entry.name)
                    continue
                try:
                    os.unlink(entry.name, dir_fd=fd)
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    failed.append(exc)

    try:
        enter(parent, name)
        while frames:
            fd, child, subs = frames[-1]
            if subs:
                try:
                    enter(fd, subs.pop())
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    failed.append(exc)
                continue
            frames.pop()
            os.close(fd)
            try:
                os.rmdir(child, dir_fd=frames[-1][0] if frames else parent)
            except FileNotFoundError:
                pass
            except OSError as exc:
                failed.append(exc)
    finally:
        for fd, _child, _subs in frames:
            os.close(fd)
    if failed:
        raise failed[0]


def _open_shut_dirs(root: str) -> None:
    """Directories beneath `root` the command made unlistable (ours: the same uid) are opened again before
    looking, each reached from its parent's descriptor without following a link: one open per directory
    (a walk from / for each cost the square of a deep tree's depth). A directory that cannot be reached
    (one descriptor per level: not past the process's limit) is left as it is."""
    try:
        top = _walk_to(root, _LOOK)
    except OSError:
        return
    frames: list[tuple[int, list[str]]] = []  # (readable fd, subdirectories still to open)
    try:
        frames.append((top, _subdirs(top)))
        while frames:
            fd, subs = frames[-1]
            if not subs:
                os.close(fd)
                frames.pop()
                continue
            try:
                child = _open_child(subs.pop(), fd, _LOOK)
            except OSError:
                continue
            frames.append((child, _subdirs(child)))
    finally:
        for fd, _subs in frames:
            os.close(fd)


def _subdirs(fd: int) -> list[str]:
    try:
        with os.scandir(fd) as it:
            return [e.name for e in it if _is_dir(e)]
    except OSError:
        return []


def sweep(before: Observation, *, extras: Iterable[str] = (), placeholders: Iterable[str] = (),
          held: Mapping[str, tuple[int, int]] | None = None) -> SweepReport:
    """After a command: remove what it left in a writable root that is protected and was not there before.

    `extras` are further protected paths (hook directories, included
    configuration, the runtime's files): one that exists now but did not
    before (or is another file now) is removed too. `placeholders` are the
    mount points bwrap may still be holding for a concurrent run. `held`:
    the entries the sandbox kept read-only (path -> (dev, ino) when it
    started); while one is still that inode, a change at or beneath it was
    made outside the sandbox and is left alone. Raises GuardError when
    something could not be examined or removed.
    """
    report = SweepReport()
    ph = frozenset(os.path.normpath(p) for p in placeholders)
    kept = _Held(held or {})
    for tree in before.trees:
        if tree.writable and not tree.root_protected:
            _sweep_tree(tree, ph, kept, report)
    for path, st0 in before.extras.items():
        st1 = _lstat(path)
        if st1 is None or _is_placeholder(path, ph) or kept(path):
            continue
        if st0 is None or (st0.st_dev, st0.st_ino) != (st1.st_dev, st1.st_ino):
            _count(_remove(path), report)
    if report.failed:
        raise GuardError("protected entries a command created could not all be removed")
    return report


def rebased(fresh: Observation, before: Observation, report: SweepReport) -> Observation:
    """What the next sweep of a process that is still running compares with: `fresh` (a look taken after the
    sweep, for the extras a changed configuration now names), with each swept tree as the sweep left it and
    the extras `before` knew as they were. A fresh look alone would take in what the process made since the
    sweep, as if it had always been there, and no later sweep would remove it."""
    trees = tuple(report.states.get(t.root, t) if t.writable else t for t in fresh.trees)
    extras = {p: before.extras[p] if p in before.extras else st for p, st in fresh.extras.items()}
    return Observation(trees, extras)


def _count(ok: bool, report: SweepReport) -> None:
    if ok:
        report.removed += 1
    else:
        report.failed += 1


def _after(tree: TreeState, state: TreeState | None) -> tuple[TreeState, str | None]:
    """`tree` brought up to date (from `state`, the last round's, when given), and what could not be
    examined (None: nothing; the state is then complete)."""
    state = (state or tree).copy()
    walker = _Walker(state)
    walker.refresh()
    if walker.failed is not None:
        _open_shut_dirs(tree.root)
        state = tree.copy()
        walker = _Walker(state)
        walker.refresh()
    return state, walker.failed


class _Held:
    """Whether a path lies at or beneath an entry the sandbox held read-only that is still the same inode."""

    def __init__(self, held: Mapping[str, tuple[int, int]]) -> None:
        self.held = held
        self.still: dict[str, bool] = {}  # per held entry, looked at once per sweep

    def __call__(self, path: str) -> bool:
        if not self.held:
            return False
        cur = path
        while True:
            if cur in self.held and self._same(cur):
                return True
            parent = os.path.dirname(cur)
            if parent == cur:
                return False
            cur = parent

    def _same(self, path: str) -> bool:
        if path not in self.still:
            st = _lstat(path)
            self.still[path] = st is not None and (st.st_dev, st.st_ino) == self.held[path]
        return self.still[path]


def _sweep_tree(tree: TreeState, ph: frozenset[str], held: _Held, report: SweepReport) -> None:
    state: TreeState | None = None
    for _ in range(MAX_SWEEP_ROUNDS):
        state, unseen = _after(tree, state)
        # What was found is removed even when part of the tree could not be looked at: that part must not
        # shield a `.envrc` elsewhere. The sweep fails all the same, since that part may hold more.
        doomed = [p for p in _new_or_changed(tree, state) if not _is_placeholder(p, ph) and not held(p)]
        if not doomed:
            if unseen is not None:
                report.failed += 1
                return
            remember(state)
            report.states[tree.root] = state
            return
        for p in doomed:
            _count(_remove(p), report)
        if report.failed:
            return
        if unseen is not None:
            state = None  # an incomplete state is no base for the next round: look again from `tree`
    raise GuardError("protected entries kept reappearing in a writable root")
