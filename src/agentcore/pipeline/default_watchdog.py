"""The default watchdog (WDOG): fixed heuristics that can only narrow a call.

It runs after the capability check and the permission rules, so everything
it sees is already in scope; its job is to catch in-scope calls that are
still dangerous: sending data out, destroying things, running code smuggled
in through arguments, and touching well-known secret files.

Decisions are made per simple command on argv alone. The parser flattens
pipelines, so `cat f | curl ...` is just two commands here; that is enough
because every network client that would consume a pipe (curl/wget with a
data flag or `@-`, nc, socat, ssh, telnet) is refused on its own argv.

Reasons name the category in words and never contain argument values
(a URL, a token or a file name may be a secret).
"""

from __future__ import annotations

import os
import posixpath
import re
import stat
from fnmatch import fnmatchcase
from typing import Any, Callable, Iterable, Sequence

from .watchdog import AllowAllWatchdog, Verdict, Watchdog, WatchdogCall

CATEGORIES: dict[str, str] = {
    "exfiltration": "shell commands that send data to another host (curl/wget data flags or @file, "
    "nc/socat/telnet/ssh/scp/sftp/rsync to a remote target, /dev/tcp redirections)",
    "destructive": "recursive removal or permission changes outside the workspace or of the workspace itself, "
    "disk tools (mkfs, dd to a device, shred, wipefs, fdisk, parted), forced git pushes, "
    "git reset --hard / clean -fd / checkout -- . (ask)",
    "code_execution_wrapper": "commands that run code taken from their arguments or stdin: shells, eval/source, "
    "env/xargs/sudo-style wrappers, find -exec, git -c/aliases/ext::, sed e/w, awk system(), tar/rg hooks, "
    "editors and pagers, interpreters (-c/-e deny, workspace scripts ask), make/npm run/npx (ask), "
    "programs run by a path inside the workspace (ask)",
    "secrets": "any tool touching well-known secret files (.env, *.pem, *.key, id_rsa*, ~/.ssh, "
    "~/.aws/credentials, ~/.netrc, ~/.npmrc, ~/.pypirc, docker/kube/gh credentials) asks",
    "network_shell": "network clients without data-sending flags are allowed (the capability check and "
    "the sandbox govern hosts); listed so the name is stable, it never refuses",
}

# Not a category a manifest can switch off: a call the watchdog cannot analyse is refused.
INTERNAL_CATEGORY = "internal"

_WORDS = {
    "exfiltration": "possible data exfiltration",
    "destructive": "destructive operation",
    "code_execution_wrapper": "arbitrary code execution",
    "secrets": "secret file access",
}

_Finding = tuple[str, str, str, int]  # (action, category, detail, command index)


def unknown_categories(names: Iterable[str]) -> list[str]:
    """Names in `names` that are not watchdog categories (for manifest validation)."""
    return sorted({n for n in names if n not in CATEGORIES})


# ---------------------------------------------------------------------------
# paths


def _within(p: str, root: str) -> bool:
    if root == "/":
        return p.startswith("/")
    return p == root or p.startswith(root + "/")


def _norm(p: str) -> str:
    p = posixpath.normpath(p)
    return "/" + p.lstrip("/") if p.startswith("//") else p


class _Ctx:
    """Per-call state: workspace, home, current directory and the findings so far."""

    __slots__ = ("ws", "home", "cwd", "enabled", "findings", "index")

    def __init__(self, ws: str | None, home: str, enabled: frozenset[str]) -> None:
        self.ws = ws
        self.home = home
        self.cwd = ws  # None once a directory change makes relative words unresolvable
        self.enabled = enabled
        self.findings: list[_Finding] = []
        self.index = 0

    def add(self, category: str, action: str, detail: str) -> None:
        if category in self.enabled:
            self.findings.append((action, category, detail, self.index))

    def abs(self, word: str) -> str | None:
        """Lexical absolute form of `word`, or None when it cannot be resolved."""
        if not word or "\x00" in word:
            return None
        if word[0] == "~":
            if word != "~" and not word.startswith("~/"):
                return None  # ~user
            p = self.home + word[1:]
        elif word[0] == "$":
            for var in ("$HOME", "${HOME}"):
                if word == var or word.startswith(var + "/"):
                    p = self.home + word[len(var):]
                    break
            else:
                return None
        elif word[0] == "/":
            p = word
        else:
            if self.cwd is None:
                return None
            p = self.cwd + "/" + word
        return _norm(p)

    def real(self, word: str) -> str | None:
        """Symlink-resolved absolute form (what the OS would act on), or None."""
        p = self.abs(word)
        if p is None:
            return None
        try:
            return os.path.realpath(p)
        except (OSError, ValueError):
            return None

    def inside(self, p: str) -> bool:
        return self.ws is not None and _within(p, self.ws)


# ---------------------------------------------------------------------------
# secrets

_SECRET_NAMES = frozenset(
    {".netrc", "_netrc", ".npmrc", ".pypirc", ".git-credentials", ".pgpass", ".ssh", ".gnupg", ".aws"}
)
_SECRET_SUFFIXES = (".pem", ".key", ".p12", ".pfx")
_SECRET_PREFIXES = ("id_rsa", "id_ed25519", "id_ecdsa", "id_dsa")
_SECRET_DIRS = (".ssh", ".gnupg")  # everything below them
_SECRET_TAILS2 = frozenset({(".aws", "credentials"), (".kube", "config"), (".docker", "config.json")})
_SECRET_TAILS3 = frozenset({(".config", "gh", "hosts.yml")})
_ENV_TEMPLATES = frozenset({"example", "sample", "template", "dist"})


def _is_secret(path: str) -> bool:
    """Lexical test: does `path` name a well-known secret file or directory?"""
    low = path.lower()
    parts = [p for p in low.split("/") if p and p != "."]
    if not parts:
        return False
    base = parts[-1]
    if base in _SECRET_NAMES:
        return True
    if base == ".env" or (base.startswith(".env.") and base.rsplit(".", 1)[-1] not in _ENV_TEMPLATES):
        return True
    if base.endswith(_SECRET_SUFFIXES) or base.startswith(_SECRET_PREFIXES):
        return True
    n = len(parts)
    if n >= 2:
        for d in _SECRET_DIRS:
            if d in parts[:-1]:
                return True
        if (parts[-2], base) in _SECRET_TAILS2:
            return True
        if n >= 3 and (parts[-3], parts[-2], base) in _SECRET_TAILS3:
            return True
    return False


def _links_below_workspace(ctx: _Ctx, p: str) -> bool:
    """True if some component of `p` below the (canonical) workspace is a symlink.

    Cheaper than realpath for the common case: only the components under the
    workspace are lstat'ed. Paths outside the workspace answer True so the
    caller resolves them fully.
    """
    ws = ctx.ws
    if ws is None or not _within(p, ws):
        return True
    if p == ws:
        return False
    cur = ws if ws != "/" else ""
    for comp in p[len(cur) + 1:].split("/"):
        cur = cur + "/" + comp
        try:
            mode = os.lstat(cur).st_mode
        except (OSError, ValueError):
            return False  # the rest does not exist: nothing to read through a link
        if stat.S_ISLNK(mode):
            return True
    return False


