"""One simple command at a time: environment prefixes, redirections, the program's check, secret words."""

from __future__ import annotations

import posixpath
import re
from typing import Any, Callable, Sequence

from .awk import _awk
from .destructive import _dd, _perm, _rm, _truncate
from .exfiltration import _any_operand_sends, _curl, _nc, _openssl, _rsync, _scp, _sftp, _socat, _ssh, _wget
from .git import _git
from .interpreters import _INTERPRETERS, _PKG_SAFE, _deno_bun, _interpreter, _make, _pkg, _pkg_runner
from .options import _ASSIGNMENT
from .paths import _Ctx
from .secrets import _secret_word, _word_candidates
from .sed import _sed
from .wrappers import (
    _alias,
    _command,
    _env,
    _eval_builtin,
    _fd,
    _find,
    _hash,
    _rg,
    _shell,
    _tar,
    _trap,
    _wrapper,
    _zip,
)


_Check = Callable[[_Ctx, Sequence[str]], None]


def _always(category: str, action: str, detail: str) -> Callable[[_Ctx, Sequence[str]], None]:
    def check(ctx: _Ctx, args: Sequence[str]) -> None:
        ctx.add(category, action, detail)
    return check


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
    "awk": _awk, "gawk": lambda c, a: _awk(c, a, "gawk"), "mawk": lambda c, a: _awk(c, a, "mawk"), "nawk": _awk,
    "busybox-awk": _awk,
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
