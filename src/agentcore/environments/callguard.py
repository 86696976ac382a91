"""One sandboxed call's protection: what to keep read-only, which git settings to force, what to sweep (ENV-7, ENV-14).

`prepare` runs before the command, `finish` after it (the sandbox gone):

1. `guard.observe` lists the protected entries of the writable roots (and
   the repositories of the workspace roots);
2. every repository found there, or enclosing a workspace or writable root,
   has its configuration read (includes, `config.worktree`, submodules and
   worktrees too): the hook directories and included files it names become
   protected paths, and every named key it defines gets a harmless
   override in the command's git environment (`gitenv`);
3. the policy keeps read-only the repositories, the entries at the top of
   each writable root and those named paths, and covers a missing `.git`
   with a placeholder where git would look for one: the top of each
   writable root, each workspace root and its writable ancestors; a
   submodule directory without its `.git` stays as it is;
4. after the command `guard.sweep` removes what it left that is protected,
   except where the sandbox kept an existing entry read-only (`held`, each
   inode kept open by `pin` meanwhile): a change there was made outside the
   sandbox, by the user, and is theirs.

A configuration that cannot be read fails the call before anything runs.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import gitconfig
from ..protected import global_protected, is_git_layout, load_config, markers_in, protected_reason
from . import guard, hostfacts
from .base import EnvironmentUnavailable, SandboxPolicy
from .gitenv import git_env


@dataclass(frozen=True)
class Prepared:
    """One call's protection, made before the command: the policy it runs under and what `finish` sweeps against after it."""

    policy: SandboxPolicy
    observation: guard.Observation
    placeholders: tuple[str, ...]  # protected paths that were missing: bwrap may leave its mount points there
    walk_bounded: int = 0  # writable directories the per-call walk's bounds left unlisted: read-only for this call
    # Existing protected entries the sandbox mounts read-only, by path, with their (dev, ino) now: nothing
    # the command does can change them or anything beneath them while they are that inode. Empty for an
    # environment that mounts nothing (`unmounted`). Trusted only once `pin` keeps each inode open.
    held: Mapping[str, tuple[int, int]] = dataclasses.field(default_factory=dict)


def _inside(p: str, roots: Iterable[str]) -> bool:
    return any(p == r or p.startswith(r.rstrip("/") + "/") for r in roots)


def _repos(obs: guard.Observation, anchors: Iterable[str]) -> list[gitconfig.Repo]:
    """Every repository found in the trees, and every one whose work tree holds an anchor."""
    out: list[gitconfig.Repo] = []
    for path, entry in obs.entries():
        if entry.kind == "repo":
            out.append(gitconfig.repo_at(path))
        elif entry.kind == "layout" and is_git_layout(markers_in(path)):
            out.append(gitconfig.bare_repo(path))  # a virtual environment names no hooks
    host = hostfacts.Observation()  # the ancestors' `.git`s outside the workspace are the same call after call
    for a in dict.fromkeys(anchors):
        cur = a
        while True:
            dotgit = os.path.join(cur, ".git")
            if host.fact(dotgit).lexists:
                out.append(gitconfig.repo_at(dotgit))
            parent = os.path.dirname(cur)
            if parent == cur:
                break
            cur = parent
    return list(dict.fromkeys(out))


def _configs(repos: Sequence[gitconfig.Repo]) -> tuple[list[gitconfig.ConfigSet], list[str]]:
    """Each repository's configuration sets (its own, its submodules', its worktrees') and the paths they name."""
    sets: list[gitconfig.ConfigSet] = []
    named: list[str] = []
    for repo in repos:
        cfg = load_config(repo.config_files())
        sets.append(cfg)
        named += [*gitconfig.hook_dirs(cfg, repo), *cfg.includes]
        for gd in gitconfig.submodule_gitdirs(repo.commondir):
            sub = gitconfig.Repo(None, gd, gd)
            sets.append(load_config(sub.config_files()))
            named += sets[-1].includes
        for wt in gitconfig.worktree_gitdirs(repo.commondir):
            sets.append(load_config([os.path.join(wt, "config.worktree")]))
            named += sets[-1].includes
    return sets, named


def _empty_submodules(repos: Sequence[gitconfig.Repo]) -> list[str]:
    """Submodule directories without a `.git` yet: `git status` would enter one the command gave a `.git`
    (bringing an unknown configuration along), so the directory itself stays as it is for the call.
    (A `.git` placeholder inside would not do: git refuses a submodule whose `.git` is not a repository.)"""
    out: list[str] = []
    for repo in repos:
        if repo.top is None:
            continue
        for rel in gitconfig.submodule_paths(os.path.join(repo.top, ".gitmodules")):
            d = os.path.join(repo.top, rel)
            if not os.path.lexists(os.path.join(d, ".git")):
                out.append(d)
    return out


def _discovery_dotgits(write_roots: Sequence[str], workspace_roots: Sequence[str]) -> list[str]:
    """Where git, started in a workspace root, looks for `.git`, as far as a writable root reaches."""
    out = [os.path.join(r, ".git") for r in write_roots]
    for w in workspace_roots:
        cur = w
        while _inside(cur, write_roots):
            out.append(os.path.join(cur, ".git"))
            parent = os.path.dirname(cur)
            if parent == cur:
                break
            cur = parent
    return out