def _secret_word(ctx: _Ctx, word: str) -> bool:
    if _is_secret(word):
        return True
    if "://" in word or len(word) > 4096:
        return False
    p = ctx.abs(word)
    if p is None:
        return False
    # A `..` after a symlink is resolved by the OS, not lexically: resolve fully.
    if ".." not in word.split("/") and not _links_below_workspace(ctx, p):
        return False
    try:
        real = os.path.realpath(p)
    except (OSError, ValueError):
        return False
    return real != p and _is_secret(real)


def _word_candidates(word: str) -> Iterable[str]:
    """The parts of an argv word that may name a file: `x`, `--opt=x`, `if=x`, `@x`, `name=@x`."""
    if not word:
        return ()
    if word[0] == "-":
        eq = word.find("=")
        return () if eq < 0 else (word[eq + 1:].lstrip("@<"),)
    w = word.lstrip("@<")
    eq = w.find("=")
    if eq > 0:
        return (w, w[eq + 1:].lstrip("@<"))
    return (w,)


# ---------------------------------------------------------------------------
# option scanning


def _lm(name: str, canon: str) -> bool:
    """`name` selects long option `canon`, allowing getopt's abbreviations (ambiguity counts as a match)."""
    return len(name) >= 3 and canon.startswith(name)


def _scan(args: Sequence[str], vshort: str = "", vlong: Sequence[str] = ()) -> tuple[list[str], list[str], list[str]]:
    """GNU-style scan: (short letters, long option names, operands); options may follow operands."""
    shorts: list[str] = []
    longs: list[str] = []
    ops: list[str] = []
    i, n = 0, len(args)
    while i < n:
        a = args[i]
        i += 1
        if a == "--":
            ops.extend(args[i:])
            break
        if a.startswith("--"):
            name, eq, _ = a.partition("=")
            longs.append(name)
            if not eq and any(_lm(name, c) for c in vlong):
                i += 1
            continue
        if len(a) > 1 and a[0] == "-":
            for j in range(1, len(a)):
                ch = a[j]
                shorts.append(ch)
                if ch in vshort:
                    if j == len(a) - 1:
                        i += 1
                    break
            continue
        ops.append(a)
    return shorts, longs, ops


_INFO = frozenset({"--version", "--help", "-version", "-help", "-h", "-V", "-v", "-VV", "-?"})
# `bash -h` / `bash -v` are shell options that still read commands from stdin.
_SHELL_INFO = frozenset({"--version", "--help"})
# `python -v` / `lua -v` still run code from stdin; node and perl add -v themselves.
_INTERP_INFO = frozenset({"--version", "--help", "-version", "-help", "-h", "-V", "-VV", "-?"})


def _info_only(args: Sequence[str], info: frozenset[str] = _INFO) -> bool:
    return bool(args) and all(a in info for a in args)


def _remote_spec(word: str) -> bool:
    """scp/rsync/tar-style remote target: `host:path`, `user@host:path`, `host::mod`, or a URL."""
    if word.startswith(("scp://", "sftp://", "rsync://", "ssh://")):
        return True
    c = word.find(":")
    return c > 0 and "/" not in word[:c] and not word.startswith(("-", "."))


# ---------------------------------------------------------------------------
# exfiltration

_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_CURL_DATA_LONGS = frozenset(
    {"--data", "--data-ascii", "--data-binary", "--data-raw", "--data-urlencode", "--json", "--form",
     "--form-string", "--upload-file", "--config", "--url-query", "--variable"}
)
_WGET_DATA_LONGS = ("--post-data", "--post-file", "--body-data", "--body-file", "--input-file", "--config", "--base")
_WGET_VALUE_SHORTS = "OoaiBetTwQPUDXIRAln"
_WGETRC_DATA = frozenset({"postdata", "postfile", "bodydata", "bodyfile", "method", "input", "base"})


def _method_sends(method: str) -> bool:
    return method.upper() not in _SAFE_METHODS


def _curl(ctx: _Ctx, args: Sequence[str]) -> None:
    i, n = 0, len(args)
    while i < n:
        a = args[i]
        i += 1
        if a == "--":
            break
        if a.startswith("@"):
            ctx.add("exfiltration", "deny", "curl would read a local file to send")
            return
        if a.startswith("--"):
            name, eq, val = a.partition("=")
            if name in _CURL_DATA_LONGS or name.startswith("--expand-"):
                ctx.add("exfiltration", "deny", "curl with a data-sending option")
                return
            if name == "--request":
                method = val if eq else (args[i] if i < n else "")
                i += 0 if eq else 1
                if _method_sends(method):
                    ctx.add("exfiltration", "deny", "curl with a data-sending request method")
                    return
            continue
        if len(a) > 1 and a[0] == "-":
            body = a[1:]
            if "@" in body:
                ctx.add("exfiltration", "deny", "curl would read a local file to send")
                return
            for j, ch in enumerate(body):
                if ch in "dFTK":
                    ctx.add("exfiltration", "deny", "curl with a data-sending option")
                    return
                if ch == "X":
                    method = body[j + 1:]
                    if not method:
                        method = args[i] if i < n else ""
                        i += 1
                    if _method_sends(method):
                        ctx.add("exfiltration", "deny", "curl with a data-sending request method")
                        return
                    break


def _wget(ctx: _Ctx, args: Sequence[str]) -> None:
    i, n = 0, len(args)
    while i < n:
        a = args[i]
        i += 1
        if a == "--":
            break
        if a.startswith("--"):
            name, eq, val = a.partition("=")
            if any(_lm(name, c) for c in _WGET_DATA_LONGS):
                ctx.add("exfiltration", "deny", "wget with a data-sending option")
                return
            if _lm(name, "--method") or _lm(name, "--execute"):
                value = val if eq else (args[i] if i < n else "")
                i += 0 if eq else 1
                if _lm(name, "--method") and _method_sends(value) or _lm(name, "--execute") and _wgetrc_sends(value):
                    ctx.add("exfiltration", "deny", "wget with a data-sending option")
                    return
            continue
        if len(a) > 1 and a[0] == "-":
            for j in range(1, len(a)):
                ch = a[j]
                if ch in "iB":
                    ctx.add("exfiltration", "deny", "wget with a data-sending option")
                    return
                if ch in _WGET_VALUE_SHORTS:
                    value = a[j + 1:]
                    if not value:
                        value = args[i] if i < n else ""
                        i += 1
                    if ch == "e" and _wgetrc_sends(value):
                        ctx.add("exfiltration", "deny", "wget with a data-sending option")
                        return
                    break


def _wgetrc_sends(command: str) -> bool:
    name = command.split("=", 1)[0].strip().lower().replace("_", "").replace("-", "")
    return name in _WGETRC_DATA or name == ""


def _nc(ctx: _Ctx, args: Sequence[str]) -> None:
    if not args or _info_only(args):
        return
    shorts, longs, _ops = _scan(args)
    if "e" in shorts or "c" in shorts or any(l.startswith(("--exec", "--sh-exec", "--lua-exec")) for l in longs):
        ctx.add("code_execution_wrapper", "deny", "netcat running a program for the connection")
    if "z" in shorts and "l" not in shorts:
        return  # zero-I/O port probe: sends no data
    ctx.add("exfiltration", "deny", "raw network connection that can send local data")


def _socat(ctx: _Ctx, args: Sequence[str]) -> None:
    if not args or _info_only(args):
        return
    for a in args:
        head = a.split(":", 1)[0].split(",", 1)[0].upper()
        if head in ("EXEC", "SYSTEM"):
            ctx.add("code_execution_wrapper", "deny", "socat running a program")
            break
    ctx.add("exfiltration", "deny", "raw network connection that can send local data")


