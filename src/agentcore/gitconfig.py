"""Reading git configuration the way git does, to learn what it would run (ENV-7, ENV-14).

Two consumers need the same facts:

- the protected set: directories named by `core.hooksPath` and files pulled
  in by `include.path` / `includeIf.*.path` run code (or define what runs)
  whenever the user's own git runs in that repository, so they are
  protected like `.git` itself;
- the sandbox's git environment: driver-named keys (`filter.<x>.clean`,
  `diff.<x>.textconv`, `merge.<x>.driver`, `alias.<x>`, ...) can only be
  overridden by name, so every name a repository defines must be known
  before the command runs.

The parser follows git's grammar (sections, quoted subsections, the old
`[a.b]` form, quoted values, the escapes `\\n \\t \\b \\" \\\\`, backslash
line continuations, `#`/`;` comments, keys without a value). Anything it
does not understand raises `GitConfigError`: the callers fail closed
(the sandbox refuses to run, the write tools refuse to write), because a
file git reads differently from us could hide a hook directory or a driver.
Every `includeIf` target is followed whatever its condition (the
condition may become true later), and a missing include target is kept
as a path to protect (creating it later would add configuration).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

MAX_INCLUDE_DEPTH = 10  # git's own limit
MAX_CONFIG_BYTES = 4 << 20  # a bigger configuration file is not something git users write by hand


class GitConfigError(Exception):
    """A configuration file that cannot be read or parsed the way git would (never echoes its content)."""


@dataclass(frozen=True)
class Entry:
    """One `key = value` of a configuration file as git reads it, and the file it came from."""

    section: str  # lowercased; empty for a key written before any section header
    subsection: str | None  # case kept (quoted form); lowercased for the old `[a.b]` form, as git does
    key: str  # lowercased
    value: str | None  # None: a key written without `=` (boolean true)
    origin: str  # the file it came from

    @property
    def name(self) -> str:
        if self.subsection is not None:
            return f"{self.section}.{self.subsection}.{self.key}"
        return f"{self.section}.{self.key}" if self.section else self.key


@dataclass
class ConfigSet:
    """Every entry of a set of files (includes followed), the files read and the include targets named."""

    entries: list[Entry] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    includes: list[str] = field(default_factory=list)  # absolute include targets, existing or not

    def values(self, section: str, key: str) -> Iterator[Entry]:
        for e in self.entries:
            if e.section == section and e.key == key:
                yield e


# -- the parser ---------------------------------------------------------------------

_ESCAPES = {"n": "\n", "t": "\t", "b": "\b", '"': '"', "\\": "\\"}


class _Reader:
    """A cursor over one file's text with git's line/continuation rules."""

    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0

    def peek(self) -> str:
        return self.s[self.i] if self.i < len(self.s) else ""

    def take(self) -> str:
        c = self.peek()
        self.i += 1
        return c

    def skip_blank(self) -> None:
        while self.peek() in (" ", "\t", "\r") and self.peek():
            self.i += 1

    def skip_line(self) -> None:
        j = self.s.find("\n", self.i)
        self.i = len(self.s) if j < 0 else j + 1


def _is_key_char(c: str) -> bool:
    return c.isascii() and (c.isalnum() or c == "-")


def _section_header(r: _Reader) -> tuple[str, str | None]:
    """After `[`: `name]`, `name "sub"]` or the old `name.sub]`."""
    name = ""
    while True:
        c = r.take()
        if c == "]":
            break
        if c in (" ", "\t"):
            r.skip_blank()
            if r.take() != '"':
                raise GitConfigError("bad section header")
            return _check_section(name), _quoted_subsection(r)
        if not c or not (_is_key_char(c) or c == "."):
            raise GitConfigError("bad section header")
        name += c
    if "." in name:
        sect, _, sub = name.partition(".")
        if not sub:
            raise GitConfigError("bad section header")
        return _check_section(sect), sub.lower()
    return _check_section(name), None


def _check_section(name: str) -> str:
    if not name or not all(_is_key_char(c) for c in name):
        raise GitConfigError("bad section name")
    return name.lower()


def _quoted_subsection(r: _Reader) -> str:
    out = []
    while True:
        c = r.take()
        if not c or c == "\n":
            raise GitConfigError("unterminated subsection")
        if c == '"':
            break
        if c == "\\":
            c = r.take()
            if not c or c == "\n":
                raise GitConfigError("bad subsection escape")
        out.append(c)
    if r.take() != "]":
        raise GitConfigError("bad section header")
    return "".join(out)


def _value(r: _Reader) -> str:
    """After `=`: the value up to the end of the logical line (git's own rules, including its quirks)."""
    out: list[str] = []
    quoted = False
    comment = False
    spaces = 0
    while True:
        c = r.take()
        if not c or c == "\n":
            if quoted:
                raise GitConfigError("unterminated quoted value")
            return "".join(out)
        if comment:
            continue
        if not quoted and c.isspace():
            if any(out):
                spaces += 1  # inner whitespace becomes spaces; leading and trailing whitespace is dropped
            continue
        if not quoted and c in ("#", ";"):
            comment = True
            continue
        out.append(" " * spaces)
        spaces = 0
        if c == "\\":
            nxt = r.take()
            if nxt == "\n":
                continue  # line continuation
            if nxt not in _ESCAPES:
                raise GitConfigError("bad escape in a value")
            out.append(_ESCAPES[nxt])
        elif c == '"':
            quoted = not quoted
        else:
            out.append(c)


def _key(r: _Reader, first: str) -> tuple[str, str | None]:
    name = first
    while _is_key_char(r.peek()):
        name += r.take()
    while r.peek() in (" ", "\t") and r.peek():
        r.take()
    c = r.take()
    if c in ("\n", ""):
        return name.lower(), None
    if c != "=":
        raise GitConfigError("bad key")
    return name.lower(), _value(r)


def parse_text(text: str, origin: str = "") -> list[Entry]:
    """Entries of one configuration text, in order (includes are not followed here)."""
    if "\0" in text:
        raise GitConfigError("a NUL byte in a configuration file")
    if text.startswith("\ufeff"):
        text = text[1:]
    r = _Reader(text.replace("\r\n", "\n"))
    section: str | None = None
    sub: str | None = None
    out: list[Entry] = []
    while r.i < len(r.s):
        c = r.take()
        if c in ("\n", "") or c.isspace():
            continue
        if c in ("#", ";"):
            r.skip_line()
        elif c == "[":
            section, sub = _section_header(r)
        elif c.isascii() and c.isalpha():
            key, value = _key(r, c)
            out.append(Entry(section or "", sub, key, value, origin))  # git accepts a key before any section
        else:
            raise GitConfigError("bad config line")
    return out


def read_file(path: str) -> str | None:
    """The text of a configuration file; None when it does not exist (git skips those).

    These paths lie in the workspace, where a command can make one a FIFO or a link to a device: an
    open by name would wait for a writer (hanging the host) or run a driver's open. So the path is
    opened O_PATH first (neither happens), and only a regular file (or the null device) is read.
    """
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)  # links followed, as git follows them
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise GitConfigError(f"a configuration file cannot be examined ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise GitConfigError("a configuration path is a directory")
        if stat.S_ISCHR(st.st_mode) and st.st_rdev == _NULL_DEVICE:
            return ""  # `include.path = /dev/null`: git reads it as empty
        if not stat.S_ISREG(st.st_mode):
            raise GitConfigError("a configuration path is not a regular file")
        if st.st_size > MAX_CONFIG_BYTES:
            raise GitConfigError("a configuration file is too large to check")
        data = _read_regular(fd, path)
    finally:
        os.close(fd)
    if len(data) > MAX_CONFIG_BYTES:
        raise GitConfigError("a configuration file is too large to check")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")  # git reads bytes; names we care about are ASCII either way


_NULL_DEVICE = os.makedev(1, 3)


def _read_regular(fd: int, path: str) -> bytes:
    """At most MAX_CONFIG_BYTES + 1 bytes of the regular file the O_PATH `fd` holds."""
    try:
        try:
            rfd = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)  # that inode, not the name
        except FileNotFoundError:  # no /proc: by name again, never waiting, and only a regular file is read
            rfd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY)
            if not stat.S_ISREG(os.fstat(rfd).st_mode):
                os.close(rfd)
                raise GitConfigError("a configuration path is not a regular file") from None
        with os.fdopen(rfd, "rb") as f:
            return f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise GitConfigError(f"a configuration file cannot be read ({exc.strerror})") from None