def prepare(policy: SandboxPolicy, workspace_roots: Sequence[Path | str]) -> Prepared:
    """The call's policy (read-only binds, placeholders, git environment) and what the sweep compares with."""
    # One resolution per root for this call: the roots are resolved up to five times below, four lstats each.
    realpath = functools.cache(os.path.realpath)
    ws = [realpath(os.fspath(w)) for w in workspace_roots]
    try:
        obs = guard.observe([os.fspath(r) for r in policy.write_roots], ws, realpath=realpath)
        protected_roots = set(obs.protected_roots())
        writable = [t.root for t in obs.trees if t.writable and t.root not in protected_roots]
        repos = _repos(obs, [*ws, *writable])
        sets, named = _configs(repos)
        named += global_protected(r.top for r in repos)
        submodules = _empty_submodules(repos)  # reads each `.gitmodules`: a failure there fails closed too
    except (guard.GuardError, gitconfig.GitConfigError) as exc:
        raise EnvironmentUnavailable(f"the workspace's protected files or git configuration cannot be checked: {exc}") from None
    extras = [p for p in dict.fromkeys([*named, *submodules, *_discovery_dotgits(writable, ws)]) if _inside(p, writable)]
    bound = obs.bound()
    protected = tuple(dict.fromkeys([*map(os.fspath, policy.protected), *bound, *extras]))
    placeholders = tuple(p for p in protected if not os.path.lexists(p))
    env = dict(policy.env) | git_env(sets)
    # A writable root that is itself protected (or a repository layout), or lies in a path a repository's
    # configuration names (a hook directory), is not writable at all.
    roots = tuple(r for r in policy.write_roots
                  if realpath(os.fspath(r)) not in protected_roots and protected_reason(realpath(os.fspath(r)), named) is None)
    new = dataclasses.replace(policy, write_roots=roots, protected=tuple(Path(p) for p in protected), env=env)
    observation = guard.with_extras(obs, extras)
    return Prepared(new, observation, placeholders, held=_held(protected, [os.fspath(r) for r in roots]))


def _held(protected: Sequence[str], write_roots: Sequence[str]) -> dict[str, tuple[int, int]]:
    """The existing protected paths the sandbox mounts read-only, with their identity: those in a writable
    root (never one that is a writable root), outermost only, as bwrap binds them. It pins each directory
    above them, so only something outside the sandbox can change what lies there; replacing such a path
    from outside detaches its mount, which the sweep sees as another inode. Beneath one, the mount is what
    keeps things read-only, so its own identity is the one that counts."""
    kept = [p for p in protected if _inside(p, write_roots) and p not in write_roots]
    held: dict[str, tuple[int, int]] = {}
    for p in guard.outermost(kept):
        try:
            st = os.lstat(p)
        except OSError:
            continue  # missing: a placeholder covers it, and nothing there is held
        held[p] = (st.st_dev, st.st_ino)
    return held


class Pins:
    """Open descriptors on the held entries. A file system may give a freed inode's number to the next file
    it makes (ext4 does at once): were a held entry removed or replaced from outside, the command could make
    a file under the held (dev, ino) and the sweep would take it for the held one. While a descriptor is
    open the inode is not freed, so its number names it alone."""

    def __init__(self) -> None:
        self.fds: list[int] = []

    def close(self) -> None:
        while self.fds:
            os.close(self.fds.pop())


def pin(prepared: Prepared) -> tuple[Prepared, Pins]:
    """`prepared` holding only the entries it keeps open now, and their descriptors (for the caller to
    close after the last sweep that uses this `held`). One already replaced, or that cannot be opened
    (too many open files), is not held: the sweep looks at it as at any other."""
    pins = Pins()
    held: dict[str, tuple[int, int]] = {}
    try:
        for path, ident in prepared.held.items():
            fd = _open_path(path)
            if fd is None:
                continue
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != ident:
                os.close(fd)
                continue
            pins.fds.append(fd)
            held[path] = ident
    except BaseException:
        pins.close()
        raise
    return dataclasses.replace(prepared, held=held), pins


def _open_path(path: str) -> int | None:
    try:
        return os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)  # no access to its content needed
    except OSError:
        return None


def unmounted(prepared: Prepared) -> Prepared:
    """`prepared` for an environment that mounts nothing: no placeholders (an empty `.git` there is the
    command's own, not a mount point), and nothing held read-only, so the sweep looks at every change."""
    return dataclasses.replace(prepared, placeholders=(), held={})


def rebase(fresh: Prepared, before: Prepared, report: guard.SweepReport) -> Prepared:
    """`fresh`, prepared after `before` was swept (`report`) while its process runs on, compared from then on
    with what that sweep left (see `guard.rebased`). The mount points are still those the process started
    with: `before`'s placeholders, not the paths missing now (a placeholder exists once it is mounted)."""
    observation = guard.rebased(fresh.observation, before.observation, report)
    return dataclasses.replace(fresh, observation=observation, placeholders=before.placeholders)


def finish(prepared: Prepared) -> guard.SweepReport:
    """After the command: remove the protected entries it left (raises guard.GuardError when it cannot)."""
    return guard.sweep(prepared.observation, placeholders=prepared.placeholders, held=prepared.held)
