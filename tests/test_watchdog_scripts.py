"""The watchdog reads sed and awk programs as programs: generated scripts run by the REAL tools.

Hypothesis builds sed scripts and awk programs from a grammar that mixes
harmless constructs with dangerous ones (`e`, `w`, `system`, pipes, print
redirections) and with the shapes that used to hide them: `}` `;` `|` `>`
inside strings and regexes, comments, line continuations, labels, branches
and `v` followed by more commands, a/i/c text carried across `-e` scripts,
`--sandbox` before or after the script. Every generated command line is
judged by the default watchdog and then run for real (GNU sed, gawk, mawk)
in a fresh scratch directory whose PATH starts with a fake `mark` command
that leaves a marker. A script the watchdog allows must leave the scratch
directory exactly as it was. Scripts it refuses run too: they show that the
grammar reaches real side effects, so the check above can fail.

On CI (CI=true) gawk, mawk and GNU sed must be installed; locally a missing
one skips its tests.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentcore.shell.parse import SimpleCommand
from agentcore.watchdog import Verdict, WatchdogCall
from agentcore.watchdog.default import DefaultWatchdog

ON_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
INPUT = "mark\nalpha beta\nx;y}z|w>q\n1 2 3\n"


def _require(tool: str, version_arg: str = "--version", must_contain: str = "") -> str:
    path = shutil.which(tool)
    ok = path is not None
    if ok and must_contain:
        out = subprocess.run([tool, version_arg], capture_output=True, text=True, timeout=10)
        ok = must_contain in out.stdout + out.stderr
    if not ok:
        msg = f"{tool}{' (' + must_contain + ')' if must_contain else ''} is not installed"
        if ON_CI:
            pytest.fail(f"CI must provide {msg}: .ci/run installs it")
        pytest.skip(msg)
    assert path is not None
    return path


@pytest.fixture(scope="module")
def gnu_sed() -> str:
    return _require("sed", "--version", "GNU sed")


@pytest.fixture(scope="module")
def awks() -> dict[str, str]:
    return {"gawk": _require("gawk", "--version", "GNU Awk"), "mawk": _require("mawk", "-Wversion", "mawk")}


# --- judging and running ----------------------------------------------------------------------------

WATCHDOG = DefaultWatchdog()


def verdict(argv: list[str], workspace: Path) -> Verdict:
    manifest = SimpleNamespace(workspace=workspace, spec=SimpleNamespace(watchdog=SimpleNamespace(enabled=True,
                                                                                                   disable=[])))
    call = WatchdogCall("bash", {"command": "generated"}, manifest, "sess", (SimpleCommand(tuple(argv), (), ""),))
    return anyio.run(WATCHDOG.review, call)


def _snapshot(root: Path) -> dict[str, tuple[bool, int, int]]:
    out = {}
    for p in root.rglob("*"):
        st_ = p.lstat()
        out[str(p.relative_to(root))] = (p.is_dir(), st_.st_size, st_.st_mtime_ns)
    return out


class Scratch:
    """A fresh directory with an input file and a fake `mark` command first on PATH."""

    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="wdog-scratch-")
        self.root = Path(os.path.realpath(self._tmp.name))
        (self.root / "in.txt").write_text(INPUT)
        (self.root / "prog.awk").write_text("{ print }\n")
        bindir = self.root / "bin"
        bindir.mkdir()
        mark = bindir / "mark"
        mark.write_text(f"#!/bin/sh\n: > '{self.root}/MARKER'\n")
        mark.chmod(0o755)

    def __enter__(self) -> "Scratch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self._tmp.cleanup()

    def run(self, argv: list[str]) -> tuple[bool, subprocess.CompletedProcess[bytes] | None]:
        """Run argv in the scratch directory; (did it change anything?, the process)."""
        before = _snapshot(self.root)
        env = {"PATH": f"{self.root}/bin:/usr/bin:/bin", "HOME": str(self.root / "bin"), "LC_ALL": "C"}
        try:
            proc: subprocess.CompletedProcess[bytes] | None = subprocess.run(
                argv, cwd=self.root, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=5)
        except subprocess.TimeoutExpired:
            proc = None
        return _snapshot(self.root) != before, proc


STATS: Counter[str] = Counter()


def judge_and_run(argv: list[str], tool: str) -> None:
    with Scratch() as s:
        v = verdict(argv, s.root)
        changed, proc = s.run(argv)
    STATS[f"{tool}:{v.action}"] += 1
    if changed:
        STATS[f"{tool}:{v.action}:side-effect"] += 1
    if v.action == "allow":
        STATS[f"{tool}:allowed-run"] += 1
        if proc is not None and proc.returncode == 0:
            STATS[f"{tool}:allowed-ok"] += 1
        assert not changed, f"the watchdog allowed {argv!r}, which changed the scratch directory"


# --- the sed grammar ------------------------------------------------------------------------------

_RE_PIECES = ["a", "x", ".", "*", "^", "\\/", "[0-9]", "[/]", ";", "}", " w out1", "#", "\\n", "[[:alpha:]]",
              "|", "\\c", "e", "mark"]
_TEXT_PIECES = ["text", "; w out1", "} w out2", " e mark", "\\", "#x", "w out3", ";p"]


@st.composite
def sed_regex(draw: st.DrawFn, delim: str = "/") -> str:
    body = "".join(draw(st.lists(st.sampled_from(_RE_PIECES), max_size=3)))
    return body.replace(delim, "\\" + delim) if delim != "/" else body


@st.composite
def sed_address(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["", "", "num", "$", "re", "cre", "step", "range", "zero", "reI"]))
    if kind == "num":
        addr = str(draw(st.integers(1, 3)))
    elif kind == "$":
        addr = "$"
    elif kind in ("re", "reI"):
        addr = "/" + draw(sed_regex()) + "/" + ("I" if kind == "reI" else "")
    elif kind == "cre":
        addr = "\\%" + draw(sed_regex("%")) + "%"
    elif kind == "step":
        addr = "1~2"
    elif kind == "range":
        addr = draw(st.sampled_from(["1,+1", "2,$", "/a/,/x/", "1,~2"]))
    elif kind == "zero":
        addr = "0,/" + draw(sed_regex()) + "/"
    else:
        addr = ""
    bang = draw(st.sampled_from(["", "", "!", " !"])) if addr else ""
    return addr + bang


_FILES = ["out1", "out 2", "/dev/stdout", "in.txt", "out1;p", "out1}"]


@st.composite
def sed_command(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["p", "d", "=", "l", "n", "h", "H", "g", "x", "z", "F", "q", "Q", "s", "s", "s", "y",
                                 "a", "i", "c", "aml", "r", "R", "w", "W", "e", "label", "branch", "v", "comment",
                                 "block"]))
    addr = "" if kind in ("label", "comment", "v") else draw(sed_address())
    if kind in ("p", "d", "=", "l", "n", "h", "H", "g", "x", "z", "F"):
        return addr + kind
    if kind in ("q", "Q"):
        return addr + kind + draw(st.sampled_from(["", " 3", "5"]))
    if kind == "s":
        delim = draw(st.sampled_from(["/", "/", "|", ",", "#", ";", " ", "w", "\\"]))
        flags = "".join(draw(st.lists(st.sampled_from(["g", "p", "i", "I", "m", "2", "e", " w out1", "w /dev/stdout"]),
                                      max_size=2, unique=True)))
        repl = draw(st.sampled_from(["b", "mark", "&&", "\\1", "x;w out2", ""]))
        return f"{addr}s{delim}{draw(sed_regex(delim))}{delim}{repl}{delim}{flags}"
    if kind == "y":
        return addr + draw(st.sampled_from(["y/abc/xyz/", "y,a;,b},", "y/a/w/"]))
    if kind in ("a", "i", "c"):
        return addr + kind + draw(st.sampled_from([" ", "\\", ""])) + draw(st.sampled_from(_TEXT_PIECES))
    if kind == "aml":
        return addr + "a\\\n" + draw(st.sampled_from(_TEXT_PIECES)) + draw(st.sampled_from(["", "\\\nmore"]))
    if kind in ("r", "R", "w", "W"):
        return addr + kind + draw(st.sampled_from([" ", ""])) + draw(st.sampled_from(_FILES))
    if kind == "e":
        return addr + "e" + draw(st.sampled_from(["", " mark", " true"]))
    if kind == "label":
        return ":" + draw(st.sampled_from(["L1", "L2", "L1 w out1", "L2;w out2", "L1}"]))
    if kind == "branch":
        return addr + draw(st.sampled_from(["b", "t", "T"])) + draw(st.sampled_from(["", " L2", "L2 w out1",
                                                                                    " L2;e", " L2#c"]))
    if kind == "v":
        return draw(st.sampled_from(["v", "v 4.2", "v 4.2 w out1", "v;w out1", "v e"]))
    if kind == "comment":
        return "#" + draw(st.sampled_from(["n", " c", " ; w out1", " x \\"]))
    inner = draw(st.lists(st.sampled_from(["p", "s/a/b/", "w out1", "x", "e"]), min_size=1, max_size=2))
    return addr + "{" + ";".join(inner) + draw(st.sampled_from(["}", ";}", "\n}"]))


@st.composite
def sed_argv(draw: st.DrawFn) -> list[str]:
    commands = draw(st.lists(sed_command(), min_size=1, max_size=4))
    seps = [draw(st.sampled_from([";", "\n", " ; ", "\n\n"])) for _ in commands]
    script = "".join(c + s for c, s in zip(commands, seps)).rstrip(";\n ")
    # `:L2` at the end gives every branch a forward target (no loops)
    script += draw(st.sampled_from(["", "\n:L2", ";:L2"]))
    opts = draw(st.lists(st.sampled_from(["-n", "-E", "-s", "-z", "--posix", "--debug", "-u"]), max_size=2,
                         unique=True))
    how = draw(st.sampled_from(["operand", "operand", "e", "split", "sandbox-first", "sandbox-after", "posix-order"]))
    if how == "operand":
        return ["sed", *opts, script, "in.txt"]
    if how == "e":
        return ["sed", *opts, "-e", script, "in.txt"]
    if how == "split":
        cut = draw(st.integers(0, len(script)))
        return ["sed", *opts, "-e", script[:cut], "--expression=" + script[cut:], "in.txt"]
    if how == "sandbox-first":
        return ["sed", "--sandbox", *opts, "-e", script, "in.txt"]
    if how == "sandbox-after":
        return ["sed", *opts, "-e", script, "--sandbox", "in.txt"]
    return ["sed", *opts, script, "-e", "p", "in.txt"]


# --- the awk grammar ------------------------------------------------------------------------------

_STRINGS = ['"}"', '";"', '"|"', '">"', '"# x"', '"\\""', '"/"', '"a b"', '"out1"', '"mark"', '"in.txt"',
            '"/dev/stderr"', '"\\\n"']
_REGEXES = ["/a|b/", "/[/]/", "/\\//", "/x;}/", "/\"/", "/[[:alpha:]]+/", "/#/", "/>/"]


@st.composite
def awk_expr(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["str", "str", "re", "num", "field", "div", "cmp", "concat", "paren", "call"]))
    if kind == "str":
        return draw(st.sampled_from(_STRINGS))
    if kind == "re":
        return "$0 ~ " + draw(st.sampled_from(_REGEXES))
    if kind == "num":
        return draw(st.sampled_from(["1", "2.5", "1e3", "NR", "NF"]))
    if kind == "field":
        return draw(st.sampled_from(["$1", "$NF", "$(1)"]))
    if kind == "div":
        return draw(st.sampled_from(["NR / 2", "$1/2", "(NF) / 1", "n++ / 2"]))
    if kind == "cmp":
        return draw(st.sampled_from(["(NR > 1)", "(a >= b)", "(x < 3)"]))
    if kind == "concat":
        return draw(st.sampled_from(_STRINGS)) + " " + draw(st.sampled_from(["$1", "NR"]))
    if kind == "paren":
        return "(" + draw(st.sampled_from(_STRINGS)) + ")"
    return draw(st.sampled_from(["length($0)", "substr($0, 1, 2)", "toupper(\"x\")", "index(\"a|b\", \"|\")"]))


@st.composite
def awk_statement(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["print", "print", "printf", "assign", "if", "getline", "system", "pipe", "coproc",
                                 "comment", "close", "indirect", "next", "incr"]))
    if kind in ("print", "printf"):
        head = "print " if kind == "print" else 'printf "%s\\n", '
        args = draw(st.lists(awk_expr(), min_size=1, max_size=2))
        redir = draw(st.sampled_from(["", "", " > \"out1\"", " >> \"out2\"", " > \"/dev/stderr\"", " | \"mark\"",
                                      ' > "/dev/stderr" "x"', " > $1", ",\n \"b\" > \"out1\"", "\\\n> \"out1\""]))
        return head + ", ".join(args) + redir
    if kind == "assign":
        return "x = " + draw(awk_expr())
    if kind == "if":
        return "if (" + draw(awk_expr()) + ") " + draw(st.sampled_from(["print 1", "x = 1", "/\"/ ; system(\"mark\") ; /\"/",
                                                                        "print > \"out1\""]))
    if kind == "getline":
        return draw(st.sampled_from(['getline line < "in.txt"', "getline", '(getline l < "in.txt") > 0']))
    if kind == "system":
        return draw(st.sampled_from(['system("mark")', 'sys\\\ntem("mark")', 'system\\\n("mark")', 'system ("true")']))
    if kind == "pipe":
        return draw(st.sampled_from(['"mark" | getline', '"echo hi" | getline v', 'print "x" | "cat"']))
    if kind == "coproc":
        return 'print "x" |& "mark"'
    if kind == "comment":
        return "x = 1 # " + draw(st.sampled_from(["}", ";", "a \\", "| sh"])) + "\n"
    if kind == "close":
        return 'close("mark")'
    if kind == "indirect":
        return draw(st.sampled_from(['f = "system"; @f("mark")', '@include "nothing"']))
    if kind == "next":
        return "next"
    return "n++"


@st.composite
def awk_argv(draw: st.DrawFn) -> list[str]:
    rules = []
    for _ in range(draw(st.integers(1, 3))):
        pattern = draw(st.sampled_from(["", "BEGIN ", "END ", "NR == 1 ", "/a/ ", "$1 > 1 "]))
        body = draw(st.lists(awk_statement(), min_size=1, max_size=3))
        sep = draw(st.sampled_from(["; ", "\n", " ;\n"]))
        rules.append(pattern + "{ " + sep.join(body) + " }")
    program = draw(st.sampled_from(["\n", " "])).join(rules)
    opts = draw(st.lists(st.sampled_from(["-v", "-F:", "--sandbox", "-S", "--", "-W interactive", "-i /dev/null",
                                          "-W san"]), max_size=2, unique=True))
    argv: list[str] = []
    for o in opts:
        argv += ["-v", "v=1"] if o == "-v" else o.split()
    if "--" in argv:
        argv.remove("--")
        argv.append("--")
    how = draw(st.sampled_from(["operand", "operand", "-e", "--source=", "-W source=", "--so"]))
    if how == "operand":
        return [*argv, program, "in.txt"]
    if how in ("-e", "--so"):
        return [*argv, how, program, "in.txt"]
    return [*argv, *how.split()[:-1], how.split()[-1] + program, "in.txt"]


# --- the generated tests ----------------------------------------------------------------------------

_SETTINGS = settings(max_examples=int(os.environ.get("WDOG_SCRIPT_EXAMPLES", "300")), deadline=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@_SETTINGS
@given(argv=sed_argv())
def test_generated_sed_scripts_the_watchdog_allows_have_no_side_effect(gnu_sed: str, argv: list[str]) -> None:
    judge_and_run(argv, "sed")


@_SETTINGS
@given(tail=awk_argv())
def test_generated_awk_programs_the_watchdog_allows_have_no_side_effect(awks: dict[str, str],
                                                                       tail: list[str]) -> None:
    for name in ("gawk", "mawk"):
        judge_and_run([name, *tail], name)


def test_the_generated_runs_reached_real_side_effects_and_real_allows() -> None:
    """Not vacuous: among the generated scripts some were allowed and ran cleanly, and some of the
    refused ones really wrote a file or ran the marker when run without the watchdog."""
    if not STATS:
        pytest.skip("the generated tests did not run in this session")
    for tool in ("sed", "gawk", "mawk"):
        if STATS[f"{tool}:allow"] + STATS[f"{tool}:deny"] + STATS[f"{tool}:ask"] == 0:
            continue
        assert STATS[f"{tool}:allowed-ok"] > 0, (tool, dict(STATS))
        assert STATS[f"{tool}:deny:side-effect"] > 0, (tool, dict(STATS))
    print("generated script runs:", dict(sorted(STATS.items())))


# --- the forms the issue reported, each shown to do its damage unguarded ------------------------------

ISSUE_FORMS: list[tuple[list[str], str, str]] = [
    # awk: `}` or `;` inside a string before a pipe or a redirection
    (["gawk", 'BEGIN { x = "}"; print "a" | "mark" }'], "MARKER", "awk"),
    (["mawk", 'BEGIN { x = ";" } { print > "out1" }', "in.txt"], "out1", "awk"),
    (["gawk", '{ print "x;}" > "out1" }', "in.txt"], "out1", "awk"),
    # awk: `system` split by a line continuation
    (["gawk", 'BEGIN { system\\\n("mark") }'], "MARKER", "awk"),
    (["mawk", 'BEGIN { system\\\n("mark") }'], "MARKER", "awk"),
    # awk: a statement after `if (…)` that gawk reads as a regex and an old reader as a string
    (["gawk", 'BEGIN { if (1) /"/ ; system("mark") ; /"/ }'], "MARKER", "awk"),
    # awk: the program given through -W source=, or next to an -i library
    (["gawk", "-W", 'source=BEGIN { system("mark") }'], "MARKER", "awk"),
    (["gawk", "-i", "/dev/null", 'BEGIN { system("mark") }'], "MARKER", "awk"),
    # sed: labels, branches and `v` followed directly by w / e
    (["sed", "-n", "b x w out1", "in.txt"], "out1", "sed"),
    (["sed", "-n", ":a w out1", "in.txt"], "out1", "sed"),
    (["sed", "-n", "v 4.2 w out1", "in.txt"], "out1", "sed"),
    (["sed", "-n", "tL e mark\n:L", "in.txt"], "MARKER", "sed"),
    (["sed", "-n", "v 4.2 e mark", "in.txt"], "MARKER", "sed"),
    (["sed", "-n", ":a\\;W out1", "in.txt"], "out1", "sed"),
    # sed: `w` files are opened while the script is parsed, even when it then fails
    (["sed", "-e", "w out1", "-e", "s/unterminated", "in.txt"], "out1", "sed"),
    (["sed", "w out1\nb nowhere", "in.txt"], "out1", "sed"),
    # sed: --sandbox protects only the scripts after it
    (["sed", "-e", "w out1", "--sandbox", "in.txt"], "out1", "sed"),
    # sed: `a\\` takes the next character as it is, so the next -e is a command again
    (["sed", "-e", "a\\\\", "-e", "w out1", "in.txt"], "out1", "sed"),
]


@pytest.mark.parametrize("argv,artifact,family", ISSUE_FORMS)
def test_issue_forms_do_damage_unguarded_and_are_refused(argv: list[str], artifact: str, family: str,
                                                         request: pytest.FixtureRequest) -> None:
    request.getfixturevalue("gnu_sed" if family == "sed" else "awks")
    with Scratch() as s:
        v = verdict(argv, s.root)
        changed, _ = s.run(argv)
        assert (s.root / artifact).exists(), "control: the real tool did not do what the form claims"
    assert changed
    assert (v.action, v.category) == ("deny", "code_execution_wrapper"), (argv, v.reason)


# --- common one-liners stay allowed, and run cleanly ------------------------------------------------

SED_ONE_LINERS: list[list[str]] = [
    ["-n", "1,5p"], ["s/a/b/g"], ["-E", "s/(x)/\\1/"], ["/^#/d"], ["$!N;s/\\n/ /"], ["-n", "/alpha/,/2/p"],
    ["y/abc/xyz/"], ["1~2d"], ["0,/a/s//x/"], ["s|/usr|/opt|g"], [":a;N;$!ba;s/\\n/,/g"], ["-n", "$="],
    ["1i\\\nheader"], ["a footer"], ["-e", "s/a/b/", "-e", "s/c/d/"], ["--expression=p", "-n"], ["/x/{s/a/b/;p}"],
    ["-n", "l"], ["2q"], ["s/[[:space:]]*$//"], ["-n", "s/a/b/w /dev/stdout"], ["="], ["-z", "s/\\n/,/g"],
    ["--sandbox", "s/a/b/"], ["-n", "/a/{p;q}"], ["s/\\(.*\\)/[\\1]/"], ["G"], ["1!G;h;$!d"], ["-n", "2{p;q}"],
    ["s/^[ \\t]*//;s/[ \\t]*$//"], ["-E", "s/[0-9]+/N/g"], ["/^$/d"], ["-n", "/x/I p"], ["s/a/b/2"],
    ["-s", "-n", "$p"], ["-n", "/[;}]/p"], ["s/x/&&/"], ["\\%alpha%d"], ["-n", "\\,2,p"],
]
AWK_ONE_LINERS: list[list[str]] = [
    ["{print $1}"], ["-F:", "{print $NF}"], ["NR==2"], ["{ s += $1 } END { print s }"], ['{ print NR ": " $0 }'],
    ["length > 3"], ["!seen[$0]++"], ['{ $1 = ""; print }'], ['BEGIN { FS = "," } { print $2 }'],
    ['{ printf "%-10s %s\\n", $1, $2 }'], ["END { print NR }"], ["/alpha/,/2/"], ['{ print > "/dev/stderr" }'],
    ['{ n = split($0, a, " "); print n }'], ['{ gsub(/a/, "b"); print }'], ["{ print toupper($0) }"],
    ["NF { print $NF }"], ["-v", "OFS=,", "{ $1 = $1; print }"], ["{ print substr($0, 2) }"],
    ["{ a[$1]++ } END { for (k in a) print k, a[k] }"],
    ['BEGIN { while ((getline line < "in.txt") > 0) n++; print n }'], ["{ print $1 / 2 }"],
    ['{ x = $0 ~ /a|b/ ? "y" : "n"; print x }'], ["$1 > 1 { print }"],
    ['{ if ($1 > 1) print $1; else print "small" }'], ['{ printf("%s\\n", $0) > "/dev/stdout" }'],
    ['{ sum[$1] += $2 } END { for (k in sum) printf "%s %d\\n", k, sum[k] }'], ['{ print "a|b;}" }'],
    ["# comment }\n{ print } # trailing | sh"], ['{ print $1 "\\t" $2 }'], ["{ print ($1 > 1) }"],
    ['BEGIN { print "mark" }'], ['{ print length }'], ["NR % 2 == 0"], ["{ print $NF; next }"],
]


@pytest.mark.parametrize("args", SED_ONE_LINERS, ids=lambda a: " ".join(a))
def test_sed_one_liners_stay_allowed(gnu_sed: str, args: list[str]) -> None:
    argv = ["sed", *args, "in.txt"]
    with Scratch() as s:
        v = verdict(argv, s.root)
        changed, proc = s.run(argv)
    assert v.action == "allow", v.reason
    assert proc is not None and proc.returncode == 0, proc
    assert not changed


@pytest.mark.parametrize("args", AWK_ONE_LINERS, ids=lambda a: " ".join(a))
@pytest.mark.parametrize("awk", ["gawk", "mawk"])
def test_awk_one_liners_stay_allowed(awks: dict[str, str], awk: str, args: list[str]) -> None:
    argv = [awk, *args, "in.txt"]
    with Scratch() as s:
        v = verdict(argv, s.root)
        changed, proc = s.run(argv)
    assert v.action == "allow", v.reason
    assert proc is not None and proc.returncode == 0, proc
    assert not changed


# --- what the reader cannot classify is asked, never allowed -----------------------------------------

UNCLEAR: list[list[str]] = [
    ["sed", "s/[/]/x/", "in.txt"],  # old seds end the regex inside the brackets
    ["sed", "s/\\c/x/", "in.txt"],  # newer seds read `\c` and the next character as one escape
    ["sed", "s/unterminated", "in.txt"],
    ["sed", "--bogus", "p", "in.txt"],
    ["sed", "--s", "p", "in.txt"],  # ambiguous abbreviation
    ["sed", "bL\rp", "in.txt"],  # a label with a carriage return: old seds end it there
    ["gawk", "{ gsub(/[/]/, \"x\") } 1", "in.txt"],
    ["gawk", "BEGIN { x = 0x1F }"],
    ["gawk", "BEGIN { awk::x = 1 }"],
    ["mawk", "BEGIN { x = 1 \f }"],
    ["gawk", "BEGIN { x = 1; x++ /2/ 1 }"],
    ["gawk", "--frobnicate", "{ print }", "in.txt"],
    ["gawk", "-i", "lib.awk", "{ print }", "in.txt"],  # a library from a file; the program is the operand
    ["mawk", "{ print }", "in.txt", "-f", "x"],
    ["gawk", "{ print \"unterminated }"],
]


@pytest.mark.parametrize("argv", UNCLEAR, ids=lambda a: " ".join(a).replace("\n", "\\n"))
def test_what_the_reader_cannot_classify_is_asked(argv: list[str]) -> None:
    with Scratch() as s:
        v = verdict(argv, s.root)
    assert (v.action, v.category) == ("ask", "code_execution_wrapper"), v.reason


def test_constructs_sed_versions_read_differently_are_denied_when_any_version_writes(gnu_sed: str) -> None:
    # GNU sed 4.3+ reads `[/]` as a bracket expression; older seds end the regex at its `/` and so read
    # the rest as flags. Both readings are judged: here the installed sed writes, so it is denied.
    for argv in (["sed", "s/[[:alpha:]/]/x/w out1", "in.txt"], ["sed", "bL\rw out1", "in.txt"]):
        with Scratch() as s:
            v = verdict(argv, s.root)
        assert (v.action, v.category) == ("deny", "code_execution_wrapper"), argv
    argv = ["sed", "s/[[:alpha:]/]/x/w out1", "in.txt"]
    with Scratch() as s:
        s.run(argv)
        assert (s.root / "out1").exists()  # control


def test_with_posixly_correct_the_first_operand_is_the_script(gnu_sed: str) -> None:
    argv = ["sed", "w out1", "-e", "p", "in.txt"]
    with Scratch() as s:
        v = verdict(argv, s.root)
        proc = subprocess.run(argv, cwd=s.root, env={"PATH": "/usr/bin:/bin", "POSIXLY_CORRECT": "1"},
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=5)
        assert (s.root / "out1").exists(), proc  # control: in POSIX order the operand is compiled
    assert (v.action, v.category) == ("deny", "code_execution_wrapper")


def test_gawk_sandbox_is_honoured_only_under_the_name_gawk(awks: dict[str, str]) -> None:
    prog = 'BEGIN { system("mark") }'
    with Scratch() as s:
        assert verdict(["gawk", "--sandbox", prog], s.root).action == "allow"
        changed, proc = s.run(["gawk", "--sandbox", prog])
        assert not changed and proc is not None and proc.returncode != 0
    with Scratch() as s:
        # mawk ignores `-W sandbox` and runs the program: the watchdog does not honour it there
        assert verdict(["mawk", "-W", "sandbox", prog], s.root).action == "deny"
        changed, _ = s.run(["mawk", "-W", "sandbox", prog])
        assert changed and (s.root / "MARKER").exists()
        assert verdict(["awk", "--sandbox", prog], s.root).action == "deny"


def test_gawk_options_that_write_files_are_refused(awks: dict[str, str]) -> None:
    for opt in (["-d"], ["--dump-variables"], ["-p"], ["--prof"], ["-o"], ["-W", "dump"]):
        argv = ["gawk", *opt, "BEGIN { x = 1 }"]
        with Scratch() as s:
            v = verdict(argv, s.root)
            changed, _ = s.run(argv)
        assert changed, opt  # control: gawk really wrote awkvars.out / awkprof.out
        assert (v.action, v.category) == ("deny", "code_execution_wrapper"), opt


def test_secret_files_read_by_sed_or_awk_ask() -> None:
    with Scratch() as s:
        assert verdict(["sed", "1r .env", "in.txt"], s.root).category == "secrets"
        assert verdict(["sed", "R ~/.ssh/id_rsa", "in.txt"], s.root).category == "secrets"
        assert verdict(["gawk", 'BEGIN { getline l < ".env"; print l }'], s.root).category == "secrets"
        assert verdict(["sed", "1r in.txt", "in.txt"], s.root).action == "allow"


def test_in_place_edits_still_ask(gnu_sed: str) -> None:
    argv = ["sed", "-i", "s/alpha/omega/", "in.txt"]
    with Scratch() as s:
        v = verdict(argv, s.root)
        changed, _ = s.run(argv)
    assert changed  # control: -i really rewrites the file
    assert (v.action, v.category) == ("ask", "code_execution_wrapper")
    with Scratch() as s:
        assert verdict(["sed", "--in-pl=.bak", "p", "in.txt"], s.root).action == "ask"
        assert verdict(["sed", "-ni", "p", "in.txt"], s.root).action == "ask"
