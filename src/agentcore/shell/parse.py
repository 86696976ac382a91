"""Strict bash parser for the capability check of the ``bash`` tool.

The question answered here is narrow: *which programs, with which argv and which
redirections, would bash run for this source?*  Anything whose answer depends on
run-time state (variables, globbing, substitutions, functions, control flow) is
refused, so the caller only ever sees argv that bash would run verbatim.

Two independent parsers must agree before a source is accepted:

1. A small hand-written lexer/parser for the accepted subset (literal words,
   quoting, pipelines, lists, groups, redirections, quoted here-docs).  It is the
   authority for argv and redirects because tree-sitter-bash is imprecise about
   word boundaries (``'a'"b"\\c`` or ``a\\<newline>b`` are split wrongly).
2. tree-sitter-bash, used as a gate: any ERROR/MISSING node, any node type for a
   refused construct, or a different number of simple commands refuses.

Refusal messages carry a stable code and an offset, never argument text.
"""

from __future__ import annotations

import functools
import re
import shlex
from dataclasses import dataclass
from typing import Literal

from tree_sitter import Language, Node, Parser

MAX_SOURCE_BYTES = 64 * 1024
MAX_COMMANDS = 256
MAX_DEPTH = 32
_MAX_FD = 2**31 - 1

RedirectMode = Literal["read", "write", "dup", "herestring"]


@dataclass(frozen=True)
class Redirect:
    """One redirection.

    ``op`` is the operator as written, including an explicit fd and, for
    duplication, the source fd: ``">"``, ``"2>>"``, ``"&>"``, ``"2>&1"``,
    ``">&-"``, ``"<<<"``, ``"<<"`` (quoted here-doc).
    """

    op: str
    fd: int | None
    target: str | None
    mode: RedirectMode


@dataclass(frozen=True)
class SimpleCommand:
    """One program bash would run: its literal argv, its redirections, and `text`, the argv quoted back into one line."""

    argv: tuple[str, ...]
    redirects: tuple[Redirect, ...]
    text: str


@dataclass(frozen=True)
class ParsedShell:
    """A source proven to be literal simple commands: every one of them in order, and the source as written."""

    commands: tuple[SimpleCommand, ...]
    source: str = ""  # the command line as written