def _any_operand_sends(what: str) -> Callable[[_Ctx, Sequence[str]], None]:
    def check(ctx: _Ctx, args: Sequence[str]) -> None:
        if _scan(args)[2]:
            ctx.add("exfiltration", "deny", what)
    return check


_SSH_VALUE_SHORTS = "BbcDEeFIiJLlmOopQRSWw"


def _ssh_options(ctx: _Ctx, args: Sequence[str], vshort: str, progs: str) -> list[str]:
    """Scan ssh-family options, flag command-running ones, return the operands."""
    ops: list[str] = []
    i, n = 0, len(args)
    while i < n:
        a = args[i]
        i += 1
        if a == "--":
            ops.extend(args[i:])
            break
        if len(a) > 1 and a[0] == "-":
            for j in range(1, len(a)):
                ch = a[j]
                if ch in vshort:
                    value = a[j + 1:]
                    if not value:
                        value = args[i] if i < n else ""
                        i += 1
                    if ch == "o" and "command" in value.lower():
                        ctx.add("code_execution_wrapper", "deny", "ssh option that runs a local command")
                    elif ch in progs:
                        ctx.add("code_execution_wrapper", "deny", "ssh configuration or helper program from an argument")
                    break
            continue
        ops.append(a)
    return ops


def _ssh(ctx: _Ctx, args: Sequence[str]) -> None:
    if _ssh_options(ctx, args, _SSH_VALUE_SHORTS, "F"):
        ctx.add("exfiltration", "deny", "connection to a remote host that can send local data")


def _sftp(ctx: _Ctx, args: Sequence[str]) -> None:
    if _ssh_options(ctx, args, "BbcDFiJloPRSs", "FSD"):
        ctx.add("exfiltration", "deny", "file transfer with a remote host")


def _scp(ctx: _Ctx, args: Sequence[str]) -> None:
    if any(_remote_spec(o) for o in _ssh_options(ctx, args, "cDFiJloPSX", "FS")):
        ctx.add("exfiltration", "deny", "file transfer with a remote host")


def _rsync(ctx: _Ctx, args: Sequence[str]) -> None:
    shorts, longs, ops = _scan(args, "", ("--rsh", "--rsync-path", "--filter", "--exclude", "--include"))
    if "e" in shorts or any(_lm(l, "--rsh") or _lm(l, "--rsync-path") for l in longs):
        ctx.add("code_execution_wrapper", "deny", "rsync with a remote shell or program from an argument")
    if any(_remote_spec(o) for o in ops):
        ctx.add("exfiltration", "deny", "file transfer with a remote host")


def _openssl(ctx: _Ctx, args: Sequence[str]) -> None:
    if args and args[0] in ("s_client", "s_server"):
        ctx.add("exfiltration", "deny", "raw network connection that can send local data")


# ---------------------------------------------------------------------------
# destructive


def _removal_danger(ctx: _Ctx, word: str) -> tuple[str, str] | None:
    if not word:
        return None
    if "$" in word or word[0] == "~":
        return "deny", "recursive removal of a home or variable path"
    comps = word.split("/")
    for k, comp in enumerate(comps):
        if "*" in comp or "?" in comp or "[" in comp:
            # bash only matches a leading dot explicitly, so only `.*`-like patterns reach `..`
            if comp[0] in ".[" and (fnmatchcase("..", comp) or fnmatchcase(".", comp)):
                return "deny", "recursive removal with a pattern that can match a parent directory"
            word = "/".join(comps[:k]) or ("/" if word.startswith("/") else ".")
            break
    p = ctx.real(word)
    if p is None:
        return "deny", "recursive removal of a path that cannot be resolved"
    if p == "/":
        return "deny", "recursive removal of the root directory"
    if not ctx.inside(p):
        return "deny", "recursive removal outside the workspace"
    if p == ctx.ws:
        return "deny", "recursive removal of the whole workspace"
    if p.rsplit("/", 1)[-1] == ".git":
        return "ask", "recursive removal of the git repository data"
    return None


def _rm(ctx: _Ctx, args: Sequence[str]) -> None:
    shorts, longs, ops = _scan(args)
    if any(_lm(l, "--no-preserve-root") for l in longs):
        ctx.add("destructive", "deny", "rm without root protection")
    if not ("r" in shorts or "R" in shorts or any(_lm(l, "--recursive") for l in longs)):
        return
    for t in ops:
        hit = _removal_danger(ctx, t)
        if hit is not None:
            ctx.add("destructive", hit[0], hit[1])
            if hit[0] == "deny":
                return


_OCTAL = re.compile(r"0*[0-7]{1,4}")
_SYMBOLIC = re.compile(r"([ugoa]*)([-+=])([rwxXst]*)")


def _world_writable(mode: str) -> bool:
    if _OCTAL.fullmatch(mode):
        return bool(int(mode, 8) & 0o002)
    for clause in mode.split(","):
        m = _SYMBOLIC.fullmatch(clause)
        if m and m.group(2) in "+=" and "w" in m.group(3) and ("a" in m.group(1) or "o" in m.group(1)):
            return True
    return False


def _perm(ctx: _Ctx, args: Sequence[str], chmod: bool) -> None:
    shorts, longs, ops = _scan(args)
    if not ("R" in shorts or any(_lm(l, "--recursive") for l in longs)):
        return
    if chmod and any(_world_writable(o) for o in ops):
        ctx.add("destructive", "deny", "recursive world-writable permission change")
        return
    for o in ops:
        p = ctx.real(o)
        if p is None or p == "/" or not ctx.inside(p):
            ctx.add("destructive", "deny", "recursive permission or owner change outside the workspace")
            return


_DEV_OK = frozenset({"/dev/null", "/dev/zero", "/dev/stdout", "/dev/stderr", "/dev/tty"})


def _dd(ctx: _Ctx, args: Sequence[str]) -> None:
    for a in args:
        if a.startswith("of="):
            target = a[3:]
            lexical, real = ctx.abs(target), ctx.real(target)
            if lexical is None or real is None:
                ctx.add("destructive", "deny", "dd writing to a path that cannot be resolved")
                return
            for p in (lexical, real):
                if p.startswith("/dev/") and p not in _DEV_OK and not p.startswith("/dev/fd/"):
                    ctx.add("destructive", "deny", "dd writing to a device")
                    return


def _truncate(ctx: _Ctx, args: Sequence[str]) -> None:
    for o in _scan(args, "sr", ("--size", "--reference"))[2]:
        p = ctx.real(o)
        if p is None or not ctx.inside(p):
            ctx.add("destructive", "deny", "truncating a file outside the workspace")
            return


def _always(category: str, action: str, detail: str) -> Callable[[_Ctx, Sequence[str]], None]:
    def check(ctx: _Ctx, args: Sequence[str]) -> None:
        ctx.add(category, action, detail)
    return check


# ---------------------------------------------------------------------------
# git