def _include_target(value: str | None, including: str, home: str) -> str:
    if value is None or value == "":
        raise GitConfigError("an include without a path")
    if value.startswith("%(prefix)/"):
        raise GitConfigError("an include relative to git's installation prefix")
    if value == "~" or value.startswith("~/"):
        value = home + value[1:]
    elif value.startswith("~"):
        raise GitConfigError("an include in another user's home directory")
    if not os.path.isabs(value):
        value = os.path.join(os.path.dirname(including), value)
    return os.path.normpath(value)


def load(paths: Iterable[str], *, home: str | None = None) -> ConfigSet:
    """Read `paths` in order, following every include (whatever its condition) up to git's depth."""
    out = ConfigSet()
    h = home if home is not None else os.path.expanduser("~")
    for p in paths:
        _load_one(os.path.normpath(p), out, h, 0)
    return out


def _load_one(path: str, out: ConfigSet, home: str, depth: int) -> None:
    if depth > MAX_INCLUDE_DEPTH:
        raise GitConfigError("includes nested too deeply")
    text = read_file(path)
    if text is None:
        return
    out.files.append(path)
    for e in parse_text(text, path):
        out.entries.append(e)
        if e.key == "path" and (e.section == "include" and e.subsection is None or e.section == "includeif"):
            target = _include_target(e.value, path, home)
            out.includes.append(target)
            _load_one(target, out, home, depth + 1)


