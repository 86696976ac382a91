"""The `exfiltration` category: network clients that can send local data to another host.

(netcat, socat, ssh and rsync also report `code_execution_wrapper` findings
for options that run a local program.)
"""

from __future__ import annotations

from typing import Callable, Sequence

from .options import _info_only, _lm, _remote_spec, _scan
from .paths import _Ctx

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


def _curl_engine(args: Sequence[str]) -> bool:
    """`--engine`: an OpenSSL engine named by a path is a shared library curl loads."""
    options = args[:args.index("--")] if "--" in args else args
    return any(a.split("=", 1)[0] == "--engine" for a in options)


def _curl(ctx: _Ctx, args: Sequence[str]) -> None:
    if _curl_engine(args):
        ctx.add("code_execution_wrapper", "deny", "curl loading a shared library")
        return
    _curl_sends(ctx, args)


def _curl_sends(ctx: _Ctx, args: Sequence[str]) -> None:
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


def _wget_runs(args: Sequence[str]) -> bool:
    """`--use-askpass` (any abbreviation) or the wgetrc command `use_askpass` (in an `-e` value, read loosely)
    runs the named program for the user name and password."""
    return any(a.startswith("--") and _lm(a.split("=", 1)[0], "--use-askpass")
               or "useaskpass" in a.lower().replace("_", "").replace("-", "") for a in args)


def _wget(ctx: _Ctx, args: Sequence[str]) -> None:
    if _wget_runs(args):
        ctx.add("code_execution_wrapper", "deny", "wget running a program")
        return
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


def _wgetrc_name(command: str) -> str:
    return command.split("=", 1)[0].strip().lower().replace("_", "").replace("-", "")


def _wgetrc_sends(command: str) -> bool:
    name = _wgetrc_name(command)
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


# openssl options that load a shared library (an engine, or a provider from a chosen directory).
_OPENSSL_LOADERS = frozenset({"-engine", "-keyengine", "-provider-path", "--engine", "--provider-path"})


def _openssl(ctx: _Ctx, args: Sequence[str]) -> None:
    # `-provider` takes a name, but a name with a `/` is loaded as that shared library.
    providers = [v for k, v in zip(args, args[1:]) if k in ("-provider", "--provider")]
    if args and args[0] == "engine" or any(a.split("=", 1)[0] in _OPENSSL_LOADERS for a in args) \
            or any("/" in v for v in providers):
        ctx.add("code_execution_wrapper", "deny", "openssl loading a shared library")
    if args and args[0] in ("s_client", "s_server"):
        ctx.add("exfiltration", "deny", "raw network connection that can send local data")
