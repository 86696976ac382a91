"""What one sandboxed call must keep read-only or hide beyond its policy: found by one bounded walk per call.

Some paths exist only when a call is made, not when the manifest was
compiled:

- protected names below the top of a writable root: a nested repository's
  hooks and config, a sub-project's `.vscode` (ENV-7);
- files a wildcard deny rule names (`**/.env`, `**/*.pem`): a deny on
  reading hides them, a deny on writing keeps them read-only (ENV-6).
  Literal denied paths are the policy's own (`denies.py`, `policy.py`);
- regular files with more than one hard link (ENV-13): the other names of
  the inode may lie anywhere, so writing one in place could change a file
  outside every root. Such a file is kept read-only unless the walk saw
  every one of its names, each in a writable root and none protected or
  denied (`cargo`'s `target/` links, an `ln a b` of an earlier call); and
  every name of a read-denied file's inode is hidden like the file itself.

One walk finds all of them. It never follows symlinks, stops after
`max_entries` entries and `max_depth` levels (the manifest's
`limits.walk_entries` and `limits.walk_depth`), and does not enter `.git`.
Protected directories and environments (a directory holding `pyvenv.cfg`
or `conda-meta`), which the sandbox keeps read-only whole or sweeps, are
entered only when read denies are looked for, and for those alone: a
secret in `.devcontainer/` is hidden like any other. The bounds fail
closed: the writable directories the walk did not list are read-only for
the call (they may hold links to anywhere: a pnpm `node_modules` holds
thousands into a store every project shares), and a walk that hunts
read-denied names and stops at a bound is an error (`WalkBounded`): the
call does not run. Finding hard links costs one `lstat` per regular file walked
(directories never count: they always have two or more links), about 3 µs
each: 60 ms for 20,000 files, five times the walk itself. So the links found
are kept, and reused while every directory of the walk holds the same names
for the same inodes as then (each directory's identity and its entries'
(name, inode) pairs compared, as listed now or reused below). Which names an
inode has in the tree is all the groups depend on, so a directory whose ctime
moved without a net change of names (bwrap's mount points, made and removed at
every call; a scratch file a command made and removed) costs nothing more,
where comparing ctimes made every such call lstat every file again: 250 ms a
call in a 100,000-entry workspace without a `.git` at its top. Anything a
command or a file tool can do that gives a file another name changes the
names of a walked directory (or happens where the walk does not look
anyway); what the reuse can miss is another program on the host giving an
unchanged file a new name outside the walk, until some walked directory's
names change.

The walk itself is incremental too: what it found in each directory is kept
per walk configuration and reused while the directory's `(dev, ino, ctime)`
is unchanged (`_Listing`). ctime, not mtime: a command can set a directory's
mtime back after planting a file in it, but no process can set a ctime. A
directory whose ctime was too recent when it was listed is listed again next
time (`timestamps.recent`).
Each directory still costs one lstat per walk: 35 ms became 8 ms for a
settled tree of 20,000 entries.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..limits import Limits
from ..protected import LAYOUT_MARKERS, PROTECTED_DIRS, SITE_DIRS, layout_kind, name_reason, startup_file
from ..timestamps import recent
from . import hostfacts
from .base import EnvironmentUnavailable
from .denies import WildcardDeny

MAX_ENTRIES, MAX_DEPTH = Limits.walk_entries, Limits.walk_depth  # the manifest's defaults
# bwrap's cost grows with the square of the mounts (each read-only bind re-reads the mount table):
# about 20 ms at 50 mounts, 380 ms at 400, 11 s at 3,500. Hard-linked files beyond this many are
# covered by read-only directories instead (a pnpm `node_modules` has thousands of them).
MAX_LINK_MOUNTS = 64
_CACHE_MAX = 16
_cache: dict[tuple[object, ...], tuple[tuple[tuple[str, int, int, int], ...], dict[tuple[int, int], list[tuple[str, bool]]], dict[tuple[int, int], int]]] = {}
_cache_lock = threading.Lock()
# Per walk configuration: each directory's last listing (see `_Listing`). Few configurations: a
# 20,000-entry tree's listings take a few MiB, and a host serves a handful of workspaces at once.
_LISTINGS_MAX = 4
_listings: dict[tuple[object, ...], dict[str, "_Listing"]] = {}


@dataclass(frozen=True)
class CallTree:
    """What one call's walk found that the sandbox must keep read-only or hide beyond its policy."""

    protected: tuple[Path, ...]  # read-only: protected names below a writable root's top, wildcard write denies
    denied: tuple[Path, ...]  # hidden: files (and `/**` directories) wildcard read denies match, and their other names
    linked: tuple[Path, ...] = ()  # read-only: hard-linked files in writable roots not proven to be wholly inside them (or directories holding them)
    frozen: tuple[Path, ...] = ()  # writable roots that hold too many of them apart: read-only as a whole
    bounded: int = 0  # writable directories the walk's bounds left unlisted (read-only, among `linked`, or `frozen`)


