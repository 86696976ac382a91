"""sed: the command line and the script, read the way GNU sed reads them.

The command line follows GNU getopt: options may come after operands, long
options may be abbreviated, and each `-e` script is compiled when its option
is reached, so `--sandbox` protects only the scripts that come after it (and
the operand script). GNU sed opens the files of `w`, `W` and `s///w` while it
compiles, before it reads any input and even when a later command fails, so
every such command counts wherever it sits.

The script reader follows GNU sed's grammar command by command: addresses
(numbers, `$`, `/re/` and `\\cREc` with `I`/`M`, `first~step`, `addr,+N`,
`addr,~N`, `0,/re/`), `!`, `{}` blocks, `;` and newlines, `#` comments,
labels of `:`, `b`, `t`, `T` and the version of `v` (which end at a blank,
`;`, `}` or `#` and are followed directly by the next command), `a`/`i`/`c`/`e`
text to the end of the line (a trailing backslash carries it into the next
`-e`), `r`/`R`/`w`/`W` file names to the end of the line, `s` and `y` with any
delimiter and bracket expressions, and the `s` flags.

- deny, code_execution_wrapper: the `e` command or the `s///e` flag (runs a
  command); `w`, `W` or `s///w` naming a file other than `/dev/stdout`,
  `/dev/stderr` or `/dev/null`;
- ask, secrets: `r`/`R` of a well-known secret file;
- ask, code_execution_wrapper: a script read from a file (`-f`), editing in
  place (`-i`), an option the reader does not know, and a script it cannot
  read: a syntax error, a construct that sed versions read differently
  (`\\c` in a regex, the delimiter inside a bracket expression, a label with
  unusual characters), or a non-ASCII delimiter.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

from .options import _long_matches
from .paths import _Ctx
from .secrets import _secret_word


class _Unclear(Exception):
    """The script holds something the reader cannot classify."""


_SPECIAL_FILES = frozenset({"/dev/stdout", "/dev/stderr", "/dev/null"})
_SIMPLE = frozenset("=dDFgGhHnNpPzx")  # commands without an argument
_SPACE = " \t\n\r\v\f"


class _Reading(NamedTuple):
    """How one sed version reads the constructs that differ between versions."""

    strict: bool  # stop (unclassifiable) at any construct that versions read differently
    brackets: bool  # a regex skips bracket expressions, where the delimiter is literal (GNU sed 4.3+)
    atomic_c: bool  # `\c` and the next character are one escape in a regex (after GNU sed 4.9)
    label_ends: str  # the characters that end a label


_STRICT = _Reading(True, True, False, " \t\n;}#")
# Judged too, so that a construct sed versions read differently is denied when any of them would run
# or write, and asked otherwise: GNU sed 4.3 to 4.9, later versions, and older ones.
_VERSIONS = (_Reading(False, True, False, " \t\n;}#"), _Reading(False, True, True, " \t\n;}#"),
             _Reading(False, False, False, " \t\n\r\v\f;}#"))


class _SedReader:
    """Reads the -e scripts of one sed call in order, carrying a/i/c text across them as GNU sed does."""

    def __init__(self, reading: _Reading = _STRICT) -> None:
        self.reading = reading
        self.s = ""
        self.i = 0
        self.pending_text = False
        self.runs = False
        self.writes = False
        self.reads: list[str] = []

    # -- characters ----------------------------------------------------------------------------

    def _next(self) -> str | None:
        if self.i < len(self.s):
            self.i += 1
            return self.s[self.i - 1]
        return None

    def _back(self, c: str | None) -> None:
        if c is not None:
            self.i -= 1

    def _nonblank(self) -> str | None:
        c = self._next()
        while c is not None and c in " \t":
            c = self._next()
        return c

    # -- the script ------------------------------------------------------------------------------

    def feed(self, chunk: str) -> None:
        """Read one -e script (raises _Unclear)."""
        self.s, self.i = chunk, 0
        if self.pending_text:
            self._text()
        while True:
            c = self._next()
            while c is not None and (c == ";" or c in _SPACE):
                c = self._next()
            if c is None:
                return
            self._command(c)

    def _command(self, c: str) -> None:
        if c == "#":  # a comment, to the end of the line
            end = self.s.find("\n", self.i)
            self.i = len(self.s) if end < 0 else end
            return
        if self._address(c):
            c = self._nonblank()
            if c == ",":
                if not self._address(self._nonblank()):
                    raise _Unclear
                c = self._nonblank()
        if c == "!":
            c = self._nonblank()
        if c is None:
            raise _Unclear
        handler = _HANDLERS.get(c)
        if handler is not None:
            handler(self)
        elif c in _SIMPLE:
            self._end_of_command()
        elif c not in "{}":  # `{` opens a block (the next command follows at once), `}` closes one
            raise _Unclear
        elif c == "}":
            self._end_of_command()

    def _address(self, c: str | None) -> bool:
        if c is None:
            return False
        if c in "/\\":
            delim = self._next() if c == "\\" else "/"
            if delim is None or delim == "\n":
                raise _Unclear
            self._delimited(delim, regex=True)
            c = self._nonblank()
            while c is not None and c in "IM":
                c = self._nonblank()
            self._back(c)
            return True
        if "0" <= c <= "9" or c in "+~":
            self._integer(c if c not in "+~" else self._nonblank())
            c = self._nonblank()
            if c == "~":
                self._integer(self._nonblank())
            else:
                self._back(c)
            return True
        return c == "$"

    def _integer(self, c: str | None) -> None:
        while c is not None and "0" <= c <= "9":
            c = self._next()
        self._back(c)

    def _end_of_command(self) -> None:
        c = self._nonblank()
        if c in ("}", "#"):
            self._back(c)
        elif c not in (None, "\n", ";"):
            raise _Unclear  # extra characters after the command

    # -- arguments -------------------------------------------------------------------------------

    def _delimited(self, delim: str, regex: bool) -> None:
        """Skip a regex or replacement up to `delim` (GNU sed's match_slash)."""
        if not delim.isascii():
            raise _Unclear  # GNU sed refuses it in UTF-8 locales and splits the bytes in the C locale
        while True:
            c = self._next()
            if c is None or c == "\n":
                raise _Unclear  # unterminated
            if c == delim:
                return
            if c == "\\":
                c = self._next()
                if c is None:
                    raise _Unclear
                if regex and c == "c":  # newer seds read `\c` and the next character as one escape
                    if self.reading.strict:
                        raise _Unclear
                    if self.reading.atomic_c and self._next() is None:
                        raise _Unclear
            elif c == "[" and regex and self.reading.brackets:
                self._bracket(delim)

    def _bracket(self, delim: str) -> None:
        """Skip a bracket expression; the delimiter inside one is read differently by older seds."""
        c = self._next()
        if c == "^":
            c = self._next()
        if c == "]":
            c = self._next()
        while True:
            if c is None or c == "\n" or (c == delim and self.reading.strict):
                raise _Unclear
            if c == "[" and self.s[self.i:self.i + 1] in (":", ".", "="):
                close = self.s[self.i] + "]"
                end = self.s.find(close, self.i + 1)
                if end < 0 or delim in self.s[self.i:end] or "\n" in self.s[self.i:end]:
                    raise _Unclear
                self.i = end + 2
            elif c == "]":
                return
            c = self._next()

    def _label(self) -> str:
        """A label or version: up to a blank, newline, `;`, `}` or `#`, which stays for the next command."""
        c = self._nonblank()
        start = self.i - 1 if c is not None else self.i
        while c is not None and c not in self.reading.label_ends:
            c = self._next()
        self._back(c)
        label = self.s[start:self.i]
        if self.reading.strict and any(not ("!" <= ch <= "~") for ch in label):
            raise _Unclear  # older seds end labels at any white space
        return label

    def _filename(self) -> str:
        """A file name: from the first non-blank character to the end of the line, `;` and `}` included."""
        c = self._nonblank()
        start = self.i - 1 if c is not None else self.i
        end = self.s.find("\n", start)
        end = len(self.s) if end < 0 else end
        self.i = end
        if end == start:
            raise _Unclear  # GNU sed refuses a missing file name
        return self.s[start:end]

    def _text(self) -> None:
        """a/i/c/e text: to the first newline not escaped by a backslash, or on into the next -e."""
        self.pending_text = False
        while True:
            c = self._next()
            if c is None or c == "\n":
                return
            if c == "\\" and self._next() is None:
                self.pending_text = True
                return

    # -- commands with arguments ---------------------------------------------------------------------

    def _cmd_text(self) -> None:  # a, i, c
        c = self._nonblank()
        if c is None:
            raise _Unclear  # GNU sed: expected \ after a, c or i
        if c != "\\":
            self._back(c)  # GNU one-liner: the text starts here
        elif self._next() is None:
            self.pending_text = True  # `a\` ends this -e: the text is the next -e
            return
        # After `a\` the next character is taken as it is, even a backslash; the text runs to the
        # first newline that no backslash escapes.
        self._text()

    def _cmd_e(self) -> None:
        self.runs = True
        c = self._nonblank()
        if c is not None and c != "\n":
            self._back(c)
            self._cmd_text()

    def _cmd_label(self) -> None:  # :, b, t, T, v
        self._label()

    def _cmd_int(self) -> None:  # q, Q, l, L
        self._integer(self._nonblank())
        self._end_of_command()

    def _cmd_read(self) -> None:  # r, R
        self.reads.append(self._filename())

    def _cmd_write(self) -> None:  # w, W
        self._note_write(self._filename())

    def _note_write(self, name: str) -> None:
        if name not in _SPECIAL_FILES:
            self.writes = True

    def _cmd_s(self) -> None:
        delim = self._next()
        if delim is None or delim == "\n":
            raise _Unclear
        self._delimited(delim, regex=True)
        self._delimited(delim, regex=False)
        while True:
            c = self._nonblank()
            if c in (None, "\n", ";"):
                return
            if c in ("}", "#"):
                self._back(c)
                return
            if c == "e":
                self.runs = True
            elif c == "w":
                self._note_write(self._filename())
                return
            elif c not in "gpiImM0123456789":
                raise _Unclear

    def _cmd_y(self) -> None:
        delim = self._next()
        if delim is None or delim == "\n":
            raise _Unclear
        self._delimited(delim, regex=False)
        self._delimited(delim, regex=False)
        self._end_of_command()


_HANDLERS = {
    "a": _SedReader._cmd_text, "i": _SedReader._cmd_text, "c": _SedReader._cmd_text, "e": _SedReader._cmd_e,
    ":": _SedReader._cmd_label, "b": _SedReader._cmd_label, "t": _SedReader._cmd_label,
    "T": _SedReader._cmd_label, "v": _SedReader._cmd_label, "q": _SedReader._cmd_int, "Q": _SedReader._cmd_int,
    "l": _SedReader._cmd_int, "L": _SedReader._cmd_int, "r": _SedReader._cmd_read, "R": _SedReader._cmd_read,
    "w": _SedReader._cmd_write, "W": _SedReader._cmd_write, "s": _SedReader._cmd_s, "y": _SedReader._cmd_y,
}


# --- the command line -----------------------------------------------------------------------------

# GNU sed's long options and what each means: its short letter, or a name.
_SED_LONG: dict[str, str] = {
    "--binary": "b", "--debug": "debug", "--expression": "e", "--file": "f", "--follow-symlinks": "follow",
    "--help": "info", "--in-place": "i", "--line-length": "l", "--null-data": "z", "--zero-terminated": "z",
    "--posix": "posix", "--quiet": "n", "--silent": "n", "--regexp-extended": "E", "--sandbox": "sandbox",
    "--separate": "s", "--unbuffered": "u", "--version": "info",
}
_SED_FLAGS = frozenset("nrEsuzb")


class _SedArgs(NamedTuple):
    chunks: list[str]  # -e scripts compiled before any --sandbox, in order
    operand_script: str | None  # the first operand, when it is (or may be) the script and unsandboxed
    script_file: bool
    in_place: bool
    unclear: bool


class _SedScan:
    """GNU getopt over sed's argv: options anywhere, abbreviated long options, `--` ends them."""

    def __init__(self) -> None:
        self.chunks: list[str] = []
        self.script_file = self.in_place = self.unclear = self.sandbox = False
        self.has_script_option = False
        self.operands: list[str] = []
        self.script_before_operand = False  # an -e/-f came before the first operand
        self.sandbox_before_operand = False

    def scan(self, args: Sequence[str]) -> _SedArgs:
        i, n = 0, len(args)
        while i < n:
            a = args[i]
            i += 1
            if a == "--":
                self.operands.extend(args[i:])
                break
            if a.startswith("--"):
                i = self._long(a, args, i)
            elif len(a) > 1 and a[0] == "-":
                i = self._short(a, args, i)
            else:
                if not self.operands:
                    self.sandbox_before_operand = self.sandbox
                self.operands.append(a)
        return self._result()

    def _result(self) -> _SedArgs:
        operand: str | None = None
        if self.operands:
            # The first operand is the script when no -e/-f is given (compiled after every option, so
            # --sandbox anywhere covers it). With POSIXLY_CORRECT set, option parsing stops at it, so
            # it is also the script when it comes before every -e/-f, sandboxed only by an earlier
            # --sandbox.
            normal = not self.has_script_option and not self.sandbox
            posix = not self.script_before_operand and not self.sandbox_before_operand
            if normal or posix:
                operand = self.operands[0]
        return _SedArgs(self.chunks, operand, self.script_file, self.in_place, self.unclear)

    def _script(self, kind: str, value: str) -> None:
        if not self.operands:
            self.script_before_operand = True
        self.has_script_option = True
        if kind == "e" and not self.sandbox:
            self.chunks.append(value)
        elif kind == "f":
            self.script_file = True

    def _long(self, a: str, args: Sequence[str], i: int) -> int:
        name, eq, val = a.partition("=")
        meanings = {_SED_LONG[m] for m in _long_matches(name, _SED_LONG)}
        if len(meanings) != 1:
            self.unclear = True  # unknown, or ambiguous (sed refuses it; earlier scripts are compiled)
            return i
        meaning = meanings.pop()
        if meaning in ("e", "f", "l") and not eq:
            val = args[i] if i < len(args) else ""
            i += 1
        if meaning in ("e", "f"):
            self._script(meaning, val)
        elif meaning == "i":
            self.in_place = True
        elif meaning == "sandbox":
            self.sandbox = True
        return i

    def _short(self, a: str, args: Sequence[str], i: int) -> int:
        for j in range(1, len(a)):
            ch = a[j]
            if ch in _SED_FLAGS:
                continue
            if ch == "i":
                self.in_place = True
                return i  # the rest is the backup suffix
            if ch in "efl":
                value = a[j + 1:]
                if not value:
                    value = args[i] if i < len(args) else ""
                    i += 1
                if ch != "l":
                    self._script(ch, value)
                return i
            self.unclear = True
            return i
        return i


def _read_once(chunks: Sequence[str], reading: _Reading) -> tuple[_SedReader, bool]:
    reader = _SedReader(reading)
    try:
        for chunk in chunks:
            reader.feed(chunk)
    except _Unclear:
        return reader, True
    return reader, False


def _read_scripts(chunks: Sequence[str]) -> tuple[_SedReader, bool]:
    """Read the scripts in order as one program: (what was read, could the reader not classify all of it).

    What was read before a point the reader cannot classify still counts: GNU sed has opened the `w`
    files of everything it compiled before it stops at an error. When the strict reading stops, the
    script is also read as each sed version would read it, and what any of them finds counts.
    """
    reader, unclear = _read_once(chunks, _STRICT)
    if unclear:
        for reading in _VERSIONS:
            other, _ = _read_once(chunks, reading)
            reader.runs = reader.runs or other.runs
            reader.writes = reader.writes or other.writes
            reader.reads += other.reads
    return reader, unclear


def _sed(ctx: _Ctx, args: Sequence[str]) -> None:
    parsed = _SedScan().scan(args)
    programs = [list(parsed.chunks)]
    if parsed.operand_script is not None:
        programs.append([parsed.operand_script])
    if parsed.script_file and len(parsed.chunks) > 1:
        programs.extend([c] for c in parsed.chunks)  # a -f file between them may end any pending text
    unclear = parsed.unclear
    for chunks in programs:
        if not chunks:
            continue
        reader, not_read = _read_scripts(chunks)
        unclear = unclear or not_read
        if reader.runs:
            ctx.add("code_execution_wrapper", "deny", "sed script that runs commands")
        if reader.writes:
            ctx.add("code_execution_wrapper", "deny", "sed script that writes files")
        if any(_secret_word(ctx, r) for r in reader.reads):
            ctx.add("secrets", "ask", "sed script reading a secret file")
    if unclear:
        ctx.add("code_execution_wrapper", "ask", "sed script or option the watchdog cannot read")
    if parsed.script_file:
        ctx.add("code_execution_wrapper", "ask", "sed script read from a file")
    if parsed.in_place:
        ctx.add("code_execution_wrapper", "ask", "sed editing files in place")
