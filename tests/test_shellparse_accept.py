"""Accepted sources: exact argv and redirects of every simple command."""

from __future__ import annotations

import pickle
import shlex

import pytest

from agentcore.shell import ParsedShell, Redirect, ShellRefused, SimpleCommand, parse_shell


def argvs(source: str) -> list[tuple[str, ...]]:
    return [c.argv for c in parse_shell(source).commands]


def redirects(source: str) -> list[tuple[Redirect, ...]]:
    return [c.redirects for c in parse_shell(source).commands]


W = lambda op, target, fd=None: Redirect(op, fd, target, "write")  # noqa: E731
R = lambda op, target, fd=None: Redirect(op, fd, target, "read")  # noqa: E731
D = lambda op, fd=None: Redirect(op, fd, None, "dup")  # noqa: E731
H = lambda op, fd=None: Redirect(op, fd, None, "herestring")  # noqa: E731


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("ls", [("ls",)]),
        ("ls -la src", [("ls", "-la", "src")]),
        ("git commit -m 'fix: a thing' -m \"body line\"", [("git", "commit", "-m", "fix: a thing", "-m", "body line")]),
        ("echo \"it's\" 'a \"test\"'", [("echo", "it's", 'a "test"')]),
        ("rm -- -rf", [("rm", "--", "-rf")]),
        ("git checkout -- src/a.py", [("git", "checkout", "--", "src/a.py")]),
        ("find . -name '*.pyc' -exec rm {} \\;", [("find", ".", "-name", "*.pyc", "-exec", "rm", "{}", ";")]),
        ("xargs -I{} echo {}", [("xargs", "-I{}", "echo", "{}")]),
        ("rg -n 'def parse' src/ --glob '*.py'", [("rg", "-n", "def parse", "src/", "--glob", "*.py")]),
        ("pip install 'requests>=2'", [("pip", "install", "requests>=2")]),
        ("echo a#b", [("echo", "a#b")]),
        ("echo a # a comment", [("echo", "a")]),
        ("echo a;# comment after separator", [("echo", "a")]),
        ("echo é € 日本", [("echo", "é", "€", "日本")]),
        ("echo a~ x=y a]b ! %", [("echo", "a~", "x=y", "a]b", "!", "%")]),
        ("echo { } }", [("echo", "{", "}", "}")]),
        ("[ -f x ] && echo y", [("[", "-f", "x", "]"), ("echo", "y")]),
        ("test -f x", [("test", "-f", "x")]),
        # wrappers are ordinary commands; deciding about them is the caller's job
        ("sh -c 'rm -rf /'", [("sh", "-c", "rm -rf /")]),
        ("eval 'echo hi'", [("eval", "echo hi")]),
        ("env X=1 cmd", [("env", "X=1", "cmd")]),
        ("xargs rm < list", [("xargs", "rm")]),
        ("command ls", [("command", "ls")]),
        ("set -euo pipefail; make test", [("set", "-euo", "pipefail"), ("make", "test")]),
        ("set -e -o errexit +x; true", [("set", "-e", "-o", "errexit", "+x"), ("true",)]),
        ("cd build", [("cd", "build")]),
        ("mkdir -p build && cd build", [("mkdir", "-p", "build"), ("cd", "build")]),
    ],
)
def test_accepted_argv(source: str, expected: list[tuple[str, ...]]) -> None:
    assert argvs(source) == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # quote-split command names become the name bash runs
        ("to''uch x", [("touch", "x")]),
        ("to\\uch x", [("touch", "x")]),
        ('"to"uch x', [("touch", "x")]),
        ("t'o'u\"c\"h x", [("touch", "x")]),
        ("\\touch x", [("touch", "x")]),
        ("r''m -rf x", [("rm", "-rf", "x")]),
        # backslashes
        ("echo a\\ b", [("echo", "a b")]),
        ("echo \\$HOME \\`x\\` \\* \\? \\[ \\~ \\{a,b\\}", [("echo", "$HOME", "`x`", "*", "?", "[", "~", "{a,b}")]),
        ("echo \\\\", [("echo", "\\")]),
        # double quotes: only \$ \` \" \\ and \newline are escapes
        ('echo "\\$" "\\`" "\\"" "\\\\" "\\a" "\\n"', [("echo", "$", "`", '"', "\\", "\\a", "\\n")]),
        ('echo "a b" "" \'\'', [("echo", "a b", "", "")]),
        ('echo "*" "~" "{a,b}" "[x]"', [("echo", "*", "~", "{a,b}", "[x]")]),
        # single quotes keep everything, including backslash-newline and CR
        ("echo '$(rm -rf /)' '`id`' '${x:-y}'", [("echo", "$(rm -rf /)", "`id`", "${x:-y}")]),
        ("echo 'a\\\nb'", [("echo", "a\\\nb")]),
        ("echo 'multi\nline'", [("echo", "multi\nline")]),
        # line continuations, as in bash
        ("echo a \\\nb", [("echo", "a", "b")]),
        ("echo a\\\nb", [("echo", "ab")]),
        ("ec\\\nho hi", [("echo", "hi")]),
        ('echo "a\\\nb"', [("echo", "ab")]),
        ("echo a # comment \\\necho b", [("echo", "a"), ("echo", "b")]),
        ("echo a &&\\\n echo b", [("echo", "a"), ("echo", "b")]),
        # brace characters that are not brace expansion
        ('echo "{"a,b"}" \'{1..3}\' {}', [("echo", "{a,b}", "{1..3}", "{}")]),
    ],
)
def test_unquoting(source: str, expected: list[tuple[str, ...]]) -> None:
    assert argvs(source) == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("a; b", [("a",), ("b",)]),
        ("a && b || c", [("a",), ("b",), ("c",)]),
        ("a | b | c", [("a",), ("b",), ("c",)]),
        ("a\nb\n\nc\n", [("a",), ("b",), ("c",)]),
        ("a &&\n\nb", [("a",), ("b",)]),
        ("a |\n b", [("a",), ("b",)]),
        ("a; b;", [("a",), ("b",)]),
        ("! grep -q x f", [("grep", "-q", "x", "f")]),
        ("! ! true", [("true",)]),
        ("a && ! b", [("a",), ("b",)]),
        ("( a; b )", [("a",), ("b",)]),
        ("(a)", [("a",)]),
        ("{ a; b; }", [("a",), ("b",)]),
        ("{ a\n}", [("a",)]),
        ("( ( a ) ; { b ; } )", [("a",), ("b",)]),
        ("a && (b || c) | d", [("a",), ("b",), ("c",), ("d",)]),
        ("# leading comment\nls", [("ls",)]),
        ("git status && git diff --stat | head -n 20; ls -la src; cat README.md | wc -l",
         [("git", "status"), ("git", "diff", "--stat"), ("head", "-n", "20"), ("ls", "-la", "src"),
          ("cat", "README.md"), ("wc", "-l")]),
    ],
)
def test_structure_is_flattened_in_source_order(source: str, expected: list[tuple[str, ...]]) -> None:
    assert argvs(source) == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("echo hi >f", [W(">", "f")]),
        ("echo hi >> f", [W(">>", "f")]),
        ("cat <in", [R("<", "in")]),
        ("cmd &>out", [W("&>", "out")]),
        ("cmd &>>out", [W("&>>", "out")]),
        ("cmd 2>err", [W("2>", "err", 2)]),
        ("cmd 2>>err", [W("2>>", "err", 2)]),
        ("cmd >|f", [W(">|", "f")]),
        ("cmd 2>&1", [D("2>&1", 2)]),
        ("cmd >&2", [D(">&2")]),
        ("cmd 1>&-", [D("1>&-", 1)]),
        ("cmd 3<&0", [D("3<&0", 3)]),
        ("cmd >& 2", [D(">&2")]),
        ("cmd >/dev/null 2>&1", [W(">", "/dev/null"), D("2>&1", 2)]),
        ("cmd > 'my file.txt'", [W(">", "my file.txt")]),
        ("cmd <<<word", [H("<<<")]),
        ("cmd <<< 'a b $x'", [H("<<<")]),
        ("cmd 0<<<x", [H("0<<<", 0)]),
        ("cmd 10>f", [W("10>", "f", 10)]),
    ],
)
def test_redirects(source: str, expected: list[Redirect]) -> None:
    (cmd,) = parse_shell(source).commands
    assert list(cmd.redirects) == expected