class WalkBounded(Exception):
    """The walk stopped at a bound while hunting read-denied names: what it did not list could show one."""


def linked_inodes(paths: Iterable[Path]) -> set[tuple[int, int]]:
    """(st_dev, st_ino) of each of `paths` that is a regular file with more than one link."""
    out: set[tuple[int, int]] = set()
    paths = tuple(paths)
    # Most of a policy's denied paths are missing (the secret files of other systems): `hostfacts` says so
    # from their directories, examined once; only the existing ones need a look of their own.
    facts = hostfacts.Observation().facts(paths) if len(paths) > 1 else (None,) * len(paths)
    for p, fact in zip(paths, facts):
        if fact is not None and not fact.lexists:
            continue
        try:
            st = os.lstat(p)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
            out.add((st.st_dev, st.st_ino))
    return out


@dataclass
class _Links:
    """Regular files with several links seen by the walk, grouped by inode (ENV-13).

    `hunt`: also look in the read-only part of the walk, because a read-denied
    inode may have another name there that would show its content.
    """

    denied_inodes: set[tuple[int, int]]
    hunt: bool
    groups: dict[tuple[int, int], list[tuple[str, bool]]] = field(default_factory=dict)
    nlink: dict[tuple[int, int], int] = field(default_factory=dict)
    pending: list[tuple[str, bool]] = field(default_factory=list)  # regular files: (path, writable)
    # (path, dev, ino, its entries' (name, inode) pairs) of every directory walked: the names in the tree, which
    # alone decide which names an inode has there (a change that leaves them as they were changes no link).
    dirs: list[tuple[str, int, int, tuple[tuple[str, int], ...]]] = field(default_factory=list)

    @classmethod
    def start(cls, denied: Sequence[Path], wildcard_read_denies: bool) -> "_Links":
        inodes = linked_inodes(denied)
        return cls(inodes, hunt=bool(inodes) or wildcard_read_denies)

    def seen(self, directory: str, st: os.stat_result | None, names: tuple[tuple[str, int], ...]) -> None:
        self.dirs.append((directory, -1, -1, ()) if st is None else (directory, st.st_dev, st.st_ino, names))

    def settle(self, key: tuple[object, ...]) -> None:
        """Fill `groups`: from the last walk of the same roots if every directory holds the same names for the
        same inodes as then, else by lstat.

        Names, not change times: a command that made and removed a file (and bwrap's mount points, made and
        removed at every call) changes a directory's ctime but not which names the tree gives each inode,
        and only the latter decides the groups; so the lstat of every file is not paid again for it."""
        fingerprint = tuple(self.dirs)
        with _cache_lock:
            hit = _cache.get(key)
        if hit is not None and hit[0] == fingerprint:
            self.groups, self.nlink = hit[1], hit[2]
            return
        for path, writable in self.pending:
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if st.st_nlink > 1:
                ino = (st.st_dev, st.st_ino)
                self.groups.setdefault(ino, []).append((path, writable))
                self.nlink[ino] = st.st_nlink
        with _cache_lock:
            if len(_cache) >= _CACHE_MAX:
                _cache.clear()
            _cache[key] = (fingerprint, self.groups, self.nlink)

    def result(self, denied: Iterable[str], sensitive: Iterable[str]) -> tuple[list[Path], list[Path]]:
        """(names to hide, names to keep read-only)."""
        hidden, sens = set(denied), set(sensitive)
        hide: list[Path] = []
        keep: list[Path] = []
        for key, names in self.groups.items():
            paths = [p for p, _w in names]
            if key in self.denied_inodes or any(p in hidden for p in paths):
                hide += [Path(p) for p in paths if p not in hidden]
                continue
            whole = len(names) == self.nlink[key] and all(w for _p, w in names) and not any(p in sens for p in paths)
            if not whole:
                keep += [Path(p) for p, w in names if w and p not in sens]
        return hide, keep


