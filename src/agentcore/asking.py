"""Asking (ASK): a pluggable async broker answers every `ask` and `question`.

Headless hosts never invent answers: every ask is a denial with a fixed
text, and `question` is a fixed refusal. "Always" answers are recorded by
the pipeline as exact session rules, never wider than what was approved.
"""

from __future__ import annotations

import sys
from dataclasses import field
from typing import Any, Literal, Protocol, Sequence

import anyio

from .lazydc import lazy_dataclass  # made on first use: every call imports this module, few make these
from .rules.evaluator import Subject
from .textdata import printable

HEADLESS_ASK_TEXT = "Permission required but this run is headless; the call was not performed."
HEADLESS_QUESTION_TEXT = "question is unavailable in a headless run; continue with your best judgement."

Choice = Literal["allow_once", "allow_always", "reject_once", "reject_always", "cancelled"]


@lazy_dataclass(frozen=True)
class AskRequest:
    """One call waiting on a human: the layer that asks (permission or watchdog), why, and every subject of the call."""

    session_id: str
    call_id: str
    tool: str
    kind: str
    title: str
    layer: Literal["permission", "watchdog"]
    reason: str
    subjects: tuple[Subject, ...]
    args: dict[str, Any] = field(default_factory=dict)  # shown to the human only, never logged

    def details(self) -> list[str]:
        """What the human is asked to approve, one line each and safe to show (no control or format
        characters): why it is asked, then every subject the call has (every command of a script, not
        only the first line a title shows)."""
        return [f"{self.layer}: {printable(self.reason)}", *(f"- {printable(s.describe())}" for s in self.subjects)]

    def always_label(self, allow: bool = True) -> str:
        """Exactly what an "always" answer will remember, in words (ASK-3, ASK-6).

        A permission ask remembers one exact rule per subject (this tool, this
        path, command or host); a watchdog ask remembers this exact call.
        """
        verb = "allow" if allow else "reject"
        if self.layer == "watchdog":
            return f"Always {verb} this exact {printable(self.tool)} call in this session"
        what = "; ".join(_subject_words(s) for s in self.subjects) or f"using {printable(self.tool)}"
        return f"Always {verb} {what} in this session"


_VERBS = {"fs.read": "reading", "fs.write": "writing", "shell.run": "running", "net.fetch": "fetching from"}


def _subject_words(subject: Subject) -> str:
    """`reading /abs/path with read`, `running `git status` with bash`, `using todo`."""
    verb = _VERBS.get(subject.capability or "")
    if verb is None or not subject.value:
        return f"using {printable(subject.tool)}"
    # A button's label in an editor: no control or format character may reorder or hide what it remembers.
    value = f"`{printable(subject.value)}`" if subject.capability == "shell.run" else printable(subject.value)
    return f"{verb} {value} with {printable(subject.tool)}"


class AskBroker(Protocol):
    """Answers asks and questions for a host. `name` says who answered, in events and recordings."""

    name: str
    headless: bool

    async def ask(self, request: AskRequest) -> Choice: ...

    async def question(self, questions: Sequence[dict[str, Any]]) -> list[list[str]] | None:
        """Answers, one list per question; None when no human can answer."""
        ...


class HeadlessBroker:
    """No human: every ask is refused and every question gets the fixed refusal (ASK-5, QSTN-3)."""

    name = "headless"
    headless = True

    async def ask(self, request: AskRequest) -> Choice:
        return "reject_once"

    async def question(self, questions: Sequence[dict[str, Any]]) -> list[list[str]] | None:
        return None


class ScriptedBroker:
    """Answers from a fixed list (tests, conformance harnesses); records what it was asked."""

    name = "scripted"
    headless = False

    def __init__(self, choices: Sequence[Choice] = (), answers: Sequence[list[list[str]]] = ()) -> None:
        self._choices = list(choices)
        self._answers = list(answers)
        self.requests: list[AskRequest] = []

    async def ask(self, request: AskRequest) -> Choice:
        self.requests.append(request)
        return self._choices.pop(0) if self._choices else "cancelled"

    async def question(self, questions: Sequence[dict[str, Any]]) -> list[list[str]] | None:
        return self._answers.pop(0) if self._answers else None


_CHOICES: dict[str, Choice] = {
    "o": "allow_once", "once": "allow_once", "y": "allow_once", "yes": "allow_once", "allow": "allow_once",
    "a": "allow_always", "always": "allow_always",
    "r": "reject_once", "reject": "reject_once", "n": "reject_once", "no": "reject_once",
}


class TerminalBroker:
    """Prompts on the controlling terminal (stderr for output, stdin for answers)."""

    name = "terminal"
    headless = False

    def __init__(self, stdin: Any = None, stderr: Any = None) -> None:
        self._in = stdin or sys.stdin
        self._err = stderr or sys.stderr

    def _prompt(self, text: str) -> str:
        self._err.write(text)
        self._err.flush()
        line = self._in.readline()
        return line.strip() if line else ""

    async def ask(self, request: AskRequest) -> Choice:
        # Tool names, titles and subjects come from the model's arguments or a server: never raw escape
        # sequences on the human's terminal, which could rewrite what this prompt shows.
        why, *subjects = request.details()
        lines = [
            "",
            f"agentcore: permission needed ({why})",
            f"  tool: {printable(request.tool)}  ({printable(request.title)})",
            *(f"  {s}" for s in subjects),
        ]
        lines += [
            "  [o] allow once (also: y, yes)",
            f"  [a] {printable(request.always_label())}",
            "  [r] reject (also: n, no)",
            "choice [o/a/r]: ",
        ]
        prompt = "\n".join(lines)
        while True:  # an answer it does not understand is asked again; end of input is a refusal
            raw = await anyio.to_thread.run_sync(self._prompt_raw, prompt, abandon_on_cancel=True)
            if raw is None:
                return "reject_once"
            choice = _CHOICES.get(raw.strip().lower())
            if choice is not None:
                return choice
            prompt = "please answer o (allow once), a (always) or r (reject): "

    def _prompt_raw(self, text: str) -> str | None:
        self._err.write(text)
        self._err.flush()
        line = self._in.readline()
        return line if line else None

    async def question(self, questions: Sequence[dict[str, Any]]) -> list[list[str]] | None:
        answers: list[list[str]] = []
        for q in questions:
            text = f"\n{printable(q.get('header') or 'Question')}: {printable(q['question'], lines=True)}\n"
            opts = q.get("options") or []
            for i, o in enumerate(opts, 1):
                text += f"  {i}. {printable(o['label'])}" + (f" — {printable(o['description'])}" if o.get("description") else "") + "\n"
            text += "answer" + (" (numbers, comma-separated)" if q.get("multi_select") else "") + ": "
            raw = await anyio.to_thread.run_sync(self._prompt, text, abandon_on_cancel=True)
            picked: list[str] = []
            for part in (raw.split(",") if q.get("multi_select") else [raw]):
                part = part.strip()
                if opts and part.isdigit() and 1 <= int(part) <= len(opts):
                    picked.append(opts[int(part) - 1]["label"])
                elif part:
                    picked.append(part)
            answers.append(picked)
        return answers
