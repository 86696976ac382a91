"""Refused sources: the exact refusal code, and messages that never echo arguments."""

from __future__ import annotations

import pytest

from agentcore.shell import ShellRefused, parse_shell
from agentcore.shell.parse import _ts_gate

SECRET = "sk-live-XXXX4242"

# (source, code).  Where a case contains the secret, the message must not show it.
CASES: list[tuple[str, str]] = [
    # parameter expansion
    ("echo $HOME", "expansion"),
    (f"curl -H $TOKEN {SECRET}", "expansion"),
    (f"echo ${{x:-$(rm -rf /)}} {SECRET}", "expansion"),
    ("echo ${x}", "expansion"),
    ("echo ${#x}", "expansion"),
    ("echo $1 $@ $* $? $$ $! $_", "expansion"),
    ("echo a$", "expansion"),
    (f'echo "{SECRET} $x"', "expansion"),
    ('echo "$"', "expansion"),
    ('echo "$\'x\'"', "expansion"),
    ("$cmd arg", "expansion"),
    ('"$cmd" arg', "expansion"),
    (f"cat > $out <<< {SECRET}", "expansion"),
    # IFS tricks
    ("cat${IFS}/etc/passwd", "expansion"),
    ("cat$IFS'/etc/passwd'", "expansion"),
    ("IFS=, cmd", "assignment"),
    # command substitution, also inside double quotes and via backquotes
    (f"echo $(cat {SECRET})", "substitution"),
    (f'echo "a $(id) {SECRET}"', "substitution"),
    ("echo `id`", "substitution"),
    ('echo "`id`"', "substitution"),
    ("$(which rm) -rf x", "substitution"),
    ("echo a$(id)b", "substitution"),
    ("echo $\\\n(id)", "substitution"),
    # process substitution
    ("diff <(ls a) <(ls b)", "process_substitution"),
    ("tee >(sh)", "process_substitution"),
    ("cat < <(id)", "process_substitution"),
    ("cat a<(id)", "process_substitution"),
    # arithmetic
    ("echo $((1+2))", "arithmetic"),
    ('echo "$((1+2))"', "arithmetic"),
    ("echo $[1+2]", "arithmetic"),
    ("((x++))", "arithmetic"),
    ("(( a[$(id)] ))", "arithmetic"),
    ("let 'a[$(id)]=1'", "arithmetic"),
    ("let x=1", "arithmetic"),
    ("test -v 'a[$(id)]'", "arithmetic"),
    ("[ -v 'a[$(touch x)]' ]", "arithmetic"),
    ("builtin test -v 'a[1]'", "arithmetic"),
    # ANSI-C and locale strings
    ("echo $'\\x41'", "ansi_c"),
    (f"$'\\x72\\x6d' -rf {SECRET}", "ansi_c"),
    ("echo $'a\\nb'", "ansi_c"),
    ('echo $"hello"', "locale"),
    # brace expansion
    ("echo {a,b}", "brace"),
    ("echo {1..3}", "brace"),
    ("touch a{b,c}d", "brace"),
    ("echo {a..c}", "brace"),
    ("echo x{,}", "brace"),
    ('echo {a,"b"}', "brace"),
    ("echo {a}", "brace"),
    ("echo {}{a,b}", "brace"),
    ("echo {},x", "brace"),
    ("{rm,-rf,/}", "brace"),
    # globs
    ("rm *", "glob"),
    ("rm -rf ./*", "glob"),
    ("ls file?.txt", "glob"),
    ("ls [ab]", "glob"),
    ("ls **/x", "glob"),
    (f"echo {SECRET}*", "glob"),
    ("curl https://e.com/a?b=c", "glob"),
    ("echo [[", "glob"),
    ("cat >*.txt", "glob"),
    # tilde expansion
    ("cat ~/.ssh/id_rsa", "tilde"),
    ("ls ~", "tilde"),
    ("ls ~root", "tilde"),
    ("make PREFIX=~/x", "tilde"),
    ("echo a=b:~", "tilde"),
    ("echo --prefix=~/x", "tilde"),  # bash keeps it literal; refusing is the safe side
    ("echo >~/x", "tilde"),
    ("echo \\\n~", "tilde"),
    # assignments and environment prefixes
    ("X=1", "assignment"),
    (f"TOKEN={SECRET} cmd", "assignment"),
    ("LD_PRELOAD=/tmp/x.so ls", "assignment"),
    ("PATH=/tmp:/bin ls", "assignment"),
    ("A=1 B=2 cmd", "assignment"),
    ("a[0]=1", "assignment"),
    ("a+=x cmd", "assignment"),
    (">f X=1 cmd", "assignment"),
    ("X\\\n=1 cmd", "assignment"),
    (f"export TOKEN={SECRET}", "assignment"),
    ("declare -x X=1", "assignment"),
    ("typeset X", "assignment"),
    ("local x", "assignment"),
    ("readonly X", "assignment"),
    ("unset PATH", "assignment"),
    ("read PATH", "assignment"),
    ("mapfile lines", "assignment"),
    ("readarray lines", "assignment"),
    ("getopts ab opt", "assignment"),
    ("printf -v PATH %s /tmp", "assignment"),
    ("printf -vPATH %s /tmp", "assignment"),
    ("wait -p pid", "assignment"),
    ("command export X=1", "assignment"),
    ("builtin declare X=1", "assignment"),
    ("command -p -- readonly X", "assignment"),
    # functions and compound commands
    ("f() { rm -rf /; }", "function"),
    ("f () { :; }", "function"),
    ("function f { :; }", "function"),
    ("if true; then ls; fi", "compound"),
    ("for f in a b; do rm $f; done", "compound"),
    ("for ((i=0;i<3;i++)); do :; done", "compound"),
    ("while true; do :; done", "compound"),
    ("until false; do :; done", "compound"),
    ("case x in x) ls;; esac", "compound"),
    ("select x in a; do :; done", "compound"),
    ("[[ -f x ]]", "compound"),
    ("ls; then", "compound"),
    ("'if' true", "compound"),
    ("coproc cat", "coproc"),
    ("time ls", "time"),
    ("a | ! b", "keyword"),
    ("}", "keyword"),
    # background
    ("sleep 100 &", "background"),
    (f"curl {SECRET} & rm x", "background"),
    ("a &\nb", "background"),
    ("(a) &", "background"),
    ("{ a; } &", "background"),
    ("a & b && c", "background"),
    # here-documents with unquoted delimiters expand their bodies
    ("cat <<EOF\n$(id)\nEOF", "heredoc"),
    ("cat <<EOF\nplain\nEOF", "heredoc"),
    ("cat <<-EOF\n\tplain\n\tEOF", "heredoc"),
    ("cat <<E\\\nOF\nx\nEOF", "heredoc"),  # the continuation is removed: the delimiter is unquoted
    # redirections that are not plain files
    ("echo >''", "redirect"),
    ("echo >&file", "redirect"),
    ("echo 2>&1-", "redirect"),
    ('echo >&"1"', "redirect"),
    ("echo {fd}>f", "redirect"),
    ("echo {}>f", "redirect"),
    ("echo 99999999999>f", "redirect"),
    ("echo >&99999999999", "redirect"),
    ("cat <>f", "redirect"),
    # control characters outside quotes (CR is not a separator for bash)
    ("echo a\r", "control_char"),
    ("echo a\r\necho b", "control_char"),
    ("true\rrm -rf /", "control_char"),
    ("echo 'a\rb'", "control_char"),  # inside quotes too: CR can disguise a command (SHELL-5)
    ("echo \"\x1b[2Ka\"", "control_char"),
    ("echo \x1b[31m", "control_char"),
    ("echo a\x0bb", "control_char"),
    ("echo a\x0cb", "control_char"),
    ("echo a\x7f", "control_char"),
    ("echo a\x00b", "control_char"),
    ("echo 'a\x00b'", "control_char"),
    ("echo \\\r", "control_char"),
    ("echo \\\tx", "control_char"),
    ("echo a # comment\r", "control_char"),
    # syntax
    ("a |", "syntax"),
    ("a &&", "syntax"),
    ("| a", "syntax"),
    (";", "syntax"),
    ("a ;; b", "syntax"),
    ("a ; ; b", "syntax"),
    ("a\n| b", "syntax"),
    ("(a", "syntax"),
    ("a)", "syntax"),
    ("()", "syntax"),
    ("{ a", "syntax"),
    ("{ a }", "syntax"),
    ("{ }", "syntax"),
    ("(a) b", "syntax"),
    ("echo 'unterminated", "syntax"),
    ('echo "unterminated', "syntax"),
    ("echo a\\", "syntax"),
    ("echo >", "syntax"),
    ("echo > ;", "syntax"),
    ("echo >#c", "syntax"),
    ("!", "syntax"),
    ("cat <<'EOF'\nno end", "syntax"),
    ("cat <<'EOF'", "syntax"),
    ("cat <<'EOF'\nbody\nEOF \n", "syntax"),
    ("echo a;; ", "syntax"),
    ("a ;& b", "syntax"),
    # empty
    ("", "empty"),
    ("   \t ", "empty"),
    ("\n\n", "empty"),
    ("# just a comment", "empty"),
    ("\\\n", "empty"),
    # size limits
    ("echo " + "a" * (64 * 1024), "too_long"),
    ("; ".join(["true"] * 257), "too_long"),
    ("true |" * 300 + " true", "too_long"),
    ("( " * 40 + "a" + " )" * 40, "too_long"),
    # a lone surrogate cannot be passed to bash at all
    ("echo \udc80", "encoding"),
]