def _outermost_roots(roots: Iterable[Path]) -> list[Path]:
    out: list[Path] = []
    for r in sorted({Path(os.path.normpath(r)) for r in roots}, key=lambda p: len(p.parts)):
        if not any(r == o or o in r.parents for o in out):
            out.append(r)
    return out


@dataclass(frozen=True)
class _Listing:
    """What the walk found in one directory, kept for the next walk with the same configuration.

    Reused only while the directory's (dev, ino, ctime) is unchanged: adding,
    removing or renaming an entry changes its ctime, and no process can set a
    ctime back (an mtime can be). A directory whose ctime was too recent when
    it was listed is listed again regardless: a change in the same step of the
    filesystem's clock would keep the ctime (`timestamps.recent`).
    """

    ident: tuple[int, int, int] | None  # (dev, ino, ctime_ns) before the listing; None: not reusable
    writable: bool
    sealed: bool  # inside (or being) a directory kept read-only whole: walked for read denies only
    count: int  # entries, for the walk's bound
    files: tuple[tuple[str, bool], ...]  # regular files whose link count matters: (path, writable)
    denied: tuple[str, ...]  # matched by a wildcard read deny
    protected: tuple[str, ...]  # write-denied, protected names, a repository's hooks and config
    subdirs: tuple[tuple[str, bool, bool], ...]  # to walk next, in push order: (path, writable, sealed)
    names: tuple[tuple[str, int], ...] = ()  # every entry's (name, inode), sorted: what the hard-link groups depend on

    def still(self, st: os.stat_result | None, writable: bool, sealed: bool) -> bool:
        return (st is not None and self.ident == (st.st_dev, st.st_ino, st.st_ctime_ns) and self.writable == writable
                and self.sealed == sealed)


def _never(_path: str) -> bool:
    return False


def _list(
    top: str,
    st: os.stat_result | None,
    top_writable: bool,
    hunt: bool,
    read_denies: Sequence[WildcardDeny],
    write_denies: Sequence[WildcardDeny],
    in_write_root: Callable[[str], bool],
    sealed: bool = False,
) -> _Listing | None:
    """List and classify `top` (`st`: its lstat taken before); None when it cannot be listed.

    `sealed`: `top` lies in a protected directory or an environment (a layout), which the sandbox keeps
    read-only whole (or sweeps): nothing in it is writable, so it is walked, when read denies are
    hunted, for those alone. A listing that shows `top` is a layout seals it too.
    """
    now = time.time_ns()  # before the listing: a change from then on must get another ctime than `st`'s
    try:
        entries = list(os.scandir(top))
    except OSError:
        return None
    if top_writable and not sealed and layout_kind({e.name for e in entries} & LAYOUT_MARKERS):
        sealed = True  # the guard binds it read-only whole
    names = tuple(sorted((e.name, e.inode()) for e in entries))
    if sealed:
        top_writable, in_write_root = False, _never
        if not hunt:
            return _Listing(_reusable(st, now), False, True, len(entries), (), (), (), (), names)
    files: list[tuple[str, bool]] = []
    denied: list[str] = []
    protected: list[str] = []
    subdirs: list[tuple[str, bool, bool]] = []
    top_name = os.path.basename(top)
    in_site = top_name in SITE_DIRS  # decided once: only a site directory can hold Python start-up files
    for entry in entries:
        name = entry.name
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
            is_file = not is_dir and entry.is_file(follow_symlinks=False)
        except OSError:
            continue
        full = entry.path
        if is_file and (top_writable or hunt):
            files.append((full, top_writable))  # its link count is looked at once the walk is done
        if read_denies and (is_file or is_dir) and _matched(read_denies, full, is_file):
            denied.append(full)
            continue  # a hidden directory is hidden whole (nothing below it needs protecting either)
        if top_writable:
            if write_denies and (is_file or is_dir) and _matched(write_denies, full, is_file):
                protected.append(full)
                continue  # read-only as a whole
            protected += _protected_entry(full, name, is_dir, in_site and startup_file(top_name, name))
        if name == ".git" and is_dir:
            continue  # a repository's internals hold nothing else to protect, and no secret a deny names
        if is_dir and (sealed or name in PROTECTED_DIRS):
            if hunt:
                subdirs.append((full, False, True))  # read-only whole, but a read deny reaches inside (ENV-6)
        elif is_dir:
            # A read root above a write root: writability starts where the write root does.
            subdirs.append((full, top_writable or in_write_root(full), False))
    return _Listing(_reusable(st, now), top_writable, sealed, len(entries), tuple(files), tuple(denied), tuple(protected),
                    tuple(subdirs), names)


