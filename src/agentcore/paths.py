"""Path canonicalisation and symlink-safe opening (CAP, FILE).

Every path a tool touches is first made absolute against the workspace,
resolved through the filesystem (symlinks included) and only then compared,
component by component, with the compiled scopes. At the moment of use the
canonical path is opened one component at a time with O_NOFOLLOW, so a
symlink swapped in after the check is refused instead of followed.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from .errors import Refusal


class PathRefused(Refusal):
    def __init__(self, code: str, message: str) -> None:
        super().__init__("capability", code, message)


def canonicalize(raw: str, base: Path) -> Path:
    """Absolute, normalised, symlink-resolved form of `raw` (relative to `base`).

    For a path that does not exist yet, the deepest existing ancestor is
    resolved and the missing tail appended; a `..` inside the missing tail, a
    symlink loop or a dangling symlink cannot be resolved and is refused.
    """
    return canonicalize_stat(raw, base)[0]


def canonicalize_stat(raw: str, base: Path) -> tuple[Path, os.stat_result | None]:
    """`canonicalize`, plus the stat of what the path names when it exists (None when it does not)."""
    if not isinstance(raw, str) or raw == "":
        raise PathRefused("bad_path", "the path is empty")
    if "\x00" in raw:
        raise PathRefused("bad_path", "the path contains a NUL byte")
    joined = os.path.join(os.fspath(base), os.path.expanduser(raw) if raw.startswith("~/") else raw)
    if not os.path.isabs(joined):
        raise PathRefused("bad_path", "the path is not absolute after joining with the workspace")
    found = _kernel_resolve(joined)  # the common case, an existing path
    if found is not None:
        return Path(found[0]), found[1]
    try:
        return Path(os.path.realpath(joined, strict=True)), None
    except OSError:
        pass
    tail: list[str] = []
    current = joined
    while not os.path.lexists(current):
        parent, name = os.path.split(current)
        if parent == current:
            break
        tail.append(name)
        current = parent
    try:
        resolved = os.path.realpath(current, strict=True)
    except OSError as exc:  # loops, dangling links, permission problems
        raise PathRefused("unresolvable", f"the path cannot be resolved ({errno.errorcode.get(exc.errno or 0, 'error')})") from None
    for name in reversed(tail):
        if name in ("", "."):
            continue
        if name == "..":
            raise PathRefused("unresolvable", "the path climbs out of a directory that does not exist")
        resolved = os.path.join(resolved, name)
    return Path(resolved), None


_proc_fd = True  # cleared when /proc/self/fd cannot be read (no /proc mounted): realpath does it all then


def _kernel_resolve(path: str) -> tuple[str, os.stat_result] | None:
    """Let the kernel resolve an existing path: open O_PATH, read its /proc/self/fd link, fstat.

    Three system calls instead of an lstat per component in `os.path.realpath`.
    None (the caller falls back to realpath) whenever the answer is not a plain
    absolute path of a file that is still linked: a pseudo-file, a magic link,
    or something unlinked while we looked.
    """
    global _proc_fd
    if not _proc_fd:
        return None
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
        st = os.fstat(fd)  # after the readlink: if it was unlinked before the name was read, nlink says so
    except FileNotFoundError:
        _proc_fd = False
        return None
    except OSError:
        return None
    finally:
        os.close(fd)
    if not target.startswith("/") or st.st_nlink == 0:
        return None
    return target, st


def is_within(path: Path | str, root: Path | str) -> bool:
    """Component-wise containment of canonical paths (never a string prefix test)."""
    p = os.fspath(path)
    r = os.fspath(root)
    if r == "/":
        return p.startswith("/")
    return p == r or p.startswith(r + "/")


def open_nofollow(path: Path, flags: int, mode: int = 0o666) -> int:
    """Open a canonical absolute path without following any symlink on the way.

    The caller passes a path that `canonicalize` produced, so it contains no
    symlinks; meeting one now means the tree changed after the check.
    """
    parts = Path(path).parts
    if not parts or parts[0] != "/":
        raise PathRefused("bad_path", "internal: path is not absolute")
    dir_fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in parts[1:-1]:
            try:
                next_fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise PathRefused("symlink_race", "a path component changed into a symlink after the check") from None
                raise
            os.close(dir_fd)
            dir_fd = next_fd
        if len(parts) == 1:
            return os.dup(dir_fd)
        try:
            return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise PathRefused("symlink_race", "the file changed into a symlink after the check") from None
            # With O_DIRECTORY the kernel reports a symlink as ENOTDIR, not ELOOP.
            if exc.errno == errno.ENOTDIR and flags & os.O_DIRECTORY and _is_link_at(parts[-1], dir_fd):
                raise PathRefused("symlink_race", "a path component changed into a symlink after the check") from None
            raise
    finally:
        os.close(dir_fd)


def _is_link_at(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def open_parent_nofollow(path: Path) -> int:
    """A directory fd for `path.parent`, opened like `open_nofollow`."""
    return open_nofollow(Path(path).parent, os.O_RDONLY | os.O_DIRECTORY)


def is_regular_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False