_GIT_BUILTINS = frozenset(
    """add am annotate apply archive bisect blame branch bugreport bundle cat-file check-attr check-ignore
    check-mailmap check-ref-format checkout checkout-index cherry cherry-pick clean clone column commit
    commit-graph commit-tree config count-objects describe diagnose diff diff-files diff-index diff-tree
    fast-export fast-import fetch for-each-ref format-patch fsck gc get-tar-commit-id grep hash-object help
    index-pack init init-db interpret-trailers log ls-files ls-remote ls-tree mailinfo mailsplit maintenance
    merge merge-base merge-file merge-tree mktag mktree multi-pack-index mv name-rev notes pack-objects
    pack-refs prune prune-packed pull push range-diff read-tree rebase reflog remote repack replace rerere
    reset restore rev-list rev-parse revert rm shortlog show show-branch show-ref sparse-checkout stash
    status stripspace submodule switch symbolic-ref tag unpack-objects update-index update-ref var
    verify-commit verify-pack verify-tag version whatchanged worktree write-tree""".split()
)
_GIT_GLOBAL_VALUES = ("--namespace", "--super-prefix", "--list-cmds", "--attr-source")
_ALL_PATHS = frozenset({".", "./", ":/", ":/.", "*", ":(top)", ":(top)."})


def _git_dir_outside(ctx: _Ctx, base: str | None, value: str) -> tuple[str | None, bool]:
    """Resolve a -C/--git-dir/--work-tree value; (new base, outside-or-unresolvable)."""
    if value == "":
        return base, False
    if value[0] == "/" or value[0] == "~" or value[0] == "$":
        p = ctx.abs(value)
    else:
        p = None if base is None else _norm(base + "/" + value)
    if p is None:
        return None, True
    try:
        p = os.path.realpath(p)
    except (OSError, ValueError):
        return None, True
    return p, not ctx.inside(p)


def _git(ctx: _Ctx, args: Sequence[str]) -> None:
    base = ctx.cwd
    i, n = 0, len(args)
    sub: str | None = None
    while i < n:
        a = args[i]
        i += 1
        if a == "-C" or a.startswith(("--git-dir", "--work-tree")):
            if a == "-C" or "=" not in a:
                value = args[i] if i < n else ""
                i += 1
            else:
                value = a.split("=", 1)[1]
            new, outside = _git_dir_outside(ctx, base, value)
            if a == "-C":
                base = new
            if outside:
                ctx.add("code_execution_wrapper", "deny", "git pointed at a repository outside the workspace")
                return
            continue
        if a.startswith("-c") or a.startswith(("--config-env", "--exec-path")):
            ctx.add("code_execution_wrapper", "deny", "git configuration or helper path from an argument")
            return
        if a.startswith("-"):
            if a in _GIT_GLOBAL_VALUES:
                i += 1
            continue
        sub = a
        break
    if sub is None:
        return
    rest = args[i:]
    for a in rest:
        name = a.split("=", 1)[0]
        if "ext::" in a.lower() or (name.startswith("--") and (
                _lm(name, "--upload-pack") or _lm(name, "--receive-pack") or (len(name) >= 4 and _lm(name, "--exec")))):
            ctx.add("code_execution_wrapper", "deny", "git transport or helper command from an argument")
            return
    if sub not in _GIT_BUILTINS:
        ctx.add("code_execution_wrapper", "ask", "git subcommand that may be an alias or an external program")
        return
    check = _GIT_SUB.get(sub)
    if check is not None:
        check(ctx, rest)


def _git_push(ctx: _Ctx, rest: Sequence[str]) -> None:
    shorts, longs, ops = _scan(rest, "o", ("--receive-pack", "--exec", "--repo", "--push-option"))
    if "f" in shorts or any(_lm(l, "--force") for l in longs) or any(o.startswith("+") for o in ops):
        ctx.add("destructive", "deny", "forced git push")
    elif any(l.startswith("--force-") for l in longs):
        ctx.add("destructive", "ask", "forced git push with a lease")
    elif ("d" in shorts or any(_lm(l, "--delete") or _lm(l, "--mirror") or _lm(l, "--prune") for l in longs)
          or any(o.startswith(":") for o in ops[1:])):
        ctx.add("destructive", "ask", "git push that deletes remote refs")


def _git_reset(ctx: _Ctx, rest: Sequence[str]) -> None:
    if any(_lm(a.split("=", 1)[0], "--hard") for a in rest if a.startswith("--")):
        ctx.add("destructive", "ask", "git reset --hard discards local changes")


def _git_clean(ctx: _Ctx, rest: Sequence[str]) -> None:
    shorts, longs, _ = _scan(rest, "e", ("--exclude",))
    force = "f" in shorts or any(_lm(l, "--force") for l in longs)
    dry = "n" in shorts or any(_lm(l, "--dry-run") for l in longs)
    if force and not dry and ("d" in shorts or "x" in shorts or "X" in shorts):
        ctx.add("destructive", "ask", "git clean removes untracked files")


def _git_checkout(ctx: _Ctx, rest: Sequence[str]) -> None:
    shorts, longs, ops = _scan(rest, "bB", ("--conflict", "--orphan", "--pathspec-from-file"))
    if any(o in _ALL_PATHS for o in ops) or "f" in shorts or any(_lm(l, "--force") for l in longs):
        ctx.add("destructive", "ask", "git checkout discards local changes")


def _git_restore(ctx: _Ctx, rest: Sequence[str]) -> None:
    shorts, longs, ops = _scan(rest, "s", ("--source", "--pathspec-from-file", "--conflict"))
    staged = "S" in shorts or any(_lm(l, "--staged") for l in longs)
    worktree = "W" in shorts or any(_lm(l, "--worktree") for l in longs)
    if any(o in _ALL_PATHS for o in ops) and (worktree or not staged):
        ctx.add("destructive", "ask", "git restore discards local changes")


def _git_stash(ctx: _Ctx, rest: Sequence[str]) -> None:
    if rest and rest[0] in ("clear", "drop"):
        ctx.add("destructive", "ask", "git stash drops saved changes")


def _git_clone(ctx: _Ctx, rest: Sequence[str]) -> None:
    shorts, longs, _ = _scan(rest, "obucj", ("--origin", "--branch", "--upload-pack", "--config", "--template"))
    if "u" in shorts or "c" in shorts or any(_lm(l, "--config") or _lm(l, "--template") for l in longs):
        ctx.add("code_execution_wrapper", "deny", "git clone with configuration or templates from an argument")


def _git_init(ctx: _Ctx, rest: Sequence[str]) -> None:
    if any(a.startswith("--") and _lm(a.split("=", 1)[0], "--template") for a in rest):
        ctx.add("code_execution_wrapper", "deny", "git init with templates from an argument")


def _git_ls_remote(ctx: _Ctx, rest: Sequence[str]) -> None:
    if "u" in _scan(rest)[0]:
        ctx.add("code_execution_wrapper", "deny", "git transport or helper command from an argument")


def _git_rebase(ctx: _Ctx, rest: Sequence[str]) -> None:
    if "x" in _scan(rest, "sXxC", ("--strategy", "--strategy-option", "--onto", "--exec"))[0]:
        ctx.add("code_execution_wrapper", "deny", "git rebase running commands")


def _git_bisect(ctx: _Ctx, rest: Sequence[str]) -> None:
    if rest and rest[0] == "run":
        ctx.add("code_execution_wrapper", "deny", "git bisect running commands")


def _git_submodule(ctx: _Ctx, rest: Sequence[str]) -> None:
    if "foreach" in rest:
        ctx.add("code_execution_wrapper", "deny", "git submodule running commands")


def _git_grep(ctx: _Ctx, rest: Sequence[str]) -> None:
    shorts, longs, _ = _scan(rest, "efABCm", ("--max-depth", "--threads", "--and", "--or", "--not"))
    if "O" in shorts or any(_lm(l, "--open-files-in-pager") for l in longs):
        ctx.add("code_execution_wrapper", "deny", "git grep opening a pager program")


