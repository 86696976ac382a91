"""The capability check (CAP): every access proven inside the effective set, or refused.

Refusals here are final: nothing out of scope is ever turned into an `ask`.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..access import Access, FsAccess, NetAccess, ShellAccess
from ..errors import Refusal
from ..manifest.compiled import CompiledManifest
from ..paths import canonicalize_stat, is_within
from ..protected import write_protection
from ..rules.evaluator import Subject


class CapabilityRefused(Refusal):
    def __init__(self, code: str, message: str, **extra: object) -> None:
        super().__init__("capability", code, message, **extra)


@dataclass
class CapabilityResult:
    """What the capability stage found for a call: the rule subjects, the resolved paths, and each check made."""

    subjects: list[Subject] = field(default_factory=list)
    resolved: dict[str, Any] = field(default_factory=dict)
    checks: list[dict[str, Any]] = field(default_factory=list)  # what was compared, for `explain`
    # Subjects whose decision counts only when it is a deny or a rule's ask (PERM-3): the missing parents a
    # write would create (creating one writes it), and, for a tool other than `read` reading a path, `read`
    # of it (what a tool reads it can reveal: `edit`, whether a string is there and how often).
    guards: list[Subject] = field(default_factory=list)


def _fs(access: FsAccess, tool: str, manifest: CompiledManifest, session_dir: Path, base: Path, out: CapabilityResult) -> None:
    from ..paths import PathRefused

    try:
        path, st = canonicalize_stat(access.path, base)
    except PathRefused as exc:
        raise CapabilityRefused(exc.code, f"{access.arg}: {exc.message}") from None
    p = os.fspath(path)
    eff = manifest.effective
    in_session = is_within(p, session_dir)
    if access.mode == "read":
        scope = eff.fs_read
        ok = in_session or eff.can_read(p)
        if not ok and access.tree:
            # A search root above the scope is allowed: every result is filtered by scope.
            ok = any(is_within(os.fspath(pat.base), p) for pat in scope)
        capability = "fs.read"
    else:
        scope = eff.fs_write
        ok = eff.can_write(p)
        capability = "fs.write"
        if ok:
            why = write_protection(p, manifest.protected_files)
            if why is not None:
                raise CapabilityRefused("protected", f"{access.arg}: writing this path is never allowed ({why})")
            # Parents the write would create must each be writable themselves (FILE-7).
            parent = path.parent
            while not os.path.lexists(parent):
                d = os.fspath(parent)
                if not eff.can_write(d):
                    raise CapabilityRefused("out_of_scope", f"{access.arg}: a missing parent directory is outside the fs.write scope")
                if write_protection(d, manifest.protected_files) is not None:
                    raise CapabilityRefused("protected", f"{access.arg}: a missing parent directory is protected")
                out.guards.append(Subject(tool, "fs.write", "path", d))
                parent = parent.parent
    out.checks.append(
        {"access": f"{capability} {access.arg}", "canonical": p, "scope": [s.expanded for s in scope], "in_scope": ok}
    )
    if not ok:
        if not scope:
            raise CapabilityRefused("empty_scope", f"{access.arg}: the manifest grants no {capability} scope")
        raise CapabilityRefused("out_of_scope", f"{access.arg}: the path is outside the {capability} scope")
    _refuse_hard_link(p, st, access.arg)
    out.resolved[access.arg] = path
    out.subjects.append(Subject(tool, capability, "path", p))
    if access.mode == "read" and not access.tree:  # search results: PERM-14, one by one
        out.guards.append(Subject("read", "fs.read", "path", p))  # for `read` itself, its own subject (dropped)


def _net(access: NetAccess, tool: str, manifest: CompiledManifest, out: CapabilityResult) -> None:
    from ..net.hosts import HostRefused, parse_url

    try:
        url, target = parse_url(access.url)
    except HostRefused as exc:
        raise CapabilityRefused(f"url_{exc.code}", f"{access.arg}: {exc.message}") from None
    hosts = manifest.effective.net_hosts
    ok = any(h.matches(target.host, target.port) for h in hosts)
    out.checks.append(
        {"access": f"net.fetch {access.arg}", "canonical": target.authority, "scope": [h.raw for h in hosts], "in_scope": ok}
    )
    if not ok:
        if not hosts:
            raise CapabilityRefused("empty_scope", f"{access.arg}: the manifest grants no network hosts")
        raise CapabilityRefused("host_not_allowed", f"{access.arg}: the host is not in net.hosts")
    out.resolved[access.arg] = (url, target)
    out.subjects.append(Subject(tool, "net.fetch", "host", target.authority, host=target.host, port=target.port))


def _shell(access: ShellAccess, tool: str, manifest: CompiledManifest, base: Path, session_dir: Path, out: CapabilityResult) -> None:
    from ..shell.parse import ShellRefused, parse_shell

    try:
        parsed = parse_shell(access.command)
    except ShellRefused as exc:
        raise CapabilityRefused(f"shell_{exc.code}", f"{access.arg}: {exc.message}") from None
    reqs = manifest.effective.shell
    for i, cmd in enumerate(parsed.commands):
        ok = any(r.matches(cmd.argv) for r in reqs)
        out.checks.append(
            {"access": f"shell.run command #{i + 1}", "canonical": cmd.text, "scope": [r.describe() for r in reqs], "in_scope": ok}
        )
        if not ok:
            if not reqs:
                raise CapabilityRefused("empty_scope", f"{access.arg}: the manifest grants no shell commands")
            if not cmd.argv:
                raise CapabilityRefused("command_not_allowed", f"{access.arg}: command #{i + 1} is a bare redirection, which no shell requirement allows")
            # Never echo argv (ENVL-6): position and argument count are enough to act on.
            raise CapabilityRefused(
                "command_not_allowed",
                f"{access.arg}: command #{i + 1} (with {len(cmd.argv) - 1} argument(s)) matches no shell requirement",
            )
        out.subjects.append(Subject(tool, "shell.run", "command", cmd.text))
        for red in cmd.redirects:
            if red.target is None or red.mode in ("dup", "herestring"):
                continue
            if red.target == "/dev/null":
                continue
            mode = "write" if red.mode == "write" else "read"
            _fs(FsAccess(arg=f"{access.arg} redirection", path=red.target, mode=mode), tool, manifest, session_dir, base, out)
    out.resolved[access.arg] = parsed


def _refuse_hard_link(path: str, st: os.stat_result | None, arg: str) -> None:
    """A regular file with other hard links cannot be proven in scope (CAP-13).

    Its path is in scope, but the same inode may have a name anywhere else: a
    write in place would change that other file, a read would show it. Only
    regular files count (every directory has two or more links).
    """
    if st is None:  # not given by the resolution: look now
        try:
            st = os.lstat(path)
        except OSError:
            return  # missing (a file to create): nothing is linked yet
    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        raise CapabilityRefused("hard_link", f"{arg}: the file has other hard links, which may lie outside the scope")


def check_capabilities(
    accesses: list[Access], tool: str, manifest: CompiledManifest, *, session_dir: Path
) -> CapabilityResult:
    out = CapabilityResult()
    base = manifest.workspace
    if base is None and accesses:
        if any(isinstance(a, (FsAccess, ShellAccess)) for a in accesses):
            raise CapabilityRefused("no_workspace", "there is no workspace, so no path can be resolved")
    try:
        _check_all(accesses, tool, manifest, session_dir, base, out)
    except CapabilityRefused as exc:
        exc.extra["checks"] = out.checks  # explain shows what was compared before the refusal
        raise
    if not out.subjects:
        out.subjects.append(Subject(tool, None, "none", ""))
    return out


def _check_all(accesses: list[Access], tool: str, manifest: CompiledManifest, session_dir: Path, base: Path | None, out: CapabilityResult) -> None:
    for access in accesses:
        if isinstance(access, FsAccess):
            _fs(access, tool, manifest, session_dir, base or Path("/nonexistent"), out)
        elif isinstance(access, NetAccess):
            _net(access, tool, manifest, out)
        elif isinstance(access, ShellAccess):
            _shell(access, tool, manifest, base or Path("/nonexistent"), session_dir, out)
        else:  # an access kind this engine does not know cannot be proven
            raise CapabilityRefused("unknown_access", "the tool declared an access the engine cannot check")