def test_redirects_anywhere_in_the_command() -> None:
    (cmd,) = parse_shell(">f echo a 2>e b").commands
    assert cmd.argv == ("echo", "a", "b")
    assert cmd.redirects == (W(">", "f"), W("2>", "e", 2))


def test_digits_separated_from_the_operator_are_an_argument() -> None:
    (cmd,) = parse_shell("echo 2 >f").commands
    assert cmd.argv == ("echo", "2") and cmd.redirects == (W(">", "f"),)
    (cmd,) = parse_shell("echo a2>f").commands
    assert cmd.argv == ("echo", "a2") and cmd.redirects == (W(">", "f"),)
    (cmd,) = parse_shell("echo '2'>f").commands
    assert cmd.argv == ("echo", "2") and cmd.redirects == (W(">", "f"),)
    (cmd,) = parse_shell("echo 2\\\n>f").commands  # the continuation is removed first
    assert cmd.argv == ("echo",) and cmd.redirects == (W("2>", "f", 2),)


def test_redirect_only_command() -> None:
    (cmd,) = parse_shell(">empty.txt").commands
    assert cmd.argv == () and cmd.text == "" and cmd.redirects == (W(">", "empty.txt"),)


def test_group_redirects_apply_to_every_inner_command_first() -> None:
    assert redirects("( a; b 2>&1 ) >f") == [(W(">", "f"),), (W(">", "f"), D("2>&1", 2))]
    assert redirects("{ a; } <in") == [(R("<", "in"),)]