_GIT_CONFIG_WRITES = ("--add", "--replace-all", "--unset", "--unset-all", "--rename-section",
                      "--remove-section", "--edit")
_GIT_CONFIG_READS = ("--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list")


def _git_config(ctx: _Ctx, rest: Sequence[str]) -> None:
    shorts, longs, ops = _scan(rest, "f", ("--file", "--blob", "--type", "--default", "--comment"))
    write = "e" in shorts or any(any(_lm(l, w) for w in _GIT_CONFIG_WRITES) for l in longs)
    if ops and ops[0] in ("set", "unset", "rename-section", "remove-section", "edit"):
        write = True
    reads = "l" in shorts or any(any(_lm(l, r) for r in _GIT_CONFIG_READS) for l in longs)
    if ops and ops[0] in ("get", "list"):
        reads = True
    if write or (not reads and len(ops) >= 2):
        ctx.add("code_execution_wrapper", "ask", "git configuration change (can define commands git runs)")


_GIT_SUB: dict[str, Callable[[_Ctx, Sequence[str]], None]] = {
    "push": _git_push, "reset": _git_reset, "clean": _git_clean, "checkout": _git_checkout,
    "restore": _git_restore, "stash": _git_stash, "clone": _git_clone, "init": _git_init,
    "init-db": _git_init, "ls-remote": _git_ls_remote, "rebase": _git_rebase, "bisect": _git_bisect,
    "submodule": _git_submodule, "grep": _git_grep, "config": _git_config,
}


# ---------------------------------------------------------------------------
# code execution


def _shell(ctx: _Ctx, args: Sequence[str]) -> None:
    if not _info_only(args, _SHELL_INFO):
        ctx.add("code_execution_wrapper", "deny", "a shell running code from arguments or standard input")


def _wrapper(ctx: _Ctx, args: Sequence[str]) -> None:
    if args and not _info_only(args):
        ctx.add("code_execution_wrapper", "deny", "a wrapper that runs another command")


def _eval_builtin(ctx: _Ctx, args: Sequence[str]) -> None:
    if args:
        ctx.add("code_execution_wrapper", "deny", "a builtin that runs code from its arguments or a file")


def _trap(ctx: _Ctx, args: Sequence[str]) -> None:
    if any(a not in ("-l", "-p", "--") for a in args):
        ctx.add("code_execution_wrapper", "deny", "a trap that runs code later")


def _alias(ctx: _Ctx, args: Sequence[str]) -> None:
    if any("=" in a for a in args):
        ctx.add("code_execution_wrapper", "deny", "an alias definition")


def _hash(ctx: _Ctx, args: Sequence[str]) -> None:
    if "p" in _scan(args, "p")[0]:
        ctx.add("code_execution_wrapper", "deny", "a hashed command path from an argument")


def _command(ctx: _Ctx, args: Sequence[str]) -> None:
    letters: set[str] = set()
    for a in args:
        if a == "--" or not (len(a) > 1 and a[0] == "-"):
            break
        letters.update(a[1:])
    if letters and letters <= {"p", "v", "V"} and letters & {"v", "V"}:
        return  # `command -v name`: a lookup, runs nothing
    if args:
        ctx.add("code_execution_wrapper", "deny", "a wrapper that runs another command")


_ENV_VALUE_LONGS = ("--unset", "--chdir")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def _env(ctx: _Ctx, args: Sequence[str]) -> None:
    i, n = 0, len(args)
    while i < n:
        a = args[i]
        i += 1
        if a == "--":
            break
        if a.startswith("--"):
            name, eq, _ = a.partition("=")
            if _lm(name, "--split-string"):
                ctx.add("code_execution_wrapper", "deny", "env running a command")
                return
            if not eq and any(_lm(name, c) for c in _ENV_VALUE_LONGS):
                i += 1
            continue
        if len(a) > 1 and a[0] == "-":
            for j in range(1, len(a)):
                if a[j] == "S":
                    ctx.add("code_execution_wrapper", "deny", "env running a command")
                    return
                if a[j] in "uC":
                    if j == len(a) - 1:
                        i += 1
                    break
            continue
        if a == "-" or _ASSIGNMENT.match(a):
            continue
        ctx.add("code_execution_wrapper", "deny", "env running a command")
        return
    if i < n:  # words after `--`
        rest = [a for a in args[i:] if not _ASSIGNMENT.match(a)]
        if rest:
            ctx.add("code_execution_wrapper", "deny", "env running a command")


_FIND_ACTIONS = frozenset({"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"})


def _find(ctx: _Ctx, args: Sequence[str]) -> None:
    if any(a in _FIND_ACTIONS for a in args):
        ctx.add("code_execution_wrapper", "deny", "find running commands, deleting or writing files")


def _fd(ctx: _Ctx, args: Sequence[str]) -> None:
    for a in args:
        if a.startswith("--exec") or (len(a) > 1 and a[0] == "-" and a[1] != "-" and ("x" in a or "X" in a)):
            ctx.add("code_execution_wrapper", "deny", "fd running commands")
            return


def _sed(ctx: _Ctx, args: Sequence[str]) -> None:
    scripts: list[str] = []
    script_file = in_place = sandbox = False
    ops: list[str] = []
    i, n = 0, len(args)
    while i < n:
        a = args[i]
        i += 1
        if a == "--":
            ops.extend(args[i:])
            break
        if a.startswith("--"):
            name, eq, val = a.partition("=")
            if _lm(name, "--expression"):
                scripts.append(val if eq else (args[i] if i < n else ""))
                i += 0 if eq else 1
            elif name == "--file" or (_lm(name, "--file") and len(name) > 3):
                script_file = True
                i += 0 if eq else 1
            elif _lm(name, "--in-place"):
                in_place = True
            elif name == "--sandbox":
                sandbox = True
            elif _lm(name, "--line-length") and not eq:
                i += 1
            continue
        if len(a) > 1 and a[0] == "-":
            for j in range(1, len(a)):
                ch = a[j]
                if ch == "i" or ch == "I":
                    in_place = True
                    break  # the rest is the backup suffix
                if ch in "efl":
                    value = a[j + 1:]
                    if not value:
                        value = args[i] if i < n else ""
                        i += 1
                    if ch == "e":
                        scripts.append(value)
                    elif ch == "f":
                        script_file = True
                    break
            continue
        ops.append(a)
    if not scripts and not script_file and ops:
        scripts.append(ops[0])
    if not sandbox:
        if any(_sed_runs_or_writes(s) for s in scripts):
            ctx.add("code_execution_wrapper", "deny", "sed script that runs commands or writes files")
            return
        if script_file:
            ctx.add("code_execution_wrapper", "ask", "sed script read from a file")
    if in_place:
        ctx.add("code_execution_wrapper", "ask", "sed editing files in place")


