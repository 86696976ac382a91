"""The capability surface handed to tools (TOOL): fs, processes, network.

Tools never open files, spawn processes or dial sockets themselves. Every
method here re-checks scope at the moment of use and opens canonical paths
without following symlinks, so a tree changed after the capability check
cannot redirect a call.
"""

from __future__ import annotations

import bisect
import codecs
import functools
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable, Protocol, Sequence, TypeVar

from .errors import Refusal, ToolFailure
from .lazydc import lazy_dataclass  # made on first use: every call imports this module, few make these
from .paths import PathRefused, canonicalize, is_within, open_nofollow
from .patterns.globtext import glob_unescape, has_wildcard
from .protected import write_protection
from .rules.evaluator import Decision, Subject
from .truncation import ByteSpool, LineSpool, SidecarAllowance
from .watchdog import CLOSED_SCREEN, ReadScreen

if TYPE_CHECKING:
    from .asking import AskBroker
    from .environments.base import Environment, OutputSink, ProcessOutcome, SandboxPolicy
    from .manifest.compiled import CompiledManifest
    from .session import Session

# (stream, text): a tool's progress while it runs, for the call's observers ("output", "progress").
Progress = Callable[[str, str], Awaitable[None]]


class ToolLookup(Protocol):
    """The catalogue as tools see it: the compiler's protocol plus iteration (tool_search)."""

    def has(self, tool_id: str) -> bool: ...

    def get(self, tool_id: str) -> Any: ...

    def ids(self) -> tuple[str, ...]: ...

    def load_error(self, tool_id: str) -> str | None: ...

    def tools(self) -> Iterable[Any]: ...


class SubagentHost(Protocol):
    """What `task` asks of the engine that runs it: one child agent run (SUB)."""

    async def run_subagent(
        self, manifest: "CompiledManifest", parent: "Session", *, prompt: str, description: str, call_id: str
    ) -> str: ...


def _not_regular(st: os.stat_result) -> ToolFailure:
    if stat.S_ISDIR(st.st_mode):
        return ToolFailure("is_directory", "the path is a directory")
    return ToolFailure("not_regular", "the path is not a regular file")


def _refuse_linked(st: os.stat_result) -> None:
    """A regular file with other hard links is never opened or replaced (CAP-13), checked at the moment of use."""
    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        raise Refusal("capability", "hard_link", "the file has other hard links, which may lie outside the scope")


def _hides(decision: Decision) -> bool:
    """Whether a decision keeps a path out of search results: a deny, or an ask that a rule made.

    The default `ask` (no rule matched) does not hide: it applies to every path
    nobody wrote a rule for, and would empty every search. An explicit ask rule
    says "ask before reading these", which a search that shows their contents
    or names would skip.
    """
    return decision.action == "deny" or (decision.action == "ask" and decision.rule is not None)


_GLOB_META = re.compile(r"[*?\[\]{}\\/\0]")
_N = TypeVar("_N", str, bytes)


def _trie(words: Sequence[str]) -> dict[str, Any]:
    """A character trie of `words` in which a word that contains a shorter one as a prefix is dropped (it adds nothing)."""
    root: dict[str, Any] = {}
    for word in sorted(set(words), key=len):
        node = root
        for ch in word:
            if "" in node:
                break  # a shorter word ends here: every text with `word` already has it
            node = node.setdefault(ch, {})
        else:
            node.clear()
            node[""] = {}
    return root


def _trie_regex(node: dict[str, Any]) -> str:
    if "" in node:
        return ""
    parts = [re.escape(ch) + _trie_regex(child) for ch, child in sorted(node.items())]
    return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"


@functools.lru_cache(maxsize=16)
def _marker_regexes(markers: tuple[str, ...]) -> tuple["re.Pattern[str]", "re.Pattern[bytes]"]:
    """One pass for all markers: a trie-shaped alternation is far cheaper for `re` than one find per marker."""
    pattern = _trie_regex(_trie(markers))
    return re.compile(pattern), re.compile(pattern.encode("utf-8", "surrogateescape"))


