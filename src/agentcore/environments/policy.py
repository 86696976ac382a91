"""Deriving the sandbox policy from the effective capability set (ENV).

The manifest's `requires` *is* the sandbox: writable binds come from
fs.write, masks from manifest read denials and well-known secret stores,
read-only paths from manifest write denials and the protected names,
network mode from net.hosts. There is no second configuration to keep in
sync: enabling a tool that requires more extends this policy, removing it
shrinks it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..protected import sandbox_protected_paths
from .base import SandboxPolicy
from .calltree import bounded_scan, linked_inodes
from .denies import manifest_denies, read_deny_permissions, write_deny_permissions
from .gitenv import git_env

if TYPE_CHECKING:
    from ..manifest.compiled import CompiledManifest, EffectiveCapabilities

# Secret stores masked in every sandbox unless the manifest grants reading them.
SECRET_HOME_PATHS = (".ssh", ".aws", ".gnupg", ".config/gh", ".netrc", ".docker", ".kube", ".npmrc", ".pypirc", ".git-credentials")
# System places that hold credentials: readable to a sandbox that runs as root (capabilities
# dropped, but the owner bits of root's files still apply), and to anyone for mounted secrets.
SYSTEM_SECRET_PATHS = (
    "/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-",
    "/etc/ssh/ssh_host_rsa_key", "/etc/ssh/ssh_host_ecdsa_key", "/etc/ssh/ssh_host_ed25519_key", "/etc/ssh/ssh_host_dsa_key",
    "/run/secrets", "/var/run/secrets",  # container and Kubernetes secret mounts (service account tokens)
    # Private keys and stored passwords that /etc holds on common systems (shown by view "minimal" too).
    "/etc/ssl/private", "/etc/pki/tls/private", "/etc/letsencrypt", "/etc/krb5.keytab", "/etc/ipsec.secrets",
    "/etc/ppp/chap-secrets", "/etc/ppp/pap-secrets", "/etc/NetworkManager/system-connections",
    "/etc/wpa_supplicant", "/etc/security/opasswd", "/etc/credstore", "/etc/credstore.encrypted",
)
# Where people keep their own files: with view "full", hidden from the sandbox except what fs.read or
# fs.write grants, so a manifest that reads only its workspace cannot `cat` the rest of a home directory.
# (View "minimal" shows none of them in the first place.)
USER_AREAS = ("/home", "/root", "/srv", "/mnt", "/media")
ENV_PATH = "/usr/local/bin:/usr/bin:/bin"


def _write_roots(manifest: "CompiledManifest") -> list[Path]:
    roots: list[Path] = []
    for pat in manifest.effective.fs_write:
        base = pat.base
        # Only what exists can be bound; a missing root is simply not writable
        # from the sandbox (fail closed), while the write tool can create it.
        if base.exists() and not base.is_symlink():
            # As it really is: a root named through a symlinked ancestor must still compare equal to, or
            # inside, the protected and denied paths below (which are canonical), or it would stay writable.
            roots.append(Path(os.path.realpath(base)))
    # Drop roots nested inside other roots (one bind covers them).
    roots.sort(key=lambda p: len(p.parts))
    out: list[Path] = []
    for r in roots:
        if not any(r == o or o in r.parents for o in out):
            out.append(r)
    return out


def _read_denied(manifest: "CompiledManifest") -> list[Path]:
    # Literal denies only: a wildcard names files once a call looks (calltree.py). Whether each exists is
    # judged per call (the mount plan looks afresh every time): this policy is derived once per engine, and
    # a `.env` or `~/.aws` written while a session runs must be hidden from the next command all the same.
    denied = list(manifest_denies(manifest.rules, read_deny_permissions(manifest)).literal)
    home = Path(os.path.expanduser("~"))
    for p in [*(home / rel for rel in SECRET_HOME_PATHS), *map(Path, SYSTEM_SECRET_PATHS)]:
        if not manifest.effective.can_read(os.fspath(p)):
            denied.append(p)
    return denied


def _write_denied(manifest: "CompiledManifest") -> list[Path]:
    """Literal paths a manifest deny on writing names: kept read-only, and a missing one cannot be created."""
    return list(manifest_denies(manifest.rules, write_deny_permissions(manifest)).literal)


def _read_roots(manifest: "CompiledManifest") -> list[Path]:
    """The workspace roots and the bases of fs.read patterns: what the sandbox shows besides the system directories.

    A pattern's base is its deepest literal directory, or the file itself for
    a literal pattern (`~/.gitconfig`).
    """
    out: list[Path] = list(manifest.workspace_roots)
    for pat in manifest.effective.fs_read:
        if pat.base.exists():
            out.append(pat.base)
    return out


def _hidden_trees() -> list[Path]:
    home = os.environ.get("HOME") or os.path.expanduser("~")
    return [Path(p) for p in (*USER_AREAS, home) if p and os.path.isabs(p)]


def policy_for(manifest: "CompiledManifest") -> SandboxPolicy:
    workspace = manifest.workspace
    if workspace is None:
        cwd = Path("/")
    else:
        cwd = workspace
    write_denied = _write_denied(manifest)
    # A root that a write deny or a file of the runtime's own (ENV-7 rule 5: the manifest, the installation
    # it runs from) covers whole is not bound writable at all (a read-only mount inside it could not cover
    # the root itself).
    locked = [Path(os.path.realpath(p)) for p in [*write_denied, *manifest.protected_files]]
    write_roots = [r for r in _write_roots(manifest) if not any(r == d or d in r.parents for d in locked)]
    protected = sandbox_protected_paths(write_roots, [*manifest.protected_files, *write_denied])
    env = {
        "PATH": ENV_PATH,
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
    }
    if os.environ.get("TZ"):
        env["TZ"] = os.environ["TZ"]
    # git with its fixed safe settings; each call adds overrides for what the repositories define (callguard.py).
    env |= git_env(())
    return SandboxPolicy(
        cwd=cwd,
        write_roots=tuple(write_roots),
        read_denied=tuple(_read_denied(manifest)),
        protected=tuple(p for p in protected if any(p == r or r in p.parents for r in write_roots)),
        network="proxy" if manifest.effective.net_hosts else "none",
        read_roots=tuple(_read_roots(manifest)),
        hidden_trees=tuple(_hidden_trees()),
        view="full" if manifest.sandbox_view == "full" else "minimal",
        env=env,
    )


def server_policy(manifest: "CompiledManifest", grant: "EffectiveCapabilities") -> SandboxPolicy:
    """The sandbox of one MCP server's process, derived from that server's grant alone (MCP-5).

    As `policy_for` with `grant` in place of the effective set (write roots,
    masked secrets, network), plus:

    - always the minimal view (ENV-5), whatever the manifest's `sandbox.view`:
      the system directories programs need, and nothing of the host besides;
    - read roots are the grant's `fs.read` bases only (not the workspace), so
      none of the agent's own files shows unless the grant covers it;
    - the working directory is the first workspace root when the grant lets it
      read it, else the first directory the grant lets it write or read, else
      `/usr` (the minimal view shows nothing else that is sure to exist);
    - files that wildcard denies name, and nested protected paths, as found
      now (the walk `bash` makes per call, made once per start).
    """
    import dataclasses

    scoped = dataclasses.replace(manifest, effective=grant)
    base = policy_for(scoped)
    read_roots = [p.base for p in grant.fs_read if p.base.exists()]
    ws = manifest.workspace
    cwd = ws if ws is not None and grant.can_read(os.fspath(ws)) else _server_cwd(grant)
    read_denies = manifest_denies(manifest.rules, read_deny_permissions(manifest)).wildcard
    write_denies = manifest_denies(manifest.rules, write_deny_permissions(manifest)).wildcard
    policy = dataclasses.replace(base, cwd=cwd, view="minimal", read_roots=tuple(dict.fromkeys(read_roots)))
    if base.write_roots or read_denies or linked_inodes(base.read_denied):
        policy = _with_walk(policy, read_roots, read_denies, write_denies, manifest.limits)
    return policy


def _server_cwd(grant: "EffectiveCapabilities") -> Path:
    for pat in (*grant.fs_write, *grant.fs_read):
        if pat.base.is_dir():
            return pat.base
    return Path("/usr")


def _with_walk(policy: SandboxPolicy, read_roots: list[Path], read_denies: Any, write_denies: Any, limits: Any) -> SandboxPolicy:
    """What the walk finds now, as `bash` folds it in per call: write-denied, nested protected and
    hard-linked entries read-only, read-denied files hidden, roots too full of links read-only whole."""
    import dataclasses

    found = bounded_scan(limits, policy.write_roots, read_roots, read_denies, write_denies,
                         denied_paths=policy.read_denied, protected_paths=policy.protected)
    frozen = [*found.frozen, *(r for r in policy.write_roots if linked_inodes([r]))]
    if frozen:
        policy = dataclasses.replace(policy, write_roots=tuple(r for r in policy.write_roots if r not in frozen),
                                     read_roots=(*policy.read_roots, *frozen))
    kept = [*policy.protected, *found.protected, *found.linked]
    return dataclasses.replace(
        policy,
        protected=tuple(dict.fromkeys(kept)),
        read_denied=tuple(dict.fromkeys([*policy.read_denied, *found.denied])),
    )