# -- repositories ----------------------------------------------------------------------


@dataclass(frozen=True)
class Repo:
    """One repository as git would open it: where its files are and which configuration it reads."""

    top: str | None  # the working tree top (None for a bare layout)
    gitdir: str  # the directory with HEAD (a worktree's own, or the repository's)
    commondir: str  # where config, hooks, objects and refs live
    pointer: str | None = None  # the `.git` file that named `gitdir`, if any

    def config_files(self) -> list[str]:
        files = [os.path.join(self.commondir, "config")]
        wt = os.path.join(self.gitdir, "config.worktree")
        if wt not in files:
            files.append(wt)
        return files


def read_gitfile(path: str) -> str:
    """The directory a `.git` file points at (`gitdir: <path>`, relative to the file's directory)."""
    text = read_file(path)
    if text is None:
        raise GitConfigError("a .git file vanished")
    line = text.split("\n", 1)[0].rstrip("\r")
    if not line.startswith("gitdir: ") or len(line) <= len("gitdir: "):
        raise GitConfigError("a .git file without a gitdir line")
    target = line[len("gitdir: "):]
    if not os.path.isabs(target):
        target = os.path.join(os.path.dirname(path), target)
    return os.path.normpath(target)


def _commondir(gitdir: str) -> str:
    p = os.path.join(gitdir, "commondir")
    text = read_file(p)
    if text is None:
        return gitdir
    target = text.split("\n", 1)[0].rstrip("\r")
    if not target:
        raise GitConfigError("an empty commondir file")
    if not os.path.isabs(target):
        target = os.path.join(gitdir, target)
    return os.path.normpath(target)