class ShellRefused(Exception):
    """The source is not provably a list of literal simple commands."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message)  # both in args, so the exception pickles
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


# --------------------------------------------------------------------------
# lexer

_META = frozenset(" \t\n;&|()<>")
# A run of characters that need no special handling inside an unquoted word.
_PLAIN_RUN = re.compile(r"[^\x00-\x20\x7f;&|()<>\\'\"$`]+")
_DQ_RUN = re.compile(r'[^"\\$`]+')
_DIGITS = re.compile(r"[0-9]+")  # ASCII only: str.isdigit() accepts '²'
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # everything but tab
_QUOTED = "\x00"  # placeholder in the unquoted-shadow string (NUL is refused earlier)


@dataclass
class _Word:
    """A lexed word: as written (`raw`), unquoted (`value`), and where it starts."""

    raw: str
    value: str
    shadow: str  # value with every quoted character replaced by _QUOTED
    quoted: bool  # any quoting at all, even an empty '' (matters for here-doc delimiters)
    start: int


@dataclass
class _Op:
    """A lexed control operator (`;`, `|`, `&&`, a parenthesis, ...), a newline, or the end of input."""

    op: str  # "" = end of input, "\n" = newline
    start: int


@dataclass
class _Redir:
    """A lexed redirection operator and the fd written before it, if any; its target is the next word."""

    fd: str | None
    op: str
    start: int


_Token = _Word | _Op | _Redir


def _refuse(code: str, what: str, pos: int | None = None) -> ShellRefused:
    where = f" (at offset {pos})" if pos is not None else ""
    return ShellRefused(code, what + where)


def _dollar_code(nxt: str, nxt2: str) -> tuple[str, str]:
    if nxt == "(":
        if nxt2 == "(":
            return "arithmetic", "arithmetic expansion is not allowed"
        return "substitution", "command substitution is not allowed"
    if nxt == "[":
        return "arithmetic", "arithmetic expansion is not allowed"
    if nxt == "'":
        return "ansi_c", "ANSI-C quoting ($'...') is not allowed"
    if nxt == '"':
        return "locale", "locale quoting ($\"...\") is not allowed"
    return "expansion", "parameter expansion ($) is not allowed"


class _Lexer:
    def __init__(self, src: str) -> None:
        self.s = src
        self.n = len(src)
        self.i = 0
        self.has_cont = "\\\n" in src
        self.pending: list[tuple[str, bool]] = []  # here-docs waiting for the next newline

    # Bash drops backslash-newline before tokenising, except inside single
    # quotes, comments and here-doc bodies; those readers index self.s directly.
    def peek(self, k: int = 0) -> str:
        s, i = self.s, self.i
        if not self.has_cont:
            i += k
            return s[i] if i < self.n else ""
        while s.startswith("\\\n", i):
            i += 2
        self.i = i
        for _ in range(k):
            i += 1
            while s.startswith("\\\n", i):
                i += 2
        return s[i] if i < self.n else ""

    def take(self) -> str:
        c = self.peek()
        self.i += 1
        return c

    def next_token(self) -> _Token:
        while True:
            c = self.peek()
            if c == " " or c == "\t":
                self.i += 1
                continue
            if c == "":
                if self.pending:
                    raise _refuse("syntax", "unterminated here-document", self.i)
                return _Op("", self.i)
            if c == "#":
                self._skip_comment()
                continue
            if c == "\n":
                start = self.i
                self.i += 1
                if self.pending:
                    self._read_heredocs()
                return _Op("\n", start)
            if c in ";&|()<>":
                return self._operator()
            return self._word()

    def _skip_comment(self) -> None:
        end = self.s.find("\n", self.i)
        end = self.n if end < 0 else end
        m = _CONTROL.search(self.s, self.i, end)
        if m:
            raise _refuse("control_char", "control character in a comment", m.start())
        self.i = end

    def _read_heredocs(self) -> None:
        s = self.s
        for delim, strip_tabs in self.pending:
            while True:
                if self.i >= self.n:
                    raise _refuse("syntax", "unterminated here-document", self.i)
                j = s.find("\n", self.i)
                end = self.n if j < 0 else j
                line = s[self.i : end]
                self.i = end + 1 if j >= 0 else self.n
                if (line.lstrip("\t") if strip_tabs else line) == delim:
                    break
        self.pending = []

    def _operator(self) -> _Token:
        start = self.i
        c = self.take()
        nxt = self.peek()
        op = c
        if c == ";":
            if nxt == ";":
                op = ";;&" if self.peek(1) == "&" else ";;"
            elif nxt == "&":
                op = ";&"
        elif c == "&":
            if nxt == "&":
                op = "&&"
            elif nxt == ">":
                op = "&>>" if self.peek(1) == ">" else "&>"
        elif c == "|":
            if nxt in ("|", "&"):
                op = c + nxt
        elif c == "(":
            if nxt == "(":
                op = "(("
        elif c == "<":
            if nxt == "<":
                n2 = self.peek(1)
                op = "<<<" if n2 == "<" else "<<-" if n2 == "-" else "<<"
            elif nxt in ("&", ">"):
                op = c + nxt
            elif nxt == "(":
                raise _refuse("process_substitution", "process substitution is not allowed", start)
        elif c == ">":
            if nxt in (">", "&", "|"):
                op = c + nxt
            elif nxt == "(":
                raise _refuse("process_substitution", "process substitution is not allowed", start)
        for _ in range(len(op) - 1):
            self.take()
        if op[0] in "<>" or op in ("&>", "&>>"):
            return _Redir(None, op, start)
        return _Op(op, start)

    def _word(self) -> _Token:
        start = self.i
        s = self.s
        value: list[str] = []
        shadow: list[str] = []
        quoted = False
        while True:
            c = self.peek()
            if c == "" or c in _META:
                break
            m = _PLAIN_RUN.match(s, self.i)
            if m:
                run = m.group()
                value.append(run)
                shadow.append(run)
                self.i = m.end()
                continue
            pos = self.i
            quoted = True
            if c == "\\":
                self.i += 1  # the escaped character is read raw: "\\" + newline is not a continuation here
                if self.i >= self.n:
                    raise _refuse("syntax", "trailing backslash", pos)
                e = s[self.i]
                if _CONTROL.match(e) or e == "\t":
                    raise _refuse("control_char", "escaped control character", pos)
                self.i += 1
                value.append(e)
                shadow.append(_QUOTED)
            elif c == "'":
                end = s.find("'", pos + 1)
                if end < 0:
                    raise _refuse("syntax", "unterminated single quote", pos)
                body = s[pos + 1 : end]
                value.append(body)
                shadow.append(_QUOTED * len(body))
                self.i = end + 1
            elif c == '"':
                self.i += 1
                self._double_quoted(value, shadow, pos)
            elif c == "$":
                code, msg = _dollar_code(self.peek(1), self.peek(2))
                raise _refuse(code, msg, pos)
            elif c == "`":
                raise _refuse("substitution", "command substitution (backquote) is not allowed", pos)
            else:  # any other control character outside quotes, CR included
                raise _refuse("control_char", "control character outside quotes", pos)
        raw = s[start : self.i]
        word = _Word(raw, "".join(value), "".join(shadow), quoted, start)
        nxt = self.peek()
        if nxt in ("<", ">"):
            if not quoted and _DIGITS.fullmatch(word.value):
                op = self._operator()
                assert isinstance(op, _Redir)
                return _Redir(word.value, op.op, start)
            if word.value.startswith("{") and word.value.endswith("}"):
                raise _refuse("redirect", "named file-descriptor redirection is not allowed", start)
        return word

    def _double_quoted(self, value: list[str], shadow: list[str], open_pos: int) -> None:
        s = self.s
        while True:
            c = self.peek()
            if c == "":
                raise _refuse("syntax", "unterminated double quote", open_pos)
            m = _DQ_RUN.match(s, self.i)
            if m:
                run = m.group()
                value.append(run)
                shadow.append(_QUOTED * len(run))
                self.i = m.end()
                continue
            pos = self.i
            if c == '"':
                self.i += 1
                return
            if c == "\\":
                e = s[pos + 1] if pos + 1 < self.n else ""
                if e in ("$", "`", '"', "\\"):
                    value.append(e)
                    shadow.append(_QUOTED)
                    self.i += 2
                else:  # the backslash stays (peek() already removed "\\\n")
                    value.append("\\")
                    shadow.append(_QUOTED)
                    self.i += 1
            elif c == "$":
                nxt = self.peek(1)
                # "$'" and '$"' are plain expansions here, not ANSI-C/locale quoting
                code, msg = _dollar_code(nxt, self.peek(2)) if nxt not in ("'", '"') else _dollar_code("", "")
                raise _refuse(code, msg + " (inside double quotes)", pos)
            else:  # backquote
                raise _refuse("substitution", "command substitution (backquote) is not allowed", pos)


def _check_word(w: _Word) -> None:
    """Refuse words bash would still expand after quote removal."""
    sh = w.shadow
    if sh in ("{", "}"):
        return  # a lone brace is a literal word (or a group keyword, decided by the parser)
    if "*" in sh or "?" in sh or ("[" in sh and sh != "["):
        raise _refuse("glob", "unquoted glob character", w.start)
    if "~" in sh:
        v = w.value
        for k, ch in enumerate(sh):
            # bash expands a leading ~ and, in assignment-like words, ~ after = or :
            if ch == "~" and (k == 0 or v[k - 1] in "=:"):
                raise _refuse("tilde", "unquoted tilde expansion", w.start)
    if "{" in sh:
        # Only the literal pair "{}" (find -exec, xargs -I) is let through, and
        # only when nothing else in the word could form a brace expression.
        k = sh.find("{")
        while k >= 0:
            if sh[k + 1 : k + 2] != "}":
                raise _refuse("brace", "brace expansion is not allowed", w.start)
            k = sh.find("{", k + 2)
        if "," in sh or ".." in sh:
            raise _refuse("brace", "brace expansion is not allowed", w.start)


# --------------------------------------------------------------------------
# parser for the accepted subset

_COMPOUND_WORDS = frozenset(
    {"if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done",
     "case", "esac", "select", "in", "[[", "]]"}
)
_RESERVED = _COMPOUND_WORDS | {"function", "time", "coproc", "{", "}", "!"}
_ASSIGNING = frozenset(
    {"export", "declare", "typeset", "local", "readonly", "unset", "read",
     "mapfile", "readarray", "getopts"}
)
_CWD_CHANGING = frozenset({"cd", "pushd", "popd"})
# Builtins after which later argv no longer mean what they say (aliases, hashed
# paths, loaded builtins, shell options, arbitrary sourced code).
_STATE_CHANGING = frozenset({"alias", "unalias", "hash", "enable", "shopt", "source", ".", "eval", "trap"})
_SAFE_SET_LETTERS = frozenset("euxvfCEn")
_SAFE_SET_OPTIONS = frozenset(
    {"errexit", "nounset", "pipefail", "xtrace", "verbose", "noglob", "noclobber", "errtrace", "noexec"}
)


@dataclass
class _Cmd:
    """A simple command as the parser builds it (a group's redirections are prepended to its commands later)."""

    argv: list[str]
    redirects: list[Redirect]


def _effective_argv(argv: list[str]) -> list[str]:
    """Strip ``builtin``/``command`` wrappers, which still run shell builtins."""
    i = 0
    while i < len(argv) and argv[i] in ("builtin", "command"):
        i += 1
        while i < len(argv) and argv[i].startswith("-") and argv[i] != "-":
            i += 1
            if argv[i - 1] == "--":
                break
    return argv[i:]


def _set_is_safe(args: list[str]) -> bool:
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if a in ("--", "-"):
            return True  # the rest only sets positional parameters
        if len(a) < 2 or a[0] not in "-+":
            return False
        for ch in a[1:]:
            if ch == "o":
                if i < len(args):
                    if args[i] not in _SAFE_SET_OPTIONS:
                        return False
                    i += 1
            elif ch not in _SAFE_SET_LETTERS:
                return False
    return True


class _Parser:
    def __init__(self, src: str) -> None:
        self.lx = _Lexer(src)
        self.cmds: list[_Cmd] = []
        self.depth = 0
        self.state: tuple[str, str] | None = None  # pending (code, message) after cd/alias/...
        self.tok: _Token = self.lx.next_token()

    def advance(self) -> None:
        self.tok = self.lx.next_token()

    def is_op(self, *ops: str) -> bool:
        return isinstance(self.tok, _Op) and self.tok.op in ops

    def is_bare(self, text: str) -> bool:
        t = self.tok
        return isinstance(t, _Word) and not t.quoted and t.value == text

    def skip_newlines(self) -> None:
        while self.is_op("\n"):
            self.advance()

    def unexpected(self) -> ShellRefused:
        t = self.tok
        if isinstance(t, _Op) and t.op == "&":
            return _refuse("background", "background execution (&) is not allowed", t.start)
        if isinstance(t, _Op) and t.op == "((":
            return _refuse("arithmetic", "arithmetic command is not allowed", t.start)
        if isinstance(t, _Op) and t.op in (";;", ";&", ";;&"):
            return _refuse("syntax", "case terminator outside case", t.start)
        if isinstance(t, _Op) and t.op == "":
            return _refuse("syntax", "unexpected end of input", t.start)
        return _refuse("syntax", "unexpected token", t.start)

    # list := and_or ((';' | '\n') and_or)* -- closed by EOF, ')' or a bare '}'
    def parse_list(self, closer: str) -> None:
        self.skip_newlines()
        seen = False
        while not self.at_closer(closer):
            self.parse_and_or()
            seen = True
            if self.is_op(";", "\n"):
                self.advance()
                self.skip_newlines()
            elif not self.at_closer(closer):
                raise self.unexpected()
        if not seen:
            if closer == "":
                raise _refuse("empty", "no command in source")
            raise _refuse("syntax", "empty command group", self.tok.start)

    def at_closer(self, closer: str) -> bool:
        if closer == "}":
            return self.is_bare("}")
        return self.is_op(closer)

    def parse_and_or(self) -> None:
        self.parse_pipeline()
        while self.is_op("&&", "||"):
            self.advance()
            self.skip_newlines()
            self.parse_pipeline()

    def parse_pipeline(self) -> None:
        while self.is_bare("!"):
            self.advance()
        while True:
            first = len(self.cmds)
            self.parse_command()
            if not self.is_op("|", "|&"):
                return
            if self.is_op("|&"):
                # "a |& b" is "a 2>&1 | b": the dup happens before a's own redirections
                dup = Redirect("2>&1", 2, None, "dup")
                for c in self.cmds[first:]:
                    c.redirects.insert(0, dup)
            self.advance()
            self.skip_newlines()

    def parse_command(self) -> None:
        t = self.tok
        if isinstance(t, _Op) and t.op == "(":
            self.group(")")
            return
        if isinstance(t, _Word) and not t.quoted and t.value in _RESERVED:
            if t.value == "{":
                self.group("}")
                return
            raise _keyword_refusal(t.value, t.start)
        if isinstance(t, (_Word, _Redir)):
            self.parse_simple()
            return
        raise self.unexpected()

    def group(self, closer: str) -> None:
        start = self.tok.start
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _refuse("too_long", "command groups nested too deeply", start)
        self.advance()
        first = len(self.cmds)
        self.parse_list(closer)
        self.advance()  # the closer
        self.depth -= 1
        outer: list[Redirect] = []
        while isinstance(self.tok, _Redir):
            outer.append(self.parse_redirect())
        if outer:
            # bash applies the group's redirections before the inner ones
            for c in self.cmds[first:]:
                c.redirects[:0] = outer

    def parse_simple(self) -> None:
        start = self.tok.start
        cmd = _Cmd([], [])
        while True:
            t = self.tok
            if isinstance(t, _Word):
                if not cmd.argv:
                    _check_command_name(t)
                _check_word(t)
                cmd.argv.append(t.value)
                self.advance()
            elif isinstance(t, _Redir):
                cmd.redirects.append(self.parse_redirect())
            elif isinstance(t, _Op) and t.op in ("(", "(("):
                if len(cmd.argv) == 1:
                    raise _refuse("function", "function definitions are not allowed", t.start)
                raise _refuse("syntax", "unexpected parenthesis", t.start)
            else:
                break
        if self.state is not None:
            raise _refuse(*self.state, start)
        if len(self.cmds) >= MAX_COMMANDS:
            raise _refuse("too_long", f"more than {MAX_COMMANDS} simple commands")
        self.cmds.append(cmd)
        self.after_command(cmd.argv)

    def after_command(self, argv: list[str]) -> None:
        eff = _effective_argv(argv)
        if not eff:
            return
        name, args = eff[0], eff[1:]
        if name in _ASSIGNING:
            raise _refuse("assignment", "builtins that assign shell variables are not allowed")
        if name == "printf" and args and args[0].startswith("-v"):
            raise _refuse("assignment", "printf -v assigns a shell variable")
        if name == "wait" and any(a.startswith("-") and "p" in a for a in args):
            raise _refuse("assignment", "wait -p assigns a shell variable")
        if name == "let":
            raise _refuse("arithmetic", "let evaluates arithmetic")
        if name in ("test", "[") and "-v" in args and any("[" in a for a in args):
            raise _refuse("arithmetic", "test -v evaluates array subscripts")
        if name in _CWD_CHANGING:
            self.state = ("cwd_change", "commands or redirections after a directory change")
        elif name in _STATE_CHANGING or (name == "set" and not _set_is_safe(args)):
            self.state = ("shell_state", "commands or redirections after a shell-state change")

    def parse_redirect(self) -> Redirect:
        r = self.tok
        assert isinstance(r, _Redir)
        if self.state is not None:
            raise _refuse(*self.state, r.start)
        self.advance()
        w = self.tok
        if not isinstance(w, _Word):
            raise _refuse("syntax", "redirection without a target", r.start)
        _check_word(w)
        fd: int | None = None
        prefix = r.fd or ""
        if r.fd is not None:
            fd = _fd_number(r.fd)
            if fd is None:
                raise _refuse("redirect", "file descriptor out of range", r.start)
        op = r.op
        red: Redirect
        if op == "<>":  # tree-sitter-bash cannot parse it, so it could never pass the gate
            raise _refuse("redirect", "read-write redirection (<>) is not supported", r.start)
        if op in ("<<", "<<-"):
            if not w.quoted:
                raise _refuse("heredoc", "here-document with an unquoted delimiter expands its body", r.start)
            self.lx.pending.append((w.value, op == "<<-"))
            red = Redirect(prefix + op, fd, None, "herestring")
        elif op == "<<<":
            red = Redirect(prefix + op, fd, None, "herestring")
        elif op in (">&", "<&"):
            v = w.value
            if not w.quoted and (v == "-" or _fd_number(v) is not None):
                red = Redirect(prefix + op + v, fd, None, "dup")
            else:
                raise _refuse("redirect", "fd duplication needs a literal fd number or '-'", r.start)
        else:
            if w.value == "":
                raise _refuse("redirect", "empty redirection target", r.start)
            red = Redirect(prefix + op, fd, w.value, "read" if op == "<" else "write")
        self.advance()
        return red


def _fd_number(digits: str) -> int | None:
    # the length test comes first: int() of thousands of digits is slow or refused
    if not _DIGITS.fullmatch(digits) or len(digits) > 10:
        return None
    n = int(digits)
    return n if n <= _MAX_FD else None


def _keyword_refusal(word: str, pos: int) -> ShellRefused:
    if word == "function":
        return _refuse("function", "function definitions are not allowed", pos)
    if word in ("time", "coproc"):
        return _refuse(word, f"the '{word}' keyword is not allowed", pos)
    if word in _COMPOUND_WORDS:
        return _refuse("compound", "compound commands are not allowed", pos)
    return _refuse("keyword", "misplaced reserved word", pos)


_ASSIGNMENT_SHAPE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[|\+?=)")


def _check_command_name(t: _Word) -> None:
    if t.value in _RESERVED:
        raise _keyword_refusal(t.value, t.start)
    if "=" in t.value or _ASSIGNMENT_SHAPE.match(t.raw):
        # NAME=value before the command (env prefix or plain assignment)
        raise _refuse("assignment", "variable assignments are not allowed", t.start)


# --------------------------------------------------------------------------
# tree-sitter gate

_TS_PARSER: Parser | None = None

_TS_REFUSED = {
    "command_substitution": ("substitution", "command substitution is not allowed"),
    "process_substitution": ("process_substitution", "process substitution is not allowed"),
    "expansion": ("expansion", "parameter expansion is not allowed"),
    "simple_expansion": ("expansion", "parameter expansion is not allowed"),
    "arithmetic_expansion": ("arithmetic", "arithmetic expansion is not allowed"),
    "ansi_c_string": ("ansi_c", "ANSI-C quoting is not allowed"),
    "translated_string": ("locale", "locale quoting is not allowed"),
    "brace_expression": ("brace", "brace expansion is not allowed"),
    "extglob_pattern": ("glob", "extended glob is not allowed"),
    "variable_assignment": ("assignment", "variable assignments are not allowed"),
    "variable_assignments": ("assignment", "variable assignments are not allowed"),
    "declaration_command": ("assignment", "declaration builtins are not allowed"),
    "unset_command": ("assignment", "unset is not allowed"),
    "function_definition": ("function", "function definitions are not allowed"),
    "if_statement": ("compound", "compound commands are not allowed"),
    "for_statement": ("compound", "compound commands are not allowed"),
    "c_style_for_statement": ("compound", "compound commands are not allowed"),
    "while_statement": ("compound", "compound commands are not allowed"),
    "case_statement": ("compound", "compound commands are not allowed"),
}


def _ts_parser() -> Parser:
    global _TS_PARSER
    if _TS_PARSER is None:
        import tree_sitter_bash

        _TS_PARSER = Parser(Language(tree_sitter_bash.language()))
    return _TS_PARSER


def _ts_gate(data: bytes, expected: int) -> None:
    """Refuse unless tree-sitter sees no error, no refused construct and the
    same number of simple commands as the strict parser."""
    root = _ts_parser().parse(data).root_node
    if root.has_error:
        raise _refuse("syntax", "tree-sitter reports a syntax error")
    count = 0
    stack: list[Node] = [root]
    while stack:
        node = stack.pop()
        kind = node.type
        if node.is_missing or node.is_error:
            raise _refuse("syntax", "tree-sitter reports a syntax error", node.start_byte)
        hit = _TS_REFUSED.get(kind)
        if hit is not None:
            raise _refuse(hit[0], hit[1], node.start_byte)
        if kind == "command":
            count += 1
        elif kind == "redirected_statement":
            if node.child_by_field_name("body") is None:
                count += 1
        elif kind == "test_command":
            first = node.child(0)
            if first is None or first.type != "[":
                raise _refuse("compound", "compound commands are not allowed", node.start_byte)
            count += 1  # "[ ... ]" is the ordinary test builtin
        elif kind == "compound_statement":
            first = node.child(0)
            if first is not None and first.type == "((":
                raise _refuse("arithmetic", "arithmetic command is not allowed", node.start_byte)
        elif kind == "&":
            raise _refuse("background", "background execution (&) is not allowed", node.start_byte)
        elif kind == "heredoc_start":
            if not any(q in node.text for q in (b"'", b'"', b"\\")):  # type: ignore[operator]
                raise _refuse("heredoc", "here-document with an unquoted delimiter", node.start_byte)
        stack.extend(node.children)
    if count != expected:
        raise _refuse("syntax", "ambiguous command structure")


# --------------------------------------------------------------------------
# entry point


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


# Sources up to this length have their parse remembered: agents repeat commands (`git status`, the
# test command), and a parse costs 0.05-0.1 ms a call. The result is immutable (frozen dataclasses
# of tuples), so every caller can share it; a refusal is never remembered (it is raised again).
PARSE_CACHE_MAX_CHARS = 4096


def parse_shell(source: str) -> ParsedShell:
    """Parse ``source`` into its simple commands or raise :class:`ShellRefused`."""
    if not isinstance(source, str):
        raise ShellRefused("syntax", "source must be text")
    if len(source) <= PARSE_CACHE_MAX_CHARS:
        return _parse_remembered(source)
    return _parse(source)


@functools.lru_cache(maxsize=256)
def _parse_remembered(source: str) -> ParsedShell:
    return _parse(source)


def _parse(source: str) -> ParsedShell:
    try:
        data = source.encode("utf-8")
    except UnicodeEncodeError:
        raise ShellRefused("encoding", "source is not valid Unicode text") from None
    if len(data) > MAX_SOURCE_BYTES:
        raise ShellRefused("too_long", f"source longer than {MAX_SOURCE_BYTES} bytes")
    # Any C0 control character but tab and newline, or DEL, anywhere (quotes
    # included): a CR or an escape sequence can make a command shown to a
    # human look like another one (SHELL-5).
    bad = _CONTROL.search(source)
    if bad is not None:
        raise _refuse("control_char", "control character", bad.start())
    if not source.strip(" \t\n"):
        raise ShellRefused("empty", "no command in source")
    p = _Parser(source)
    p.parse_list("")
    _ts_gate(data, len(p.cmds))
    return ParsedShell(
        tuple(
            SimpleCommand(tuple(c.argv), tuple(c.redirects), shlex.join(c.argv))
            for c in p.cmds
        ),
        source,
    )