def _marked(names: Sequence[_N], markers: tuple[str, ...]) -> list[int]:
    """Indices of the names that contain a marker after lower-casing: whole-list scans, Python work only per hit."""
    if not names or not markers:
        return []
    text_rx, bytes_rx = _marker_regexes(markers)
    text: str | bytes
    if isinstance(names[0], bytes):
        joined = b"\0".join(names)  # type: ignore[arg-type]
        if joined.isascii():
            text = joined.lower()  # ASCII: lower() keeps every offset
            hits = [m.start() for m in bytes_rx.finditer(text)]
            sep = b"\0"
        else:
            text = joined.decode("utf-8", "surrogateescape").lower()
            hits = [m.start() for m in text_rx.finditer(text)]
            sep = "\0"  # type: ignore[assignment]
    else:
        text = "\0".join(names).lower()  # type: ignore[arg-type]
        hits = [m.start() for m in text_rx.finditer(text)]
        sep = "\0"  # type: ignore[assignment]
    if not hits:
        return []
    # lower() may change lengths outside ASCII: locate names by the separators of the lowered text.
    seps = [m.start() for m in re.finditer(re.escape(sep), text)]  # type: ignore[call-overload]
    return sorted({bisect.bisect_left(seps, at) for at in hits})


@lazy_dataclass
class SearchScope:
    """Which results of one search are shown, and how many were withheld (PERM-14, FILE-13).

    Three filters: fs.read (a path outside it is simply not there), the
    rules (`visible`, decided once per search by `ScopedFS.tree_filter`), and
    the watchdog's `ReadScreen`. Paths in fs.read that the rules or the
    screen hide are counted in `withheld`; which ones is never told.
    """

    rules: Callable[[str], bool] | None
    """None: no rule hides anything beneath the root."""
    in_scope: Callable[[str], bool]
    screen: ReadScreen
    markers: tuple[str, ...] | None
    withheld: int = 0

    def withheld_among(self, names: Sequence[_N], prefix: str) -> set[int]:
        """Indices of the `names` (relative to the directory `prefix`, which ends in `/`) that the screen withholds."""
        if self.markers == () or not names:
            return set()
        candidates = range(len(names)) if self.markers is None else _marked(names, self.markers)
        return {i for i in candidates if self._withholds(prefix + _as_text(names[i]))}

    def screen_out(self, names: list[_N], prefix: str) -> list[_N]:
        """`names` without those the screen withholds, which are counted."""
        drop = self.withheld_among(names, prefix)
        if not drop:
            return names
        self.withheld += len(drop)
        return [n for i, n in enumerate(names) if i not in drop]

    def shows(self, path: str) -> bool:
        """The rules' verdict on one path already screened; a hidden path in fs.read is counted."""
        if self.rules is None or self.rules(path):
            return True
        if self.in_scope(path):
            self.withheld += 1
        return False

    def _withholds(self, path: str) -> bool:
        try:
            return bool(self.screen.withholds(path))
        except Exception:  # a screen that cannot answer for a path withholds it
            return True


def _as_text(name: str | bytes) -> str:
    return name if isinstance(name, str) else name.decode("utf-8", "surrogateescape")


def screen_markers(screen: ReadScreen, root: str) -> tuple[str, ...] | None:
    """The screen's markers for `root`, or None when it gives none usable (each must be a non-empty glob-free name part)."""
    try:
        markers = screen.markers(root)
    except Exception:
        return None
    if markers is None:
        return None
    out = tuple(markers)
    if not all(isinstance(m, str) and m and m == m.lower() and not _GLOB_META.search(m) for m in out):
        return None
    return out