def _protected_entry(full: str, name: str, is_dir: bool, startup: bool) -> list[str]:
    """What of a writable entry must stay read-only because of its name (with a repository's key files)."""
    if name == ".git" and is_dir:
        return [full, os.path.join(full, "hooks"), os.path.join(full, "config"), os.path.join(full, "info", "attributes")]
    if startup or name_reason(name) is not None:
        # At the top too: the policy no longer lists them there (the guard keeps them), and
        # a hard link to one must be known as a link to a protected file.
        return [full]
    return []


def _reusable(st: os.stat_result | None, now: int) -> tuple[int, int, int] | None:
    """The identity a later walk compares, or None when the ctime was too recent to tell a later change by."""
    if st is not None and not recent(st.st_ctime_ns, now):
        return (st.st_dev, st.st_ino, st.st_ctime_ns)
    return None


def scan(
    write_roots: Sequence[Path],
    read_roots: Sequence[Path] = (),
    read_denies: Sequence[WildcardDeny] = (),
    write_denies: Sequence[WildcardDeny] = (),
    *,
    denied_paths: Sequence[Path] = (),
    protected_paths: Sequence[Path] = (),
    max_entries: int = MAX_ENTRIES,
    max_depth: int = MAX_DEPTH,
) -> CallTree:
    """Walk the writable roots (everything) and, when read denies exist, the read roots (for them).

    `denied_paths` and `protected_paths`: the policy's own (literal) hidden and
    read-only paths, so that their hard links elsewhere are treated alike.
    """
    writable = [os.path.normpath(r) for r in write_roots]
    links = _Links.start(denied_paths, bool(read_denies))
    pending = links.pending
    roots = _outermost_roots([*write_roots, *(read_roots if links.hunt else ())])
    protected: list[Path] = []
    denied: list[Path] = []
    seen = 0

    def in_write_root(p: str) -> bool:
        return any(p == w or p.startswith(w + "/") for w in writable)

    stack: list[tuple[str, int, bool, bool]] = [(os.fspath(r), 0, in_write_root(os.fspath(r)), False) for r in roots]
    config = (tuple(writable), tuple(roots), links.hunt, tuple(read_denies), tuple(write_denies))
    with _cache_lock:
        known = _listings.get(config, {})
    listed: dict[str, _Listing] = {}
    unwalked: list[tuple[str, bool]] = []  # directories a bound left unlisted: (path, writable)
    while stack:
        if seen >= max_entries:
            unwalked += [(top, w) for top, _depth, w, _sealed in stack]
            break
        top, depth, top_writable, sealed = stack.pop()
        try:
            st: os.stat_result | None = os.lstat(top)
        except OSError:
            st = None
        got = known.get(top)
        if got is None or not got.still(st, top_writable, sealed):
            got = _list(top, st, top_writable, links.hunt, read_denies, write_denies, in_write_root, sealed)
            if got is None:
                links.seen(top, None, ())
                if st is not None and stat.S_ISDIR(st.st_mode):
                    # There but not listable (a command can `chmod 000` a directory for the next call's walk):
                    # unseen like one past the bounds, so read-only (or, hunting, refused), never writable.
                    unwalked.append((top, top_writable))
                continue
        links.seen(top, st, got.names)
        listed[top] = got
        seen += got.count
        pending.extend(got.files)
        denied.extend(map(Path, got.denied))
        protected.extend(map(Path, got.protected))
        if depth < max_depth:
            stack.extend((sub, depth + 1, sub_writable, sub_sealed) for sub, sub_writable, sub_sealed in got.subdirs)
        else:
            unwalked += [(sub, sub_writable) for sub, sub_writable, _sealed in got.subdirs]
    with _cache_lock:
        _listings.pop(config, None)  # re-inserted last: the dict's order is the order of use
        if len(_listings) >= _LISTINGS_MAX:
            _listings.pop(next(iter(_listings)))  # the configuration walked least recently
        _listings[config] = listed
    links.settle((tuple(writable), tuple(roots), links.hunt, max_entries, max_depth))
    if unwalked and links.hunt:
        raise WalkBounded(
            f"the walk that applies the read-deny rules cannot see every directory the sandbox shows (more than "
            f"{max_entries} entries, deeper than {max_depth} levels, or one it cannot list); raise limits.walk_entries "
            "or limits.walk_depth")
    hide, keep = links.result(
        [*map(os.fspath, denied), *map(os.fspath, denied_paths)], [*map(os.fspath, protected), *map(os.fspath, protected_paths)]
    )
    # Fail closed past the bounds: what the walk did not list may hold hard links to files anywhere, or
    # names a write deny covers, so it is read-only for the call (ENV-13).
    beyond = [Path(p) for p, w in unwalked if w]
    roots_beyond = [p for p in beyond if os.fspath(p) in writable]  # a root never listed at all: read-only whole
    linked, frozen = cover([*keep, *(p for p in beyond if p not in roots_beyond)], [Path(w) for w in writable], MAX_LINK_MOUNTS)
    frozen = sorted({*frozen, *roots_beyond})
    return CallTree(tuple(protected), tuple(denied + hide), tuple(linked), tuple(frozen), len(beyond))


