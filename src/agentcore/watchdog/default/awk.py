"""awk: the command line and the program text, read as gawk, mawk and busybox awk read them.

The program is tokenised (strings, regex literals told from division by the
token before them, comments, line continuations, numbers, names, operators)
and then judged token by token, so a `}` or `;` inside a string, a comment
or a continuation cannot hide anything:

- deny, code_execution_wrapper: the name `system`, any `|` (`print | cmd`,
  `cmd | getline`, gawk's `|&` coprocesses) and any `@` (gawk's indirect
  calls, `@include`, `@load`, `@namespace`); options that load a library;
- deny, code_execution_wrapper: `print`/`printf` redirected with `>` or `>>`
  to anything but the string `"/dev/stdout"` or `"/dev/stderr"`, and gawk's
  options that write files (`-d`, `-o`, `-p` and their long forms);
- deny, exfiltration: a string or an operand naming gawk's `/inet` sockets;
- ask, secrets: a string literal naming a well-known secret file (what
  `getline <` would read);
- ask, code_execution_wrapper: a program read from a file, the debugger,
  and anything the reader cannot classify (an unknown option, a character
  awk would not accept). Where awks read the text differently (a `/` after
  `if (…)` or `x++`, a `/` inside a regex bracket expression) every reading
  is judged, so a command any of them would run is denied, and the rest is
  asked.

`--sandbox` (`-S`) is honoured only under the name `gawk`: mawk refuses the
option and the one-true-awk ignores it and runs the program anyway.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

from .options import _long_matches
from .paths import _Ctx
from .secrets import _secret_word


class _Unclear(Exception):
    """The text holds something the reader cannot classify."""


class _Ambiguous(_Unclear):
    """A `/` that awks read differently (regex or division), or a bracket expression holding `/` or a
    backslash (bracket or plain characters): both readings are judged."""

    def __init__(self, pos: int) -> None:
        super().__init__(pos)
        self.pos = pos


class _Tok(NamedTuple):
    kind: str  # name, number, string, regex, op, ctlparen (`)` of an if/while/for header), newline
    text: str


_OPS = ("**=", "**", "^=", "+=", "-=", "*=", "%=", "==", "<=", ">=", "!=", "!~", "++", "--", "&&", "||", ">>",
        "|&", "{", "}", "(", ")", "[", "]", ";", ",", "+", "-", "*", "%", "^", "!", ">", "<", "|", "?", ":",
        "~", "$", "=", "@")
_NAME_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_NAME_CHARS = _NAME_START | frozenset("0123456789")
_DIGITS = frozenset("0123456789")
_KEYWORDS = frozenset(
    """BEGIN END BEGINFILE ENDFILE function func if else while for do break continue next nextfile exit return
    delete getline print printf in switch case default length substr index split sub gsub match sprintf sin cos
    atan2 exp log sqrt int rand srand tolower toupper close system fflush gensub strftime systime mktime and or
    xor lshift rshift compl asort asorti patsplit isarray typeof strtonum bindtextdomain dcgettext dcngettext
    mkbool""".split()
)
# After these words a `/` starts a regex literal in every awk.
_REGEX_AFTER_WORDS = frozenset({"print", "printf", "return", "case", "do", "else"})
_OPERAND_OPS = frozenset({")", "]"})
_CONTROL = frozenset({"if", "while", "for", "switch"})
# After these a newline ends a print statement; after an operator (`,`, `&&`, `?`…) it may not.
_ENDS_BEFORE_NEWLINE = frozenset({"print", "printf", "getline", "++", "--"})
_SAFE_TARGETS = frozenset({'"/dev/stdout"', '"/dev/stderr"'})
_STATEMENT_END = frozenset({";", "}"})
_INET = ("/inet/", "/inet4/", "/inet6/")


class _Lexer:
    """Splits an awk program into tokens; raises _Unclear where awks could disagree."""

    def __init__(self, text: str, forced: dict[int, str] | None = None) -> None:
        self.s = text
        self.forced = forced or {}  # position of an ambiguous `/` or `[` -> the reading to take there
        self.i = 0
        self.toks: list[_Tok] = []
        self.parens: list[bool] = []  # per open `(`: does it open an if/while/for/switch header?

    def run(self) -> list[_Tok]:
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c in " \t\r":
                self.i += 1
            elif c == "\\":
                self._continuation()
            elif c == "\n":
                self.toks.append(_Tok("newline", "\n"))
                self.i += 1
            elif c == "#":
                end = s.find("\n", self.i)
                self.i = len(s) if end < 0 else end  # a comment never continues, even after a backslash
            else:
                self._token(c)
        return self.toks

    def _continuation(self) -> None:
        if self.s.startswith("\\\n", self.i):
            self.i += 2  # joins lines; also ends a name, as in every awk
            return
        raise _Unclear

    def _token(self, c: str) -> None:
        if c == '"':
            self._quoted('"', "string")
        elif c == "/":
            self._slash()
        elif c in _DIGITS or (c == "." and self.s[self.i + 1:self.i + 2].isdigit()):
            self._number()
        elif c in _NAME_START:
            self._name()
        else:
            self._operator()

    def _quoted(self, close: str, kind: str) -> None:
        s, j = self.s, self.i + 1
        while j < len(s):
            c = s[j]
            if c == "\\":
                j += 2  # an escape, or a continuation inside the literal
                continue
            if c == "\n":
                raise _Unclear  # unterminated
            if c == "[" and kind == "regex":
                j = self._bracket(j)
                continue
            if c == close:
                self.toks.append(_Tok(kind, s[self.i:j + 1]))
                self.i = j + 1
                return
            j += 1
        raise _Unclear

    def _bracket(self, j: int) -> int:
        """Index after the bracket expression opened at `j`.

        A `/`, backslash or newline inside one is read differently by awks (and with it where the regex
        ends): the first time, raise _Ambiguous so that both readings are judged, as a bracket expression
        (`/` literal, backslash escaping) and as plain characters.
        """
        mode = self.forced.get(j)
        if mode == "plain":
            return j + 1
        s = self.s
        k = j + 1
        if s[k:k + 1] == "^":
            k += 1
        if s[k:k + 1] == "]":
            k += 1
        while k < len(s):
            c = s[k]
            if c == "\n":
                raise _Unclear
            if c in "/\\" and mode is None:
                raise _Ambiguous(j)
            if c == "\\":
                k += 2
                continue
            if c == "[" and s[k + 1:k + 2] in (":", ".", "="):
                end = s.find(s[k + 1] + "]", k + 2)
                if end < 0 or "\n" in s[k:end]:
                    raise _Unclear
                if mode is None and any(x in s[k:end] for x in "/\\"):
                    raise _Ambiguous(j)
                k = end + 2
                continue
            if c == "]":
                return k + 1
            k += 1
        raise _Unclear

    def _slash(self) -> None:
        mode = self.forced.get(self.i) or _slash_mode(self.toks)
        if mode == "regex":
            self._quoted("/", "regex")
            return
        if mode == "unclear":
            raise _Ambiguous(self.i)
        self._operator()

    def _push_op(self, op: str) -> None:
        kind = "op"
        if op == "(":
            prev = self.toks[-1] if self.toks else None
            self.parens.append(prev is not None and prev.kind == "name" and prev.text in _CONTROL)
        elif op == ")" and self.parens and self.parens.pop():
            kind = "ctlparen"  # what follows is a statement, not an operator
        self.toks.append(_Tok(kind, op))

    def _number(self) -> None:
        s, j = self.s, self.i
        while j < len(s) and s[j] in _DIGITS:
            j += 1
        if s[j:j + 1] == ".":
            j += 1
            while j < len(s) and s[j] in _DIGITS:
                j += 1
        if s[j:j + 1] in ("e", "E") and (s[j + 1:j + 2].isdigit() or (s[j + 1:j + 2] in ("+", "-")
                                                                     and s[j + 2:j + 3].isdigit())):
            j += 2
            while j < len(s) and s[j] in _DIGITS:
                j += 1
        if j < len(s) and (s[j] in _NAME_CHARS or s[j] == "."):
            raise _Unclear  # `0x1F`, `1e`, `1.2.3`: awks split these differently
        self.toks.append(_Tok("number", s[self.i:j]))
        self.i = j

    def _name(self) -> None:
        s, j = self.s, self.i
        while j < len(s) and s[j] in _NAME_CHARS:
            j += 1
        if s.startswith("::", j):
            raise _Unclear  # gawk namespaces
        self.toks.append(_Tok("name", s[self.i:j]))
        self.i = j

    def _operator(self) -> None:
        for op in _OPS:
            if self.s.startswith(op, self.i):
                self.i += len(op)
                self._push_op(op)
                return
        if self.s.startswith("/=", self.i) or self.s.startswith("/", self.i):
            op = "/=" if self.s.startswith("/=", self.i) else "/"
            self.toks.append(_Tok("op", op))
            self.i += len(op)
            return
        raise _Unclear  # a character no awk accepts here (`&`, a quote, \f, non-ASCII…)


def _is_operand(t: _Tok) -> bool:
    if t.kind in ("number", "string", "regex"):
        return True
    if t.kind == "name":
        return t.text not in _KEYWORDS
    return t.kind == "op" and t.text in _OPERAND_OPS


def _slash_mode(toks: list[_Tok]) -> str:
    """Is a `/` here a regex literal, division, or a spot where awks may disagree?"""
    if not toks:
        return "regex"
    prev = toks[-1]
    if _is_operand(prev):
        return "division"
    if prev.kind == "name":  # a keyword or builtin
        return "regex" if prev.text in _REGEX_AFTER_WORDS else "unclear"
    if prev.kind == "ctlparen" or prev.kind == "op" and prev.text in ("++", "--"):
        return "unclear"  # gawk reads a regex after `if (…)` and `x++`, mawk a division
    return "regex"


class _Program(NamedTuple):
    runs: bool
    writes: bool
    network: bool
    reads: tuple[str, ...]  # string literals, each a possible `getline <` file
    unclear: bool = False  # some of the text could not be classified (what was read still counts)


_MAX_READINGS = 16


def _read_program(text: str) -> _Program:
    """Judge one program text under every reading awks may give its ambiguous `/`s.

    Tokens read before a point the lexer cannot classify are judged too: up to there every awk agrees.
    """
    pending: list[dict[int, str]] = [{}]
    found: list[_Program] = []
    unclear = False
    while pending and len(found) < _MAX_READINGS:
        forced = pending.pop()
        lexer = _Lexer(text, forced)
        try:
            lexer.run()
        except _Ambiguous as amb:
            unclear = True
            if text[amb.pos] == "[":
                pending += [{**forced, amb.pos: "bracket"}, {**forced, amb.pos: "plain"}]
            else:
                pending += [{**forced, amb.pos: "regex"}, {**forced, amb.pos: "division"}]
        except _Unclear:
            unclear = True
        found.append(_judge_tokens(lexer.toks))
    return _Program(any(p.runs for p in found), any(p.writes for p in found), any(p.network for p in found),
                    tuple(r for p in found for r in p.reads), unclear or bool(pending))


def _judge_tokens(toks: list[_Tok]) -> _Program:
    runs = writes = network = False
    reads: list[str] = []
    for k, t in enumerate(toks):
        if t.kind == "name" and t.text == "system" or t.kind == "op" and t.text in ("|", "|&", "@"):
            runs = True
        elif t.kind == "string" and any(x in t.text for x in _INET):
            network = True
        elif t.kind == "name" and t.text in ("print", "printf"):
            writes = writes or _print_redirects(toks, k + 1)
        if t.kind == "string":
            reads.append(t.text[1:-1])  # any literal may become a `getline <` target
    return _Program(runs, writes, network, tuple(reads))


def _print_redirects(toks: list[_Tok], k: int) -> bool:
    """Does the print statement starting at toks[k] redirect its output to a file?"""
    depth = 0
    n = len(toks)
    while k < n:
        t = toks[k]
        if t.kind == "op" and t.text in ("(", "["):
            depth += 1
        elif t.kind in ("op", "ctlparen") and t.text in (")", "]"):
            depth -= 1
            if depth < 0:
                return False
        elif depth == 0 and (t.kind == "op" and t.text in _STATEMENT_END or t.kind == "newline"
                             and _ends_statement(toks[k - 1])):
            return False
        elif depth == 0 and t.kind == "op" and t.text in (">", ">>"):
            return not _safe_target(toks, k + 1)
        k += 1
    return False


def _ends_statement(prev: _Tok) -> bool:
    """Does a newline after `prev` end a print statement? (After `,`, `&&`, `?`… it may not: keep reading.)"""
    return _is_operand(prev) or prev.text in _ENDS_BEFORE_NEWLINE


def _safe_target(toks: list[_Tok], k: int) -> bool:
    if k >= len(toks) or toks[k].kind != "string" or toks[k].text not in _SAFE_TARGETS:
        return False
    after = toks[k + 1] if k + 1 < len(toks) else None
    return after is None or after.kind == "newline" or (after.kind == "op" and after.text in _STATEMENT_END)


# --- the command line -----------------------------------------------------------------------------

# What each gawk long option does to the call. Values: flag (harmless), value (takes a harmless
# value), prog (its value is program text), file (program text from a file), load (a shared
# library), write (writes a file), debug (the interactive debugger), sandbox.
_GAWK_LONG: dict[str, str] = {
    "--assign": "value", "--field-separator": "value", "--source": "prog", "--file": "file", "--exec": "file",
    "--include": "include", "--load": "load", "--dump-variables": "write", "--profile": "write",
    "--pretty-print": "write", "--debug": "debug", "--sandbox": "sandbox", "--bignum": "flag",
    "--characters-as-bytes": "flag", "--copyright": "flag", "--csv": "flag", "--gen-pot": "flag", "--help": "flag",
    "--lint": "flag", "--lint-old": "flag", "--no-optimize": "flag", "--non-decimal-data": "flag",
    "--nostalgia": "flag", "--optimize": "flag", "--persist": "flag", "--posix": "flag", "--re-interval": "flag",
    "--trace": "flag", "--traditional": "flag", "--use-lc-numeric": "flag", "--version": "flag",
}
_GAWK_LONG_NEEDS_VALUE = frozenset({"--assign", "--field-separator", "--source", "--file", "--exec", "--include",
                                    "--load"})
_SHORT_REQUIRED = {"F": "value", "v": "value", "f": "file", "e": "prog", "E": "file", "i": "include", "l": "load",
                   "W": "W"}
_SHORT_OPTIONAL = {"d": "write", "D": "debug", "L": "flag", "o": "write", "p": "write"}
_SHORT_FLAGS = frozenset("bcCghIMNnOPrstV")


class _AwkArgs:
    """What an awk command line asks for, read in POSIX order (options stop at the first operand)."""

    def __init__(self, flavour: str) -> None:
        self.flavour = flavour  # gawk, mawk, or any (`awk`, `nawk`, … may be either)
        self.programs: list[str] = []
        self.from_file = self.program_from_file = False
        self.debug = self.unclear = self.writes = self.loads = self.sandbox = False
        self.operands: list[str] = []

    def apply(self, meaning: str, value: str | None) -> None:
        if meaning == "prog":
            self.programs.append(value or "")
        elif meaning == "file":
            self.from_file = self.program_from_file = True
        elif meaning == "include":
            self.from_file = True  # a library: the program itself still comes from -e or the first operand
        elif meaning == "load":
            self.loads = True
        elif meaning == "write":
            self.writes = True
        elif meaning == "debug":
            self.debug = True
        elif meaning == "unclear":
            self.unclear = True
        elif meaning == "sandbox" and self.flavour == "gawk":
            self.sandbox = True

    def scan(self, args: Sequence[str]) -> None:
        i, n = 0, len(args)
        while i < n:
            a = args[i]
            i += 1
            if a == "--":
                break
            if a == "-" or not a.startswith("-"):
                i -= 1
                break
            i = self._long(a, args, i) if a.startswith("--") else self._short(a, args, i)
        rest = list(args[i:])
        if not self.programs and not self.program_from_file and rest:
            self.programs.append(rest.pop(0))
        self.operands = rest
        if any(len(o) > 1 and o.startswith("-") for o in rest):
            self.unclear = True  # an awk that permutes its arguments would read this as an option

    def _long(self, a: str, args: Sequence[str], i: int) -> int:
        name, eq, val = a.partition("=")
        matches = _long_matches(name, _GAWK_LONG)
        meanings = {_GAWK_LONG[m] for m in matches}
        if len(meanings) != 1:
            self.apply("unclear", None)
            return i
        canon = min(matches)
        value: str | None = val if eq else None
        if not eq and canon in _GAWK_LONG_NEEDS_VALUE:
            value = args[i] if i < len(args) else ""
            i += 1
        self.apply(meanings.pop(), value)
        return i

    def _short(self, a: str, args: Sequence[str], i: int) -> int:
        for j in range(1, len(a)):
            ch = a[j]
            if ch in _SHORT_FLAGS:
                continue
            if ch == "S":
                self.apply("sandbox", None)
                continue
            if ch in _SHORT_OPTIONAL:
                self.apply(_SHORT_OPTIONAL[ch], a[j + 1:])
                return i
            if ch in _SHORT_REQUIRED:
                value = a[j + 1:]
                if not value:
                    value = args[i] if i < len(args) else ""
                    i += 1
                if ch == "W":
                    return self._w(value, args, i)
                self.apply(_SHORT_REQUIRED[ch], value)
                return i
            self.apply("unclear", None)
            return i
        return i

    def _w(self, value: str, args: Sequence[str], i: int) -> int:
        """`-W opt`: gawk reads it as `--opt`, mawk as a comma-separated list of its own options."""
        g_meaning, g_takes = _w_as_gawk(value)
        m_meaning, m_takes = _w_as_mawk(value)
        views = {"gawk": [(g_meaning, g_takes)], "mawk": [(m_meaning, m_takes)]}.get(
            self.flavour, [(g_meaning, g_takes), (m_meaning, m_takes)])
        if len({t for _, t in views}) > 1:
            self.apply("unclear", None)  # the awks disagree on whether the next word is consumed
            return i
        takes = views[0][1]
        # the option's value: the next word, or what follows `=` (`-W source=TEXT`)
        value_word = (args[i] if i < len(args) else "") if takes else value.partition("=")[2]
        for meaning, _ in views:
            self.apply(meaning, value_word)
        return i + 1 if takes else i


def _w_as_gawk(value: str) -> tuple[str, bool]:
    name, eq, _ = ("--" + value).partition("=")
    matches = _long_matches(name, _GAWK_LONG)
    meanings = {_GAWK_LONG[m] for m in matches}
    if not matches:
        return "flag", False  # gawk warns and ignores an unknown -W option
    if len(meanings) != 1:
        return "unclear", False
    meaning = meanings.pop()
    return meaning, (not eq and min(matches) in _GAWK_LONG_NEEDS_VALUE)


def _w_as_mawk(value: str) -> tuple[str, bool]:
    for item in value.split(","):
        name = item.split("=", 1)[0]
        if name and "exec".startswith(name):
            return "file", True  # -W exec FILE: the program comes from FILE
    return "flag", False  # mawk's other -W options only print or tune; unknown ones are ignored


def _awk(ctx: _Ctx, args: Sequence[str], name: str = "awk") -> None:
    parsed = _AwkArgs(name if name in ("gawk", "mawk") else "any")
    parsed.scan(args)
    if parsed.loads:
        ctx.add("code_execution_wrapper", "deny", "awk loading a shared library")
    if parsed.writes:
        ctx.add("code_execution_wrapper", "deny", "awk option that writes files")
    if any(o.startswith(_INET) for o in parsed.operands):
        ctx.add("exfiltration", "deny", "awk reading a network socket")
    if not parsed.sandbox:
        for text in parsed.programs:
            _judge_program(ctx, text)
    if parsed.from_file:
        ctx.add("code_execution_wrapper", "ask", "awk program read from a file")
    if parsed.debug:
        ctx.add("code_execution_wrapper", "ask", "the awk debugger")
    if parsed.unclear:
        ctx.add("code_execution_wrapper", "ask", "awk option the watchdog cannot classify")


def _judge_program(ctx: _Ctx, text: str) -> None:
    prog = _read_program(text)
    if prog.unclear:
        ctx.add("code_execution_wrapper", "ask", "awk program the watchdog cannot read")
    if prog.runs:
        ctx.add("code_execution_wrapper", "deny", "awk program that runs commands")
    if prog.writes:
        ctx.add("code_execution_wrapper", "deny", "awk program that writes files")
    if prog.network:
        ctx.add("exfiltration", "deny", "awk program opening a network socket")
    if any(_secret_word(ctx, r) for r in prog.reads):
        ctx.add("secrets", "ask", "awk program reading a secret file")