def _sed_runs_or_writes(s: str) -> bool:
    """True if the sed script has an e/w/W command or s///e, s///w flags, or cannot be read."""
    n = len(s)
    i = 0

    def delimited(i: int, d: str) -> int:
        while i < n:
            c = s[i]
            if c == "\\":
                i += 2
                continue
            if c == d:
                return i + 1
            if c == "\n" and d != "\n":
                return -1
            i += 1
        return -1

    def address(i: int) -> int:
        if i < n and s[i].isdigit():
            while i < n and s[i].isdigit():
                i += 1
            if i < n and s[i] == "~":
                i += 1
                while i < n and s[i].isdigit():
                    i += 1
            return i
        if i < n and s[i] == "$":
            return i + 1
        if i < n and (s[i] == "/" or s[i] == "\\"):
            if s[i] == "\\":
                if i + 1 >= n:
                    return -1
                i += 1
            i = delimited(i + 1, s[i])
            while 0 <= i < n and s[i] in "IM":
                i += 1
        return i

    def to_line_end(i: int) -> int:
        while i < n and s[i] != "\n":
            i += 2 if s[i] == "\\" else 1
        return i

    while i < n:
        c = s[i]
        if c in " \t\n;":
            i += 1
            continue
        i = address(i)
        if i < 0:
            return True
        while i < n and s[i] in " \t":
            i += 1
        if i < n and s[i] == ",":
            i += 1
            while i < n and s[i] in " \t":
                i += 1
            if i < n and s[i] in "+~":
                i += 1
            i = address(i)
            if i < 0:
                return True
        while i < n and s[i] in " \t!":
            i += 1
        if i >= n:
            return True
        cmd = s[i]
        i += 1
        if cmd in "{}=dDgGhHnNpPxzF":
            continue
        if cmd in "ewW":
            return True
        if cmd == "#" or cmd in "aicrR":
            i = to_line_end(i)
            continue
        if cmd in ":btTv":
            while i < n and s[i] not in ";\n":
                i += 1
            continue
        if cmd in "qQlL":
            while i < n and (s[i].isdigit() or s[i] in " \t"):
                i += 1
            continue
        if cmd in "sy":
            if i >= n or s[i] in "\n\\":
                return True
            d = s[i]
            i = delimited(i + 1, d)
            if i < 0:
                return True
            i = delimited(i, d)
            if i < 0:
                return True
            if cmd == "s":
                while i < n and s[i] not in ";\n}#":
                    if s[i] in "ewW":
                        return True
                    if s[i] not in "gpiImM0123456789 \t":
                        return True
                    i += 1
            continue
        return True
    return False


_AWK_EXEC = re.compile(r"system\s*\(|\|\s*&?\s*getline|\|&|@|\bprintf?\b[^;{}\n]*[>|]")
_AWK_STD = re.compile(r">\s*\"/dev/(?:stderr|stdout)\"")


def _awk(ctx: _Ctx, args: Sequence[str]) -> None:
    programs: list[str] = []
    from_file = sandbox = False
    ops: list[str] = []
    i, n = 0, len(args)
    while i < n:
        a = args[i]
        i += 1
        if a == "--":
            ops.extend(args[i:])
            break
        if a.startswith("--"):
            name, eq, val = a.partition("=")
            if _lm(name, "--source"):
                programs.append(val if eq else (args[i] if i < n else ""))
                i += 0 if eq else 1
            elif any(_lm(name, c) for c in ("--file", "--exec", "--include")):
                from_file = True
                i += 0 if eq else 1
            elif _lm(name, "--load"):
                ctx.add("code_execution_wrapper", "deny", "awk loading a shared library")
                return
            elif _lm(name, "--sandbox"):
                sandbox = True
            elif not eq and any(_lm(name, c) for c in ("--field-separator", "--assign")):
                i += 1
            continue
        if len(a) > 1 and a[0] == "-":
            ch = a[1]
            value = a[2:]
            if ch in "FvfeEilW" and not value:
                value = args[i] if i < n else ""
                i += 1
            if ch == "W" and value.startswith("e"):  # mawk -W exec FILE
                from_file = True
            if ch == "e":
                programs.append(value)
            elif ch in "fEi":
                from_file = True
            elif ch == "l":
                ctx.add("code_execution_wrapper", "deny", "awk loading a shared library")
                return
            elif ch == "S":
                sandbox = True
            continue
        ops.append(a)
    if not programs and not from_file and ops:
        programs.append(ops[0])
    if sandbox:
        return
    if any(_AWK_EXEC.search(_AWK_STD.sub("", p)) for p in programs):
        ctx.add("code_execution_wrapper", "deny", "awk program that runs commands or writes files")
    elif from_file:
        ctx.add("code_execution_wrapper", "ask", "awk program read from a file")


_TAR_HOOKS = ("--checkpoint-action", "--to-command", "--use-compress-program", "--rsh-command",
              "--info-script", "--new-volume-script", "--rmt-command")


def _tar(ctx: _Ctx, args: Sequence[str]) -> None:
    force_local = False
    for k, a in enumerate(args):
        if a.startswith("--"):
            name = a.split("=", 1)[0]
            if name != "--checkpoint" and any(_lm(name, h) for h in _TAR_HOOKS) and len(name) >= 5:
                ctx.add("code_execution_wrapper", "deny", "tar running a program")
                return
            force_local = force_local or _lm(name, "--force-local")
        elif (len(a) > 1 and a[0] == "-") or k == 0:  # the first word is an option cluster in old style
            if "I" in a or "F" in a:
                ctx.add("code_execution_wrapper", "deny", "tar running a program")
                return
    if not force_local and any(_remote_spec(a) for a in args[1:] if not a.startswith("-")):
        ctx.add("exfiltration", "deny", "tar archive on a remote host")


def _rg(ctx: _Ctx, args: Sequence[str]) -> None:
    if any(a.startswith("--pre") for a in args):
        ctx.add("code_execution_wrapper", "deny", "search running a preprocessor program")


def _zip(ctx: _Ctx, args: Sequence[str]) -> None:
    if any(a.startswith("-TT") or a.startswith("--unzip-command") for a in args):
        ctx.add("code_execution_wrapper", "deny", "zip running a test program")


class _Interp:
    """How an interpreter takes inline code, modules and script files."""

    __slots__ = ("evals", "eval_longs", "mods", "mod_longs", "values", "attached", "repl", "mod_stops",
                 "script_flag", "info")

    def __init__(self, evals: str, eval_longs: Sequence[str] = (), mods: str = "", mod_longs: Sequence[str] = (),
                 values: str = "", attached: str = "", repl: str = "", mod_stops: bool = False,
                 script_flag: str = "", version_v: bool = False) -> None:
        self.evals, self.eval_longs, self.mods, self.mod_longs = evals, tuple(eval_longs), mods, tuple(mod_longs)
        self.values, self.attached, self.repl, self.mod_stops = values, attached, repl, mod_stops
        self.script_flag = script_flag  # php -f FILE
        self.info = _INTERP_INFO | {"-v"} if version_v else _INTERP_INFO


_PY = _Interp("c", (), "m", (), "WXQ", "", "i", mod_stops=True)
_INTERPRETERS: dict[str, _Interp] = {
    "python": _PY, "pypy": _PY,
    "node": _Interp("ep", ("--eval", "--print"), "r", ("--require", "--import", "--loader", "--experimental-loader"),
                    "", "", "i", version_v=True),
    "perl": _Interp("eE", (), "Mmd", (), "", "iIx0C", "", version_v=True),
    "ruby": _Interp("e", (), "r", ("--require",), "IEC", "xKWT", ""),
    "php": _Interp("rBRE", (), "", (), "cdzt", "", "a", script_flag="f"),
    "lua": _Interp("e", (), "l", (), "", "", "i"),
    "luajit": _Interp("e", (), "lj", (), "", "", "i"),
    "Rscript": _Interp("e", ("--eval",), "", (), "", "", ""),
    "julia": _Interp("eE", ("--eval", "--print"), "L", ("--load",), "JCOpt", "", "i"),
    "tclsh": _Interp("", (), "", (), "", "", ""),
}
_INTERPRETERS["nodejs"] = _INTERPRETERS["node"]


