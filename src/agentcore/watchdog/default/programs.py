"""The program table: every program the default watchdog knows, in one place.

Each row names a program family, says in words how its arguments (or the
files and input it reads) run code, send data or destroy things, gives the
category of its findings and the verdicts it can yield, and points to the
check that reads its argv. The dispatcher builds its program -> check map
from this table and from nothing else; SPEC.md section 9 (WDOG-5 to WDOG-7
and WDOG-14) lists the same programs, and a test keeps the two in step.

A program that is not in the table is judged only by what applies to every
command (a program path inside the workspace, dangerous environment
prefixes, network socket paths, secret file names).
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Sequence

from .awk import _awk
from .destructive import _dd, _perm, _rm, _truncate
from .exfiltration import _any_operand_sends, _curl, _nc, _openssl, _rsync, _scp, _sftp, _socat, _ssh, _wget
from .git import _git
from .hooks import _cmake, _compiler, _diff3, _install, _ldd, _linker, _sdiff, _sort, _split
from .interpreters import _INTERPRETERS, _PKG_SAFE, _deno_bun, _interpreter, _make, _pkg, _pkg_runner
from .paths import _Ctx
from .projects import _PROJECT, _ask_always, _ask_unless_info, _conda, _docker, _gem, _go, _pip
from .repls import _dc, _m4, _mysql, _psql, _repl, _sqlite3
from .sed import _sed
from .wrappers import (
    _alias,
    _command,
    _compgen,
    _env,
    _eval_builtin,
    _fc,
    _fd,
    _find,
    _groff,
    _hash,
    _jobs,
    _rg,
    _shell,
    _tar,
    _trap,
    _wrapper,
    _zip,
)

_Check = Callable[[_Ctx, Sequence[str]], None]

EXFIL = "exfiltration"
DESTR = "destructive"
CODE = "code_execution_wrapper"


class Program(NamedTuple):
    names: tuple[str, ...]
    category: str  # the category of its main findings
    verdict: str  # deny, ask, or "deny, ask" when it depends on the arguments
    runs: str  # how its arguments or the files it reads run code (or send data, or destroy)
    check: _Check


def _always(category: str, action: str, detail: str) -> _Check:
    def check(ctx: _Ctx, args: Sequence[str]) -> None:
        ctx.add(category, action, detail)
    return check


def _names(text: str) -> tuple[str, ...]:
    return tuple(text.split())


def _interp_check(name: str) -> _Check:
    spec = _INTERPRETERS[name]
    return lambda c, a: _interpreter(c, a, spec)


def _pkg_check(name: str) -> _Check:
    safe = _PKG_SAFE[name]
    return lambda c, a: _pkg(c, a, safe)


def _awk_as(name: str) -> _Check:
    return lambda c, a: _awk(c, a, name)


_SEND = "sends local data to another host"

PROGRAMS: tuple[Program, ...] = (
    # -- exfiltration (WDOG-5) ------------------------------------------------------------------------
    Program(("curl",), EXFIL, "deny", "data options (-d, -F, -T, -K, --json, --data…, @file) and non-GET methods "
            "send local data", _curl),
    Program(("wget",), EXFIL, "deny", "--post-*/--body-*, -i, -B, --config, sending methods and -e post commands "
            "send local data", _wget),
    Program(_names("nc ncat netcat"), EXFIL, "deny", "a raw connection carries stdin; -e/-c/--exec run a program",
            _nc),
    Program(("socat",), EXFIL, "deny", "a raw connection carries local data; EXEC:/SYSTEM: addresses run programs",
            _socat),
    Program(("telnet",), EXFIL, "deny", "a raw connection to the operand host", _any_operand_sends(
        "raw network connection that can send local data")),
    Program(_names("ftp tftp lftp"), EXFIL, "deny", "file transfer with the operand host",
            _any_operand_sends("file transfer with a remote host")),
    Program(_names("sendmail mail mailx mutt"), EXFIL, "deny", "mail to the operand address",
            _any_operand_sends("sending mail")),
    Program(("ssh",), EXFIL, "deny", "a session on the operand host; -F, -o …Command run local programs", _ssh),
    Program(("scp",), EXFIL, "deny", "copies to or from a remote operand; -S, -F run local programs", _scp),
    Program(("sftp",), EXFIL, "deny", "file transfer with the operand host; -S, -D, -F run local programs", _sftp),
    Program(("rsync",), EXFIL, "deny", "copies to or from a remote operand; -e/--rsh/--rsync-path run programs",
            _rsync),
    Program(("openssl",), EXFIL, "deny", "s_client/s_server open raw connections; -engine, -provider-path and "
            "the engine command load shared libraries", _openssl),
    # -- destructive (WDOG-6) -------------------------------------------------------------------------
    Program(("rm",), DESTR, "deny, ask", "recursive removal of the workspace, outside it or of .git", _rm),
    Program(("chmod",), DESTR, "deny", "recursive mode changes outside the workspace or world-writable",
            lambda c, a: _perm(c, a, True)),
    Program(_names("chown chgrp"), DESTR, "deny", "recursive owner changes outside the workspace",
            lambda c, a: _perm(c, a, False)),
    Program(("dd",), DESTR, "deny", "of= a device, or a target that cannot be resolved", _dd),
    Program(("truncate",), DESTR, "deny", "truncating files outside the workspace", _truncate),
    Program(_names("mke2fs mkswap shred wipefs fdisk sfdisk cfdisk gdisk sgdisk parted blkdiscard"), DESTR, "deny",
            "disk and file wiping tools (and every mkfs*, matched by prefix in dispatch.py)",
            _always(DESTR, "deny", "a disk or file wiping tool")),
    Program(("git",), CODE, "deny, ask", "-c/--config-env/--exec-path, aliases, ext:: and --upload-pack run "
            "programs; -C/--git-dir outside the workspace; forced pushes, reset --hard, clean (destructive)", _git),
    # -- code execution: shells, builtins, wrappers (WDOG-7) ------------------------------------------------
    Program(_names("sh bash zsh dash ksh mksh pdksh yash fish csh tcsh ash rbash busybox toybox elvish nu xonsh "
                   "pwsh powershell"), CODE, "deny", "a shell runs code from its arguments or stdin", _shell),
    Program(_names("eval exec source . enable builtin"), CODE, "deny", "builtins that run code from their "
            "arguments or a file", _eval_builtin),
    Program(("trap",), CODE, "deny", "runs its argument later", _trap),
    Program(("alias",), CODE, "deny", "defines a command that runs in place of another", _alias),
    Program(("hash",), CODE, "deny", "-p binds a command name to a path", _hash),
    Program(("command",), CODE, "deny", "runs its operand (only -v/-V look up)", _command),
    Program(("jobs",), CODE, "deny", "-x runs its operand command", _jobs),
    Program(_names("compgen complete"), CODE, "deny", "-C runs a command, -F a function, and -W expands its "
            "word list (command substitution included)", _compgen),
    Program(("fc",), CODE, "deny", "runs an editor and then the edited history entries (-s re-runs them); "
            "only -l lists", _fc),
    Program(("env",), CODE, "deny", "runs its operand command; -S splits a command line", _env),
    Program(_names("xargs nohup timeout nice ionice setsid stdbuf chroot sudo su doas run0 pkexec runuser sg newgrp "
                   "unshare nsenter systemd-run flock taskset chrt prlimit numactl cpulimit watch strace ltrace "
                   "valgrind gdb lldb time unbuffer script parallel expect tmux screen dtach ssh-agent "
                   "dbus-run-session xvfb-run firejail bwrap proot fakeroot faketime catchsegv rlwrap at batch "
                   "crontab entr start-stop-daemon daemonize chpst setpriv capsh torsocks proxychains proxychains4 "
                   "tsocks run-parts setarch linux32 linux64 i386 x86_64 runcon choom scriptlive perf"), CODE, "deny", "wrappers and debuggers run the command or program in their "
                                                       "arguments (gdb and lldb also run scripts and shell "
                                                       "commands)", _wrapper),
    Program(_names("less more most pg pager sensible-pager vi vim nvim view vimdiff gvim rvim vim.basic vim.tiny "
                   "editor sensible-editor ex ed red nano pico rnano emacs emacsclient "
                   "joe jed mg micro kak hx ne man info w3m lynx links elinks mc ranger nnn lf tig"), CODE, "deny",
            "interactive programs with shell escapes", _always(CODE, "deny", "an interactive program that can run "
                                                                             "shell commands")),
    Program(("find",), CODE, "deny", "-exec/-execdir/-ok/-okdir run commands; -delete, -fprint* write", _find),
    Program(_names("fd fdfind"), CODE, "deny", "-x/-X/--exec run commands", _fd),
    # -- code execution: script languages read as programs (WDOG-7) ------------------------------------------
    Program(_names("sed gsed"), CODE, "deny, ask", "e and s///e run commands; w, W and s///w write files (opened "
            "while the script is parsed); -f scripts and -i in-place edits ask", _sed),
    Program(_names("awk nawk busybox-awk"), CODE, "deny, ask", "system(), pipes, |&, @-calls and print > file; "
            "-l loads a library; -f programs ask", _awk_as("awk")),
    Program(("gawk",), CODE, "deny, ask", "as awk; -d/-o/-p write files; --sandbox is honoured", _awk_as("gawk")),
    Program(("mawk",), CODE, "deny, ask", "as awk; -W exec reads the program from a file", _awk_as("mawk")),
    # -- code execution: options that name a program (WDOG-7, WDOG-14) --------------------------------------
    Program(_names("tar gtar bsdtar"), CODE, "deny", "--to-command, --use-compress-program (-I), --checkpoint-action, "
            "--info-script (-F), --rsh-command and --rmt-command run programs", _tar),
    Program(_names("rg grep"), CODE, "deny", "--pre runs a preprocessor and --hostname-bin a program for each "
            "search", _rg),
    Program(("zip",), CODE, "deny", "-TT/--unzip-command run a test program", _zip),
    Program(("sort",), CODE, "deny", "--compress-program (and every abbreviation getopt accepts) runs a program "
            "on its temporary files", _sort),
    Program(("split",), CODE, "deny", "--filter (and its abbreviations) pipes each piece into a shell command",
            _split),
    Program(("sdiff",), CODE, "deny", "--diff-program (and its abbreviations) runs a program", _sdiff),
    Program(("diff3",), CODE, "deny", "--diff-program (and its abbreviations) runs a program", _diff3),
    Program(("install",), CODE, "deny", "--strip-program (and its abbreviations) runs a program on each copy",
            _install),
    Program(_names("groff troff nroff"), CODE, "deny", "-U (unsafe mode) lets the input run shell commands "
            "(.sy, .pso, .pi)", _groff),
    Program(("cmake",), CODE, "deny, ask", "-E chdir/env/time run a command (rm/remove ask, destructive); "
            "configuring, --build, -P and --install run project code (ask)", _cmake),
    Program(("ldd",), CODE, "ask", "may run the program it inspects through its loader", _ldd),
    Program(_names("gcc cc c++ g++ clang clang++"), CODE, "deny, ask", "compiler drivers, also with a target "
            "prefix or version suffix (x86_64-linux-gnu-gcc-12): -wrapper, -fplugin, -fpass-plugin, -specs, "
            "-B/--prefix, --gcc-toolchain, --gcc-install-dir, --ld-path, -fuse-ld=PATH, -ccc-…, -Xclang/-Xlinker "
            "-load/-plugin and -Wl,/-Wp,/-Wa, plugins run or load programs (deny); @file options ask", _compiler),
    Program(_names("ld ld.bfd ld.gold ld.lld lld gold mold"), CODE, "deny, ask", "linkers, also with a target prefix "
            "or version suffix: -plugin loads a library and mold -run runs a command (deny); @file options ask",
            _linker),
    # -- code execution: interpreters and REPL-like programs (WDOG-7, WDOG-14) --------------------------------
    *(Program((n,), CODE, "deny, ask", "inline code (-c/-e/…), stdin or a script outside the workspace deny; "
              "a workspace script asks", _interp_check(n)) for n in _INTERPRETERS),
    Program(_names("deno bun"), CODE, "deny, ask", "eval/repl/-e run inline code; other commands run project code",
            _deno_bun),
    Program(("sqlite3",), CODE, "deny, ask", ".shell/.system/.load/.excel/.nonce, load_extension(), edit() and "
            "|pipes of .once/.output/.read/.import run programs; other SQL asks; -safe without -nonce is allowed",
            _sqlite3),
    Program(("psql",), CODE, "deny, ask", "\\! and |pipes of \\o, \\g, \\w, \\copy and -o run shell commands; "
            "other SQL asks", _psql),
    Program(_names("mysql mariadb"), CODE, "deny, ask", "system and \\! run shell commands; other SQL asks", _mysql),
    Program(("m4",), CODE, "deny, ask", "syscmd/esyscmd run shell commands; its input is a program (ask)", _m4),
    Program(("dc",), CODE, "deny, ask", "! runs a shell command; its input is a program (ask)", _dc),
    Program(_names("irb pry ipython bpython jshell guile racket sbcl clisp ocaml ghci ghc runghc runhaskell scala "
                   "groovy groovysh jrunscript erl escript elixir iex clojure clj R octave gnuplot maxima gp swipl "
                   "wish osascript mongosh mongo ts-node tsx pydoc pdb"), CODE, "ask",
            "interpreters and REPLs: their arguments or stdin carry script text", _repl),
    # -- code execution: build tools, test runners, package managers (WDOG-7, WDOG-14) --------------------------
    Program(_names("make gmake bmake"), CODE, "ask", "runs the recipes of a Makefile", _make),
    Program(_names("npx pnpx bunx"), CODE, "ask", "runs downloaded or project packages", _pkg_runner),
    *(Program((n,), CODE, "ask", "scripts of package.json and install scripts run unless the subcommand only "
              "reads", _pkg_check(n)) for n in _PKG_SAFE),
    Program(_names("ninja ctest meson scons waf just task rake prove bundle pipx uv uvx poetry pdm hatch pre-commit "
                   "composer"), CODE, "ask", "build files, task files, Rakefiles, Gemfiles, pyproject builds and "
            "hooks are project code (--version/--help are allowed)", _ask_unless_info(_PROJECT)),
    Program(_names("pytest py.test tox nox mvn gradle sbt bazel bazelisk cargo rustc rustup rustdoc dotnet msbuild"),
            CODE, "ask", "they load project code or configuration before reading their arguments (conftest.py, "
            "toxfile.py, noxfile.py, .mvn/jvm.config, build scripts, rust-toolchain.toml, build.rs and proc "
            "macros, global.json), so even --version asks", _ask_always(_PROJECT)),
    Program(_names("pip pip3"), CODE, "deny, ask", "install/wheel/download/uninstall/config run build backends "
            "(setup.py) of local directories and sdists (ask); --python runs another interpreter (deny); "
            "list/show/freeze and other read-only subcommands are allowed", _pip),
    Program(("go",), CODE, "deny, ask", "run/test/generate/tool run project code (ask); -toolexec, -exec, "
            "-vettool and -ldflags=-extld run a named program (deny); env -w/-u, -gccgoflags, -compiler ask", _go),
    Program(_names("docker podman nerdctl"), CODE, "ask", "run/build/exec/compose run images and Dockerfiles; only "
            "read-only subcommands are allowed", _docker),
    Program(_names("conda mamba micromamba"), CODE, "ask", "install/run/create run package scripts", _conda),
    Program(("gem",), CODE, "ask", "install/build run native extension builds", _gem),
)


def _build_dispatch() -> dict[str, _Check]:
    table: dict[str, _Check] = {}
    for row in PROGRAMS:
        for name in row.names:
            if name in table:
                raise RuntimeError(f"program {name!r} appears twice in the watchdog's program table")
            table[name] = row.check
    return table


_DISPATCH: dict[str, _Check] = _build_dispatch()