def bounded_scan(limits: Any, *args: Any, **kwargs: Any) -> CallTree:
    """`scan` within the manifest's walk bounds (`limits.walk_entries`, `limits.walk_depth`); a walk that
    stops at one while hunting read-denied names makes the sandbox unavailable for the call."""
    try:
        return scan(*args, max_entries=limits.walk_entries, max_depth=limits.walk_depth, **kwargs)
    except WalkBounded as exc:
        raise EnvironmentUnavailable(str(exc)) from None


def cover(paths: Sequence[Path], roots: Sequence[Path], cap: int) -> tuple[list[Path], list[Path]]:
    """At most `cap` paths inside `roots` that cover every one of `paths`, and the roots to freeze whole if that fails.

    The deepest paths are replaced by their parent directory, level by level,
    never by a root itself; when even the children of the roots are too many,
    the roots that hold them are returned to be made read-only entirely.
    Covering more than needed only makes more read-only (fail closed).
    """
    root_set = set(roots)
    targets = set(paths)
    while len(targets) > cap:
        deepest = max(len(t.parts) for t in targets)
        lifted = {t.parent if len(t.parts) == deepest and t.parent not in root_set else t for t in targets}
        lifted = {t for t in lifted if not any(a in lifted for a in t.parents)}
        if lifted == targets:
            break
        targets = lifted
    if len(targets) <= cap:
        return sorted(targets), []
    return [], sorted({r for t in targets for r in roots if r in t.parents})


def _matched(denies: Sequence[WildcardDeny], path: str, is_file: bool) -> bool:
    """A file any wildcard deny matches, or a directory a `/**` one matches."""
    for d in denies:
        if (is_file or d.tree) and path.endswith(d.suffix) and d.matches(path):
            return True
    return False