def _interpreter(ctx: _Ctx, args: Sequence[str], spec: _Interp) -> None:
    if _info_only(args, spec.info):
        return
    script: str | None = None
    module = False
    i, n = 0, len(args)
    while i < n:
        a = args[i]
        i += 1
        if a == "--":
            script = args[i] if i < n else None
            break
        if a == "-":
            break
        if a.startswith("--"):
            name, eq, _ = a.partition("=")
            if name in spec.eval_longs:
                ctx.add("code_execution_wrapper", "deny", "inline code passed to an interpreter")
                return
            if name in spec.mod_longs:
                module = True
                i += 0 if eq else 1
            continue
        if len(a) > 1 and a[0] == "-":
            for j in range(1, len(a)):
                ch = a[j]
                if ch in spec.evals:
                    ctx.add("code_execution_wrapper", "deny", "inline code passed to an interpreter")
                    return
                if ch in spec.repl:
                    ctx.add("code_execution_wrapper", "deny", "an interactive interpreter reading standard input")
                    return
                if ch in spec.mods or ch in spec.values:
                    module = module or ch in spec.mods
                    if j == len(a) - 1:
                        i += 1
                    break
                if ch in spec.attached:
                    break
                if ch == spec.script_flag:
                    script = a[j + 1:] or (args[i] if i < n else None)
                    i = n
                    break
            if module and spec.mod_stops:
                ctx.add("code_execution_wrapper", "ask", "an interpreter running a module or library")
                return
            continue
        script = a
        break
    if script is None:  # preloaded modules or not, the program text itself comes from stdin
        ctx.add("code_execution_wrapper", "deny", "an interpreter reading code from standard input")
        return
    p = ctx.abs(script)
    if p is not None and ctx.inside(p):
        ctx.add("code_execution_wrapper", "ask", "an interpreter running a script file from the workspace")
    else:
        ctx.add("code_execution_wrapper", "deny", "an interpreter running a script from outside the workspace")


def _deno_bun(ctx: _Ctx, args: Sequence[str]) -> None:
    if _info_only(args):
        return
    if not args or args[0] in ("eval", "repl", "-e", "--eval", "-p", "--print"):
        ctx.add("code_execution_wrapper", "deny", "inline code passed to an interpreter")
        return
    ctx.add("code_execution_wrapper", "ask", "a JavaScript runtime running project code")


def _make(ctx: _Ctx, args: Sequence[str]) -> None:
    if not _info_only(args):
        ctx.add("code_execution_wrapper", "ask", "a build tool running project-defined commands")


_PKG_SAFE = {
    "npm": frozenset({"view", "v", "info", "show", "ls", "list", "ll", "la", "outdated", "help", "search", "s",
                      "se", "find", "whoami", "root", "prefix", "explain", "why", "fund", "ping", "query"}),
    "yarn": frozenset({"info", "why", "list", "outdated", "help"}),
    "pnpm": frozenset({"view", "info", "ls", "list", "ll", "la", "outdated", "help", "why", "root"}),
}


def _pkg(ctx: _Ctx, args: Sequence[str], safe: frozenset[str]) -> None:
    if _info_only(args):
        return
    sub = next((a for a in args if not a.startswith("-")), None)
    if sub is None or sub not in safe:
        ctx.add("code_execution_wrapper", "ask", "a package manager command that may run project-defined scripts")


def _pkg_runner(ctx: _Ctx, args: Sequence[str]) -> None:
    if not _info_only(args):
        ctx.add("code_execution_wrapper", "ask", "a package runner executing downloaded or project code")


# ---------------------------------------------------------------------------
# dispatch

_Check = Callable[[_Ctx, Sequence[str]], None]

_SHELLS = ("sh bash zsh dash ksh mksh pdksh yash fish csh tcsh ash rbash busybox toybox elvish nu xonsh "
           "pwsh powershell").split()
_WRAPPERS = ("xargs nohup timeout nice ionice setsid stdbuf chroot sudo su doas run0 pkexec runuser sg newgrp "
             "unshare nsenter systemd-run flock taskset chrt prlimit numactl cpulimit watch strace ltrace valgrind "
             "gdb lldb time unbuffer script parallel expect tmux screen dtach ssh-agent dbus-run-session xvfb-run "
             "firejail bwrap proot fakeroot faketime catchsegv rlwrap at batch crontab entr start-stop-daemon "
             "daemonize chpst setpriv capsh torsocks proxychains proxychains4 tsocks run-parts").split()
_INTERACTIVE = ("less more most pg vi vim nvim view vimdiff gvim rvim ex ed red nano pico rnano emacs emacsclient "
                "joe jed mg micro kak hx ne man info w3m lynx links elinks mc ranger nnn lf tig").split()
_DISK = "mke2fs mkswap shred wipefs fdisk sfdisk cfdisk gdisk sgdisk parted blkdiscard".split()

_DISPATCH: dict[str, _Check] = {
    "curl": _curl, "wget": _wget,
    "nc": _nc, "ncat": _nc, "netcat": _nc, "socat": _socat,
    "telnet": _any_operand_sends("raw network connection that can send local data"),
    "ftp": _any_operand_sends("file transfer with a remote host"),
    "tftp": _any_operand_sends("file transfer with a remote host"),
    "lftp": _any_operand_sends("file transfer with a remote host"),
    "sendmail": _any_operand_sends("sending mail"), "mail": _any_operand_sends("sending mail"),
    "mailx": _any_operand_sends("sending mail"), "mutt": _any_operand_sends("sending mail"),
    "ssh": _ssh, "scp": _scp, "sftp": _sftp, "rsync": _rsync, "openssl": _openssl,
    "rm": _rm, "dd": _dd, "truncate": _truncate,
    "chmod": lambda c, a: _perm(c, a, True), "chown": lambda c, a: _perm(c, a, False),
    "chgrp": lambda c, a: _perm(c, a, False),
    "git": _git,
    "eval": _eval_builtin, "exec": _eval_builtin, "source": _eval_builtin, ".": _eval_builtin,
    "enable": _eval_builtin, "builtin": _eval_builtin,
    "trap": _trap, "alias": _alias, "hash": _hash, "command": _command, "env": _env,
    "find": _find, "fd": _fd, "fdfind": _fd, "sed": _sed, "gsed": _sed,
    "awk": _awk, "gawk": _awk, "mawk": _awk, "nawk": _awk, "busybox-awk": _awk,
    "tar": _tar, "gtar": _tar, "bsdtar": _tar, "rg": _rg, "grep": _rg, "zip": _zip,
    "deno": _deno_bun, "bun": _deno_bun,
    "make": _make, "gmake": _make, "bmake": _make,
    "npx": _pkg_runner, "pnpx": _pkg_runner, "bunx": _pkg_runner,
}
for _name in _SHELLS:
    _DISPATCH[_name] = _shell
for _name in _WRAPPERS:
    _DISPATCH[_name] = _wrapper
for _name in _INTERACTIVE:
    _DISPATCH[_name] = _always("code_execution_wrapper", "deny", "an interactive program that can run shell commands")
for _name in _DISK:
    _DISPATCH[_name] = _always("destructive", "deny", "a disk or file wiping tool")
for _name, _spec in _INTERPRETERS.items():
    _DISPATCH[_name] = (lambda s: lambda c, a: _interpreter(c, a, s))(_spec)