def test_pipe_ampersand_duplicates_stderr_before_own_redirects() -> None:
    assert redirects("a 2>/dev/null |& b") == [(D("2>&1", 2), W("2>", "/dev/null", 2)), ()]
    assert redirects("( a; b ) |& c") == [(D("2>&1", 2),), (D("2>&1", 2),), ()]


@pytest.mark.parametrize(
    "source",
    [
        "cat > notes.txt <<'EOF'\nSome $notes and $(cmd) and `x`\n  indented\nEOF",
        'cat > notes.txt <<"EOF"\nSome $notes\nEOF\n',
        "cat > notes.txt <<\\EOF\nSome $notes\nEOF",
        "cat > notes.txt <<-'EOF'\n\tSome $notes\n\tEOF",
    ],
)
def test_quoted_heredoc_body_is_literal(source: str) -> None:
    (cmd,) = parse_shell(source).commands
    assert cmd.argv == ("cat",)
    assert W(">", "notes.txt") in cmd.redirects
    assert any(r.mode == "herestring" and r.op in ("<<", "<<-") and r.target is None for r in cmd.redirects)


def test_heredoc_body_is_not_parsed_as_commands() -> None:
    src = "cat <<'EOF' | python3 -\nimport os; os.system('rm -rf /')\nEOF\necho done"
    assert argvs(src) == [("cat",), ("python3", "-"), ("echo", "done")]


@pytest.mark.parametrize(
    "source",
    [
        "cat <<'E'; echo same-line\nbody; rm -rf /\nE\necho after",
        "cat > notes.txt <<E'O'F\nSome $notes\nEOF",
        "cat <<'A' <<'B'\na\nA\nb\nB",
        "(cat <<'E')\nbody\nE",
        "a &\\\n& b",
        "echo x 3>&- <<<hs",
    ],
)
def test_valid_bash_that_tree_sitter_misparses_is_refused(source: str) -> None:
    # Known tree-sitter-bash gaps: the gate fails closed instead of trusting one parser.
    with pytest.raises(ShellRefused) as info:
        parse_shell(source)
    assert info.value.code == "syntax"


def test_heredoc_delimiter_on_last_line_without_newline() -> None:
    assert argvs("cat <<'E'\nx\nE") == [("cat",)]


def test_dev_null_is_an_ordinary_target() -> None:
    (cmd,) = parse_shell("cmd </dev/null >/dev/null 2>/dev/null").commands
    assert [r.target for r in cmd.redirects] == ["/dev/null"] * 3


def test_text_is_shlex_join_of_argv() -> None:
    (cmd,) = parse_shell("git commit -m 'a b' -- \"it's\"").commands
    assert cmd.text == shlex.join(cmd.argv) == "git commit -m 'a b' -- 'it'\"'\"'s'"
    assert shlex.split(cmd.text) == list(cmd.argv)


def test_result_types_are_frozen_and_hashable() -> None:
    parsed = parse_shell("echo hi >f")
    assert isinstance(parsed, ParsedShell)
    assert isinstance(parsed.commands[0], SimpleCommand)
    hash(parsed)
    with pytest.raises(AttributeError):
        parsed.commands[0].argv = ("rm",)  # type: ignore[misc]


def test_limits_are_inclusive() -> None:
    src = "; ".join(["true"] * 256)
    assert len(parse_shell(src).commands) == 256
    word = "a" * (64 * 1024 - len("echo "))
    assert parse_shell("echo " + word).commands[0].argv[1] == word


def test_refusal_pickles() -> None:
    with pytest.raises(ShellRefused) as info:
        parse_shell("echo $x")
    again = pickle.loads(pickle.dumps(info.value))
    assert (again.code, again.message) == (info.value.code, info.value.message)


def test_a_remembered_parse_is_shared_and_immutable_and_refusals_are_raised_every_time() -> None:
    import dataclasses

    from agentcore.shell.parse import PARSE_CACHE_MAX_CHARS

    first, again = parse_shell("git status && ls -la"), parse_shell("git status && ls -la")
    assert first is again  # remembered: the second call did not parse
    assert isinstance(first.commands, tuple) and all(isinstance(c.argv, tuple) for c in first.commands)
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.commands[0].argv = ("rm", "-rf", "/")  # type: ignore[misc]
    for _ in range(2):
        with pytest.raises(ShellRefused):
            parse_shell("echo $(")
    long = "echo " + "a" * PARSE_CACHE_MAX_CHARS
    assert parse_shell(long) is not parse_shell(long)  # too long to remember, parsed each time
    assert parse_shell(long).commands[0].argv == ("echo", "a" * PARSE_CACHE_MAX_CHARS)