@pytest.mark.parametrize(("source", "code"), CASES)
def test_refusal_code(source: str, code: str) -> None:
    with pytest.raises(ShellRefused) as info:
        parse_shell(source)
    assert info.value.code == code, info.value.message


@pytest.mark.parametrize(("source", "code"), [c for c in CASES if SECRET in c[0]])
def test_refusal_message_does_not_echo_arguments(source: str, code: str) -> None:
    with pytest.raises(ShellRefused) as info:
        parse_shell(source)
    exc = info.value
    for text in (str(exc), exc.message, repr(exc), repr(exc.args)):
        assert SECRET not in text
        assert "XXXX" not in text


@pytest.mark.parametrize(
    "template",
    [
        "echo $x {s}", "echo {s} $(id)", "echo {s} `id`", "{s}=1 cmd", "echo {s}*", "echo {s} &",
        "echo {s}{{a,b}}", "cat <<EOF\n{s}\nEOF", "echo {s}\r", "echo '{s}", "f{s}() {{ :; }}",
        "export X={s}", "echo >&{s}", "read {s}", "cd {s}; ls", "echo ~{s}",
    ],
)
def test_secret_never_in_any_refusal(template: str) -> None:
    with pytest.raises(ShellRefused) as info:
        parse_shell(template.format(s=SECRET))
    assert SECRET not in str(info.value)