for _name, _safe in _PKG_SAFE.items():
    _DISPATCH[_name] = (lambda s: lambda c, a: _pkg(c, a, s))(_safe)

_VERSIONED = re.compile(r"(python|pypy|perl|ruby|php|lua|luajit|node|tclsh)[0-9.]*")
_SYSTEM_BIN = frozenset({"/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"})
_CWD_CHANGING = frozenset({"cd", "pushd", "popd"})

# Variables that change which code a program loads or runs.
_DANGEROUS_ENV = frozenset(
    """PATH BASH_ENV ENV SHELLOPTS BASHOPTS PS4 PROMPT_COMMAND IFS HOME XDG_CONFIG_HOME PYTHONPATH PYTHONSTARTUP
    PYTHONHOME NODE_OPTIONS NODE_PATH PERL5OPT PERL5LIB PERLLIB RUBYOPT RUBYLIB PAGER EDITOR VISUAL MANPAGER
    LESSOPEN LESSCLOSE BROWSER TAR_OPTIONS WGETRC CURL_HOME SSH_ASKPASS JAVA_TOOL_OPTIONS _JAVA_OPTIONS
    GCONV_PATH""".split()
)
_DANGEROUS_ENV_PREFIXES = ("LD_", "DYLD_", "GIT_", "BASH_FUNC_")


def _program_name(argv0: str) -> str:
    name = argv0.rsplit("/", 1)[-1]
    if name in _DISPATCH:
        return name
    m = _VERSIONED.fullmatch(name)
    return m.group(1) if m else name


def _review_command(ctx: _Ctx, argv: Sequence[str], redirects: Sequence[Any], check_secrets: bool) -> None:
    k = 0
    while k < len(argv) and _ASSIGNMENT.match(argv[k]):  # NAME=value prefixes (if the parser passed them)
        var = argv[k].split("=", 1)[0]
        if var in _DANGEROUS_ENV or var.startswith(_DANGEROUS_ENV_PREFIXES):
            ctx.add("code_execution_wrapper", "deny", "an environment variable that changes which code runs")
        k += 1
    words = argv[k:]
    for red in redirects:
        target = getattr(red, "target", None)
        if isinstance(target, str) and target:
            if target.startswith(("/dev/tcp/", "/dev/udp/")):
                ctx.add("exfiltration", "deny", "a redirection to a network socket")
            elif check_secrets and target != "/dev/null" and _secret_word(ctx, target):
                ctx.add("secrets", "ask", "a redirection touches a secret file")
    if not words:
        return
    argv0, args = words[0], words[1:]
    if "/" in argv0:
        p = ctx.abs(argv0)
        if p is None or ctx.inside(p):
            ctx.add("code_execution_wrapper", "ask", "runs a program from inside the workspace")
        elif posixpath.dirname(p) not in _SYSTEM_BIN:
            ctx.add("code_execution_wrapper", "ask", "runs a program by a path outside the system directories")
    name = _program_name(argv0)
    check = _DISPATCH.get(name)
    if check is not None:
        check(ctx, args)
    elif name.startswith("mkfs"):
        ctx.add("destructive", "deny", "a filesystem creation tool")
    for a in args:
        if "/dev/tcp/" in a or "/dev/udp/" in a:
            ctx.add("exfiltration", "deny", "a network socket path")
            break
    if check_secrets:
        for a in args:
            if any(_secret_word(ctx, c) for c in _word_candidates(a) if c):
                ctx.add("secrets", "ask", "an argument names a secret file")
                break
    if name in _CWD_CHANGING:
        ctx.cwd = None  # later relative words can no longer be resolved


# ---------------------------------------------------------------------------
# the watchdog

_PATHISH_KEYS = frozenset({"path", "file_path", "filepath", "file", "notebook_path", "glob", "include", "paths"})
_GLOB_TOOL_KEYS = _PATHISH_KEYS | {"pattern"}  # the glob tool's pattern is a file-name pattern


def _fspath_str(v: Any) -> str | None:
    if isinstance(v, str):
        return v
    if isinstance(v, os.PathLike):
        p = os.fspath(v)
        return p if isinstance(p, str) else None
    return None


class DefaultWatchdog:
    """The engine's default watchdog; `disabled` names categories to skip."""

    def __init__(self, disabled: Iterable[str] = ()) -> None:
        names = list(disabled)
        unknown = unknown_categories(names)
        if unknown:
            raise ValueError(f"unknown watchdog categories: {', '.join(unknown)}")
        self._enabled = frozenset(CATEGORIES) - frozenset(names)
        self._home = _norm(os.path.expanduser("~"))

    @property
    def enabled(self) -> frozenset[str]:
        return self._enabled

    async def review(self, call: WatchdogCall) -> Verdict:
        try:
            return self._review(call)
        except Exception:  # never let a malformed call through
            return Verdict("deny", "watchdog: the call could not be analysed", INTERNAL_CATEGORY)

    def _review(self, call: WatchdogCall) -> Verdict:
        enabled = self._enabled
        check_secrets = "secrets" in enabled
        ws_raw = getattr(call.manifest, "workspace", None)
        ws = _norm(os.fspath(ws_raw)) if ws_raw is not None else None
        ctx = _Ctx(ws, self._home, enabled)
        if check_secrets:
            for v in (call.paths or {}).values():
                p = _fspath_str(v)
                if p is not None and _is_secret(p):
                    ctx.add("secrets", "ask", "the call touches a secret file")
                    break
        if call.tool == "bash":
            commands = call.commands or _parse_fallback(call.args)
            if commands is None:
                return Verdict("deny", "watchdog: the shell command could not be analysed", INTERNAL_CATEGORY)
            for i, cmd in enumerate(commands):
                ctx.index = i
                _review_command(ctx, tuple(cmd.argv), tuple(cmd.redirects or ()), check_secrets)
            total = len(commands)
        else:
            total = 0
            if check_secrets:
                keys = _GLOB_TOOL_KEYS if call.tool == "glob" else _PATHISH_KEYS
                for key, v in call.args.items():
                    if key in keys:
                        vals = v if isinstance(v, (list, tuple)) else (v,)
                        if any(isinstance(x, str) and _is_secret(x) for x in vals):
                            ctx.add("secrets", "ask", "the call touches a secret file")
                            break
        return _verdict(ctx.findings, total)


def _parse_fallback(args: Any) -> tuple[Any, ...] | None:
    """The pipeline normally hands the parsed commands over; parse with the same parser if it did not."""
    source = args.get("command") if hasattr(args, "get") else None
    if not isinstance(source, str):
        return None
    from ..shell.parse import ShellRefused, parse_shell

    try:
        return parse_shell(source).commands
    except ShellRefused:
        return None


def _verdict(findings: list[_Finding], total: int) -> Verdict:
    if not findings:
        return Verdict.allow()
    chosen = next((f for f in findings if f[0] == "deny"), findings[0])
    action, category, detail, index = chosen
    where = f" (command {index + 1} of {total})" if total > 1 else ""
    return Verdict(action, f"{_WORDS[category]}: {detail}{where}", category)  # type: ignore[arg-type]


def default_watchdog_for(manifest: Any) -> Watchdog:
    """The watchdog a manifest asks for: off, or the default one minus its disabled categories."""
    spec = getattr(getattr(manifest, "spec", None), "watchdog", None)
    if spec is not None and getattr(spec, "enabled", True) is False:
        return AllowAllWatchdog()
    return DefaultWatchdog(getattr(spec, "disable", None) or ())