class ScopedFS:
    def __init__(self, manifest: "CompiledManifest", session: "Session", tool: str, screen: ReadScreen = CLOSED_SCREEN) -> None:
        self._m = manifest
        self._s = session
        self._tool = tool
        self._screen = screen

    def search_scope(self, root: str) -> SearchScope:
        """What a search from the canonical `root` may show: fs.read, the rules and the watchdog's read screen.

        `root` is the directory the results' relative names start from (for a
        file, its directory).
        """
        return SearchScope(self.tree_filter(root), self.may_read, self._screen, screen_markers(self._screen, root))

    # -- scope -------------------------------------------------------------
    def may_read(self, path: str) -> bool:
        return is_within(path, self._s.workdir) or self._m.effective.can_read(path)

    def may_write(self, path: str) -> bool:
        return self._m.effective.can_write(path) and write_protection(path, self._m.protected_files) is None

    def visible(self, path: str) -> bool:
        """A search result is shown only if it is readable and no rule denies reading it or asks first (PERM-14)."""
        if not self.may_read(path):
            return False
        engine = self._s.rule_evaluator
        if _hides(engine.evaluate(Subject(self._tool, "fs.read", "path", path))):
            return False
        # A listing or search reveals what `read` would: a rule denying `read`
        # on a path, or asking before it, hides it from every search tool too.
        return self._tool == "read" or not _hides(engine.evaluate(Subject("read", "fs.read", "path", path)))

    def tree_filter(self, root: str) -> Callable[[str], bool] | None:
        """The visibility test for search results at or beneath the canonical path `root`.

        Decided once per search instead of fully per result. When `root` lies in
        the session directory or in an fs.read scope `<literal dir>/**`, every
        path beneath it is readable, and only deny rules can still hide one; a
        rule matches nothing that fails its literal prefix or suffix (the rule
        engine's own quick rejects), so:

        - None: no deny or ask rule that `visible` consults can match anything
          here; every result is visible, no per-path test is needed;
        - else a predicate equal to `visible` on every path beneath `root`,
          calling it only for paths that pass some reaching rule's quick checks.

        Outside such a scope: `visible` itself.
        """
        if not self._tree_readable(root):
            return self.visible
        denies = self._reaching_denies(root)
        if not denies:
            return None
        visible = self.visible

        def check(path: str) -> bool:
            loose_end = path[-1:] in ("/", "\n")  # the matchers accept these past the suffix
            for prefix, suffix in denies:
                if path.startswith(prefix) and (loose_end or path.endswith(suffix)):
                    return visible(path)
            return True

        return check

    def _tree_readable(self, root: str) -> bool:
        if is_within(root, self._s.workdir):
            return True
        for pp in self._m.effective.fs_read:
            text = pp.expanded
            if not text.endswith("/**") or has_wildcard(text[:-3]):
                continue  # only `<literal dir>/**` covers a whole tree by construction
            if is_within(root, glob_unescape(text[:-3]) or "/"):
                return True
        return False

    def _reaching_denies(self, root: str) -> list[tuple[str, str]]:
        """(literal prefix, literal suffix) of each deny or ask rule `visible` consults that could match `root` or beneath."""
        perms = {"*", self._tool, "read", "fs.read"}
        under = root if root.endswith("/") else root + "/"
        out: list[tuple[str, str]] = []
        for cr in self._s.rule_evaluator.rules:
            if cr.rule.action == "allow" or cr.rule.permission not in perms:
                continue
            fn, _literal, _exact, prefix = cr.matcher("path")
            if fn is None:
                continue  # not a valid path pattern: the engine skips it for paths too
            # Every path the rule can match starts with `prefix`; every path here
            # is `root` itself or starts with `under`.
            if under.startswith(prefix) or prefix.startswith(under):
                out.append((prefix, cr.literal_suffix("path")))
        return out

    def _recheck(self, path: Path, mode: str) -> Path:
        try:
            again = canonicalize(os.fspath(path), Path("/"))
        except PathRefused:
            raise ToolFailure("symlink_race", "the path changed after it was checked") from None
        if again != path:
            raise ToolFailure("symlink_race", "the path changed after it was checked")
        p = os.fspath(path)
        if (mode == "read" and not self.may_read(p)) or (mode == "write" and not self.may_write(p)):
            raise ToolFailure("out_of_scope", "the path is outside the scope")
        return path

    # -- operations ----------------------------------------------------------
    def stat(self, path: Path) -> os.stat_result | None:
        try:
            return os.lstat(path)
        except FileNotFoundError:
            return None

    def open_read(self, path: Path) -> int:
        self._recheck(path, "read")
        try:
            # O_NONBLOCK: opening a FIFO must not hang the call; regular files ignore it.
            fd = open_nofollow(path, os.O_RDONLY | os.O_NONBLOCK)
        except PathRefused as exc:
            raise ToolFailure(exc.code, exc.message) from None
        except FileNotFoundError:
            raise ToolFailure("not_found", "the file does not exist") from None
        except PermissionError:
            raise ToolFailure("permission_denied", "the operating system refused to open the file") from None
        try:
            _refuse_linked(os.fstat(fd))  # on what was opened: a link made after the check counts too
        except BaseException:
            os.close(fd)
            raise
        return fd

    def read_bytes(self, path: Path, limit: int) -> bytes:
        """The whole file if it has at most `limit` bytes, else a `too_large` refusal (layer `limit`)."""
        fd = self.open_read(path)
        # Checked on the raw fd: os.fdopen itself raises on a directory.
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise _not_regular(st)
        with os.fdopen(fd, "rb") as fh:
            if st.st_size > limit:
                raise Refusal("limit", "too_large", f"the file has {st.st_size} bytes; the text-size bound is {limit}")
            data = fh.read(limit + 1)
            if len(data) > limit:
                raise Refusal("limit", "too_large", f"the file exceeds the text-size bound of {limit} bytes")
            return data

    def write_atomic(self, path: Path, data: bytes) -> bool:
        """Write via a temporary file in the same directory and rename; returns True if created."""
        self._recheck(path, "write")
        parent = path.parent
        if not os.path.lexists(parent):
            # Every missing parent must itself be writable and unprotected, and
            # all are proven before the first one is created (FILE-7).
            missing: list[Path] = []
            cur = parent
            while not os.path.lexists(cur):
                missing.append(cur)
                cur = cur.parent
            for d in missing:
                if not self.may_write(os.fspath(d)):
                    raise Refusal("capability", "out_of_scope", "a missing parent directory is outside the fs.write scope")
            for d in reversed(missing):
                try:
                    up = open_nofollow(d.parent, os.O_RDONLY | os.O_DIRECTORY)
                except PathRefused as exc:
                    raise ToolFailure(exc.code, exc.message) from None
                try:
                    os.mkdir(d.name, 0o777, dir_fd=up)
                except FileExistsError:
                    pass  # created concurrently; the open below re-proves it without following links
                finally:
                    os.close(up)
        try:
            dir_fd = open_nofollow(parent, os.O_RDONLY | os.O_DIRECTORY)
        except PathRefused as exc:
            raise ToolFailure(exc.code, exc.message) from None
        try:
            mode: int | None = None
            created = True
            try:
                st = os.stat(path.name, dir_fd=dir_fd, follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode):
                    raise ToolFailure("symlink_race", "the target became a symlink after the check")
                if not stat.S_ISREG(st.st_mode):
                    raise _not_regular(st)
                # The rename would not write through the link, but the other names keep the
                # old content under a path the agent was shown: one rule for every file tool.
                _refuse_linked(st)
                mode = stat.S_IMODE(st.st_mode)
                created = False
            except FileNotFoundError:
                pass
            tmp_name = f".{path.name}.agentcore-{os.getpid()}-{os.urandom(4).hex()}.tmp"
            fd = os.open(tmp_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o666 if mode is None else 0o600, dir_fd=dir_fd)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                    fh.flush()
                    if mode is not None:
                        # On the file we made, never by name: another process that can write this
                        # directory may have put a symlink in its place, and chmod would follow it.
                        os.fchmod(fh.fileno(), mode)
                    os.fsync(fh.fileno())
                os.rename(tmp_name, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except BaseException:
                try:
                    os.unlink(tmp_name, dir_fd=dir_fd)
                except OSError:
                    pass
                raise
            return created
        finally:
            os.close(dir_fd)


class ProcessSurface:
    def __init__(self, manifest: "CompiledManifest", session: "Session", environment: "Environment | None", policy: "SandboxPolicy | None") -> None:
        self._m = manifest
        self._s = session
        self.environment = environment
        self.policy = policy

    async def run_sandboxed(self, argv: Sequence[str], *, timeout_s: float, sink: "OutputSink") -> "ProcessOutcome":
        """Run `argv` in the sandbox with every per-call protection and the sweep after it (`percall`), as
        `bash` does: a tool of any name gets the same sandbox."""
        if self.environment is None or self.policy is None:
            raise ToolFailure("unavailable", "no execution environment is configured for this session")
        from .environments import percall

        environment = self.environment
        return await percall.run_guarded(environment, self.policy, self._m,
                                         lambda policy: environment.run(argv, policy, timeout_s=timeout_s, sink=sink))

    @staticmethod
    def rg_binary() -> str:
        """The ripgrep the `ripgrep` wheel installed beside this Python (its scripts directory), never one
        found on PATH: rg runs outside the sandbox, and PATH may name a directory the agent can write
        (a project's `bin/` that direnv adds, `.`). Located once; whether it still runs, every time."""
        found = _installed_rg()
        if found is None or not os.access(found, os.X_OK):
            raise ToolFailure("rg_missing", "ripgrep (rg) is not installed beside this Python (pip install ripgrep)")
        return found


@functools.lru_cache(maxsize=1)
def _installed_rg() -> str | None:
    # sysconfig works its paths out afresh on each call (about 0.2 ms): once per process is enough.
    import sys
    import sysconfig

    dirs = [Path(sys.executable).parent, Path(sysconfig.get_path("scripts"))]
    user = sysconfig.get_path("scripts", f"{os.name}_user")
    dirs += [Path(user)] if user else []
    for d in dirs:
        candidate = d / "rg"
        if candidate.is_file():
            return os.fspath(candidate)
    return None


class _TeeSink:
    """A spool that also reports what passes through it, decoded as UTF-8 text."""

    def __init__(self, spool: ByteSpool, progress: Progress) -> None:
        self._spool = spool
        self._progress = progress
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    async def write(self, chunk: bytes) -> None:
        await self._spool.write(chunk)
        text = self._decoder.decode(chunk)
        if text:
            await self._progress("output", text)


@dataclass
class Runtime:
    """Everything a tool's `execute` may use: the proven call, scoped fs, processes, asking, events."""

    manifest: "CompiledManifest"
    session: "Session"
    tool_id: str
    call_id: str
    resolved: dict[str, Any]
    fs: ScopedFS
    proc: ProcessSurface
    broker: "AskBroker"
    registry: ToolLookup
    engine: SubagentHost | None = None  # for `task`: runs child agents
    extra: dict[str, Any] = field(default_factory=dict)
    progress: Progress | None = None  # set when someone observes this call
    sidecars: SidecarAllowance | None = None
    """What this call may write to sidecars (TRUNC-9); every spool of the call draws on it."""

    def output_sink(self, spool: ByteSpool) -> "OutputSink":
        """Where a tool streams process output: the spool, and the call's observers when any listen."""
        return spool if self.progress is None else _TeeSink(spool, self.progress)

    async def report(self, text: str) -> None:
        """A progress note for the call's observers (never an argument value)."""
        if self.progress is not None:
            await self.progress("progress", text)

    def __post_init__(self) -> None:
        if self.sidecars is None:
            self.sidecars = SidecarAllowance(self.limits.sidecar_bytes, self.session.sidecar_budget)

    @property
    def limits(self):  # noqa: ANN201 - Limits
        return self.manifest.limits

    @property
    def output_capped(self) -> bool:
        """Whether some output of this call was cut at the sidecar cap."""
        return self.sidecars is not None and self.sidecars.capped

    def byte_spool(self, limit: int) -> ByteSpool:
        return ByteSpool(self.session.workdir, self.tool_id, limit, self.sidecars)

    def line_spool(self, limit: int) -> LineSpool:
        return LineSpool(self.session.workdir, self.tool_id, limit, self.sidecars)
