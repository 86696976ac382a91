"""Deriving the sandbox policy from the effective capability set (ENV).

The manifest's `requires` *is* the sandbox: writable binds come from
fs.write, masks from manifest read denials and well-known secret stores,
network mode from net.hosts. There is no second configuration to keep in
sync: enabling a tool that requires more extends this policy, removing it
shrinks it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..patterns.globtext import glob_unescape, has_wildcard
from ..protected import sandbox_protected_paths
from .base import SandboxPolicy

if TYPE_CHECKING:
    from ..manifest.compiled import CompiledManifest

# Secret stores masked in every sandbox unless the manifest grants reading them.
SECRET_HOME_PATHS = (".ssh", ".aws", ".gnupg", ".config/gh", ".netrc", ".docker", ".kube", ".npmrc", ".pypirc", ".git-credentials")
ENV_PATH = "/usr/local/bin:/usr/bin:/bin"


def _write_roots(manifest: "CompiledManifest") -> list[Path]:
    roots: list[Path] = []
    for pat in manifest.effective.fs_write:
        base = pat.base
        # Only what exists can be bound; a missing root is simply not writable
        # from the sandbox (fail closed), while the write tool can create it.
        if base.exists() and not base.is_symlink():
            roots.append(base)
    # Drop roots nested inside other roots (one bind covers them).
    roots.sort(key=lambda p: len(p.parts))
    out: list[Path] = []
    for r in roots:
        if not any(r == o or o in r.parents for o in out):
            out.append(r)
    return out


def _read_denied(manifest: "CompiledManifest") -> list[Path]:
    denied: list[Path] = []
    for cr in manifest.rules:
        rule = cr.rule
        if rule.action != "deny" or rule.permission not in ("*", "read", "fs.read", "bash", "grep", "glob"):
            continue
        text = cr.expanded
        if text.endswith("/**"):
            text = text[:-3]
        if has_wildcard(text) or not text.startswith("/"):
            continue  # a wildcard deny cannot be a mount; the capability layer enforces it
        p = Path(glob_unescape(text))
        if p.exists():
            denied.append(p)
    home = Path(os.path.expanduser("~"))
    for rel in SECRET_HOME_PATHS:
        p = home / rel
        if p.exists() and not manifest.effective.can_read(os.fspath(p)):
            denied.append(p)
    return denied


def _read_roots(manifest: "CompiledManifest") -> list[Path]:
    """The workspace roots and the bases of fs.read patterns (the sandbox may need to re-show them)."""
    out: list[Path] = list(manifest.workspace_roots)
    for pat in manifest.effective.fs_read:
        if pat.base.is_dir():
            out.append(pat.base)
    return out


def policy_for(manifest: "CompiledManifest") -> SandboxPolicy:
    workspace = manifest.workspace
    if workspace is None:
        cwd = Path("/")
    else:
        cwd = workspace
    write_roots = _write_roots(manifest)
    protected = sandbox_protected_paths(write_roots, manifest.protected_files)
    env = {
        "PATH": ENV_PATH,
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
    }
    if os.environ.get("TZ"):
        env["TZ"] = os.environ["TZ"]
    return SandboxPolicy(
        cwd=cwd,
        write_roots=tuple(write_roots),
        read_denied=tuple(_read_denied(manifest)),
        protected=tuple(p for p in protected if any(p == r or r in p.parents for r in write_roots)),
        network="proxy" if manifest.effective.net_hosts else "none",
        read_roots=tuple(_read_roots(manifest)),
        env=env,
    )
