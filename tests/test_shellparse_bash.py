"""Cross-checks against a real bash (the ground truth), robustness and speed."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentcore.shell import ParsedShell, ShellRefused, parse_shell

BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="needs bash")

# A function that appends its argc and argv (NUL-separated) to a per-process
# file, so pipelines and subshells cannot interleave records.
PROBE = "p() { printf '%s\\0' \"$#\" \"$@\" >> \"$PD/$BASHPID\"; }\n"


def run_bash(source: str, cwd: Path) -> tuple[list[tuple[str, ...]], bytes]:
    """Run ``source`` (whose commands are ``p ...``) and return the argv bash gave p."""
    pd = cwd / "records"
    shutil.rmtree(pd, ignore_errors=True)
    pd.mkdir()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(cwd), "PD": str(pd), "LC_ALL": "C.UTF-8"}
    proc = subprocess.run(
        [BASH or "bash", "--norc", "--noprofile", "-c", PROBE + source],
        cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=20,
    )
    records: list[tuple[str, ...]] = []
    for f in sorted(pd.iterdir()):
        items = [i.decode("utf-8", "surrogateescape") for i in f.read_bytes().split(b"\0")[:-1]]
        while items:
            n = int(items[0])
            records.append(tuple(items[1 : 1 + n]))
            items = items[1 + n :]
    return records, proc.stderr


def probe_argvs(parsed: ParsedShell) -> list[tuple[str, ...]]:
    return [c.argv[1:] for c in parsed.commands if c.argv[:1] == ("p",)]


# ---------------------------------------------------------------- literal words

words = st.lists(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="".join(map(chr, [*range(0, 9), *range(11, 32), 127]))), max_size=12),
    min_size=1,
    max_size=6,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words)
def test_shlex_quoted_words_round_trip_through_bash(tmp_path: Path, ws: list[str]) -> None:
    source = "p " + " ".join(shlex.quote(w) for w in ws)
    parsed = parse_shell(source)  # shlex.quote output is always literal: it must be accepted
    assert [c.argv for c in parsed.commands] == [("p", *ws)]
    records, stderr = run_bash(source, tmp_path)
    assert records == [tuple(ws)], stderr


# Word-level cases whose exact meaning depends on bash's quoting rules.
QUOTING = [
    "p a\\ b 'c d' \"e f\"",
    'p "\\$" "\\`" "\\"" "\\\\" "\\a" "\\n" "\\\'"',
    "p \\$HOME \\`x\\` \\* \\? \\[ \\~ \\{a,b\\} \\# \\\\",
    "p to''uch to\\uch \"to\"uch t'o'u\"c\"h \\touch",
    "p 'a\\\nb' \"a\\\nb\" a\\\nb",
    "p a \\\n b",
    "p a#b '#' \"#\" x# # a comment",
    "p '' \"\" ''\"\" a''",
    "p a~ x=y a]b ! % ^ @ + : , .",
    "p { } {} -I{} \"{\"a,b\"}\" '{1..3}' x{}y",
    "p [ ]",
    "p é € 日本 'tab\there' 'nl\nhere'",
    "p --opt=value -- -rf",
    "p a ; p b && p c\n! p d || p e",
    "p a | p b |& p c",
    "( p a ; p b ) ; { p c ; }",
    "! p neg",
    "p a &&\\\n p b",
    "p a # comment \\\np b",
    "p x 2>/dev/null >&2",
    "p <<'EOF'\n$(rm -rf /) `id` $HOME\nEOF\np after",
    "p <<-\"EOF\"\n\tbody\n\tEOF",
    "p <<<'here string'",
    "p 2\\\n>/dev/null",
]


@pytest.mark.parametrize("source", QUOTING)
def test_quoting_matches_bash(tmp_path: Path, source: str) -> None:
    records, stderr = run_bash(source, tmp_path)
    assert not stderr, stderr
    assert Counter(probe_argvs(parse_shell(source))) == Counter(records)


# ---------------------------------------------------------------- hostile token soup

TOKENS = [
    *"ab1=:,.'\"\\ #!%-_/]{}~*?[$`", "\\\n", "''", '""', "{}", "..", "a=", "\t", "é", "\n", "\r", ";", "|", "&",
    "&&", "||", "(", ")", "{ ", " }", "! ", ">o", "<a", "2>o", ">&2", "2>&1", "<<<", "|&", "'\r'", '"$"',
    "\\$", "'*'", "\\*", "\\[", '"\\$"', '"\\x"', '"\\\\"', '"\\`"', '"\\\n"', "'\\\n'", "0", "9", "99",
    ">|o", ">>o", "&>o", "&>>o", " p ", "; p ", "&& p ", "| p ", "\np ", "=~", ":~", "$(", "${", "<(",
]
# Mostly literal tokens, so that many examples are accepted and reach bash.
GENTLE = [t for t in TOKENS if not any(ch in t for ch in "$`*?[~&(\r") or t in ("&&", "&& p ", ">&2", "2>&1")]
soup = st.lists(st.sampled_from(TOKENS), max_size=14).map(lambda ts: "p " + "".join(ts))
gentle_soup = st.lists(st.sampled_from(GENTLE), max_size=14).map(lambda ts: "p " + "".join(ts))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(soup, gentle_soup))
def test_accepted_soup_runs_exactly_what_was_parsed(tmp_path: Path, source: str) -> None:
    """Whenever the parser accepts, bash runs nothing it did not predict, and
    runs all of it when nothing visibly went wrong (no error output, no `||`)."""
    try:
        parsed = parse_shell(source)
    except ShellRefused:
        return
    for f in ("a", "ab", "b1"):  # something for a missed glob to match
        (tmp_path / f).write_text("")
    records, stderr = run_bash(source, tmp_path)
    assert b"syntax error" not in stderr
    mine = Counter(probe_argvs(parsed))
    theirs = Counter(records)
    assert not (theirs - mine), (theirs, mine)
    # Failures are only visible when stderr is not redirected away.
    stderr_kept = not any(r.fd == 2 or r.op.startswith("&") for c in parsed.commands for r in c.redirects)
    if stderr_kept and not stderr and "||" not in source and all(c.argv[:1] == ("p",) for c in parsed.commands):
        assert theirs == mine


# ---------------------------------------------------------------- robustness


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(), st.text(st.sampled_from(list("$`'\"\\(){}[]<>|&;!#~*?= \t\n\ra1-")))))
def test_never_raises_anything_but_shell_refused(source: str) -> None:
    try:
        parse_shell(source)
    except ShellRefused as exc:
        assert isinstance(exc.code, str) and exc.code and isinstance(exc.message, str)


@settings(max_examples=200, deadline=None)
@given(soup)
def test_soup_never_raises_anything_but_shell_refused(source: str) -> None:
    try:
        parse_shell(source)
    except ShellRefused:
        pass


# ---------------------------------------------------------------- why some builtins are refused


@pytest.mark.parametrize(
    "source",
    [
        "test -v 'a[$(touch pwned)]'",
        "printf -v 'a[$(touch pwned)]' %s x",
        "read 'a[$(touch pwned)]' <<< x",
        "let 'a[$(touch pwned)]=1'",
    ],
)
def test_refused_builtins_really_execute_code_in_bash(tmp_path: Path, source: str) -> None:
    subprocess.run([BASH or "bash", "-c", source], cwd=tmp_path, capture_output=True, timeout=20)
    assert (tmp_path / "pwned").exists()  # bash ran the hidden substitution ...
    with pytest.raises(ShellRefused):  # ... so the parser must not accept it
        parse_shell(source)


def test_carriage_return_is_not_a_separator_in_bash(tmp_path: Path) -> None:
    proc = subprocess.run([BASH or "bash", "-c", "true\rtouch x"], cwd=tmp_path, capture_output=True, timeout=20)
    assert proc.returncode == 127 and not (tmp_path / "x").exists()
    with pytest.raises(ShellRefused) as info:
        parse_shell("true\rtouch x")
    assert info.value.code == "control_char"


# ---------------------------------------------------------------- speed

TEN = (
    "git status && git diff --stat | head -n 20; ls -la src; cat README.md | wc -l; "
    "echo 'done' > /dev/null; rg -n foo src 2>&1; python3 -m pytest -q tests && echo ok"
)


def test_ten_command_line_parses_under_a_millisecond() -> None:
    assert len(parse_shell(TEN).commands) == 10
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(200):
            parse_shell(TEN)
        best = min(best, (time.perf_counter() - start) / 200)
    assert best < 1e-3, f"{best * 1e6:.0f} us per parse"