def repo_at(dotgit: str) -> Repo:
    """The repository a `.git` entry (directory or gitfile) opens."""
    if os.path.isdir(dotgit) and not os.path.islink(dotgit):
        return Repo(os.path.dirname(dotgit), dotgit, _commondir(dotgit))
    if os.path.islink(dotgit):
        target = os.path.realpath(dotgit)
        return Repo(os.path.dirname(dotgit), target, _commondir(target) if os.path.isdir(target) else target, dotgit)
    gitdir = read_gitfile(dotgit)
    return Repo(os.path.dirname(dotgit), gitdir, _commondir(gitdir) if os.path.isdir(gitdir) else gitdir, dotgit)


def bare_repo(directory: str) -> Repo:
    return Repo(None, directory, _commondir(directory))


def submodule_gitdirs(commondir: str, limit: int = 1000) -> list[str]:
    """Every `modules/.../` git directory under a repository's common dir (nested submodules included)."""
    out: list[str] = []
    stack = [os.path.join(commondir, "modules")]
    while stack and len(out) < limit:
        d = stack.pop()
        try:
            with os.scandir(d) as it:
                entries = [e for e in it if e.is_dir(follow_symlinks=False)]
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:
            raise GitConfigError(f"submodule directories cannot be listed ({exc.strerror})") from None
        for e in entries:
            if os.path.lexists(os.path.join(e.path, "HEAD")):
                out.append(e.path)
                stack.append(os.path.join(e.path, "modules"))
            else:
                stack.append(e.path)  # a submodule name with `/` in it
    return out


def worktree_gitdirs(commondir: str) -> list[str]:
    """The per-worktree git directories (`worktrees/<name>`) of a repository."""
    try:
        with os.scandir(os.path.join(commondir, "worktrees")) as it:
            return [e.path for e in it if e.is_dir(follow_symlinks=False)]
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        raise GitConfigError(f"worktree directories cannot be listed ({exc.strerror})") from None


def global_config_files() -> list[str]:
    """The system and global files the user's own git reads, honouring the environment overrides."""
    env = os.environ
    out: list[str] = []
    if env.get("GIT_CONFIG_NOSYSTEM", "").lower() not in ("1", "true", "yes", "on"):
        out.append(env.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig")
    home = os.path.expanduser("~")
    if env.get("GIT_CONFIG_GLOBAL"):
        out.append(env["GIT_CONFIG_GLOBAL"])
    else:
        xdg = env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
        out += [os.path.join(xdg, "git", "config"), os.path.join(home, ".gitconfig")]
    return [p for p in out if p and p != "/dev/null"]


def hook_dirs(cfg: ConfigSet, repo: Repo | None, home: str | None = None) -> list[str]:
    """Absolute directories `core.hooksPath` names, for `repo` (relative values: its top and its git dir)."""
    h = home if home is not None else os.path.expanduser("~")
    out: list[str] = []
    for e in cfg.values("core", "hookspath"):
        v = e.value
        if v is None or v == "":
            continue
        if v == "~" or v.startswith("~/"):
            out.append(os.path.normpath(h + v[1:]))
        elif os.path.isabs(v):
            out.append(os.path.normpath(v))
        elif repo is not None:
            bases = [b for b in (repo.top, repo.gitdir, repo.commondir) if b]
            out += [os.path.normpath(os.path.join(b, v)) for b in bases]
    return list(dict.fromkeys(out))


def submodule_paths(gitmodules: str) -> list[str]:
    """The `submodule.<name>.path` values of a `.gitmodules` file, relative to its directory."""
    cfg = ConfigSet()
    text = read_file(gitmodules)
    if text is None:
        return []
    cfg.entries = parse_text(text, gitmodules)
    out = []
    for e in cfg.entries:
        if e.section == "submodule" and e.key == "path" and e.value:
            rel = os.path.normpath(e.value)
            if not rel.startswith("..") and not os.path.isabs(rel):
                out.append(rel)
    return out