# cd/pushd/popd: later commands or redirections could not be resolved against the workspace
@pytest.mark.parametrize(
    "source",
    [
        "cd x && ls",
        "cd x; rm -rf build",
        "cd /tmp\nrm -rf x",
        "pushd x; ls",
        "popd; ls",
        "cd x | ls",
        "(cd x); ls",
        "{ cd x; } >f",
        "cd x; >f",
        "builtin cd x; ls",
        "command cd x; ls",
        "cd x && echo hi > out.txt",
    ],
)
def test_cwd_change_refuses_what_follows(source: str) -> None:
    with pytest.raises(ShellRefused) as info:
        parse_shell(source)
    assert info.value.code == "cwd_change"


@pytest.mark.parametrize("source", ["cd x", "cd x 2>/dev/null", "ls; cd x", "(cd x)", "pushd x >/dev/null"])
def test_cwd_change_alone_or_last_is_fine(source: str) -> None:
    assert parse_shell(source).commands[-1].argv[0] in ("cd", "pushd")


# builtins after which later argv no longer mean what they say
@pytest.mark.parametrize(
    "source",
    [
        "hash -p /bin/rm ls; ls -la",
        "alias ls='rm -rf'; ls",
        "unalias ls; ls",
        "enable -n echo; echo x",
        "shopt -s expand_aliases; ls",
        "source env.sh; ls",
        ". env.sh; ls",
        "eval 'cd /'; rm -rf x",
        "trap 'rm -rf x' DEBUG; ls",
        "set -k; ls LD_PRELOAD=x",
        "set -o posix; ls",
        "set foo; ls",
        "builtin hash -p /bin/rm ls; ls",
    ],
)
def test_shell_state_change_refuses_what_follows(source: str) -> None:
    with pytest.raises(ShellRefused) as info:
        parse_shell(source)
    assert info.value.code == "shell_state"


@pytest.mark.parametrize(
    "source",
    ["set -e; ls", "set -euo pipefail; ls", "set +x -o nounset; ls", "set -- a b; ls", "eval 'ls'", "hash -r"],
)
def test_harmless_state_builtins_are_accepted(source: str) -> None:
    parse_shell(source)


def test_tree_sitter_gate_refuses_on_its_own() -> None:
    """The gate is independent of the strict parser: it refuses constructs and
    disagreements about the number of simple commands by itself."""
    with pytest.raises(ShellRefused) as info:
        _ts_gate(b"a; b", 1)
    assert info.value.code == "syntax"
    for src, code in [
        (b"echo $x", "expansion"),
        (b"echo $(id)", "substitution"),
        (b"cat <(id)", "process_substitution"),
        (b"X=1 cmd", "assignment"),
        (b"export X", "assignment"),
        (b"f() { :; }", "function"),
        (b"if a; then b; fi", "compound"),
        (b"[[ a ]]", "compound"),
        (b"((x))", "arithmetic"),
        (b"a &", "background"),
        (b"cat <<E\nx\nE", "heredoc"),
        (b"echo $'x'", "ansi_c"),
        (b"echo {1..2}", "brace"),
        (b"echo 'x", "syntax"),
    ]:
        with pytest.raises(ShellRefused) as info:
            _ts_gate(src, 1)
        assert info.value.code == code, src
    _ts_gate(b"[ -f x ] && echo y", 2)
    _ts_gate(b">f", 1)
