"""Mutants of the situation class: behaviour that is right in the common case and wrong in one situation.

Some change what the implementation is asked to do (a rewritten argument,
a rule the proxy adds, a call routed to a *shadow* agent compiled from a
changed manifest); some answer by themselves from what is on disk, the way
a wrong implementation would have. All of them use the protocol only.
"""

from __future__ import annotations

import copy
import json
import os
import re
import tempfile
from typing import Any, Callable

from ..properties import KINDS
from .proxy import Mutant, envelope, error_code, made_envelope, refusal

_VAR = re.compile(r"(?<!\\)\{([^{}]*)\}")
_KNOWN_VARS = ("workspace", "ad-hoc", "user-data")
_WILD = re.compile(r"(?<!\\)[*?\[]")
LONG_LINE = 2000
LONG_LINE_MARK = " [... omitted end of long line]"


def _rules_map(manifest: dict[str, Any], fn: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> dict[str, Any]:
    manifest["rules"] = fn([r for r in manifest.get("rules") or [] if isinstance(r, dict)])
    return manifest


def _asks_allowed(rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**r, "action": "allow"} if r.get("action") == "ask" else r for r in rules]


class _Routed(Mutant):
    """Send some calls to a shadow agent (a changed manifest), in a fresh session of the same mode."""

    group = "situation"
    suffix = "x"

    def applies(self, req: dict[str, Any]) -> bool:
        return False

    def manifest(self, m: dict[str, Any]) -> dict[str, Any]:
        return m

    def project(self, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return rules

    def session_rules(self, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return rules

    def first(self, req: dict[str, Any], reply: Any) -> bool:
        """Whether the real reply calls for the shadow (default: route without asking the real one)."""
        return True

    async def handle(self, req: dict[str, Any]) -> Any:
        if req.get("op") != "call" or not self.applies(req):
            return await self.send(req)
        real = None
        if self.needs_real():
            real = await self.send(req)
            if not self.first(req, real):
                return real
        shadow = await self.shadow(req["agent"], self.suffix, self.manifest, self.project)
        if shadow is None:
            return real if real is not None else await self.send(req)
        self._injected += 1
        session = f"{req['session']}~{self.suffix}{self._injected}"
        rules = [r for batch in self.world.session_rules.get(req["session"], []) for r in batch]
        if rules:
            await self.inject("set_rules", agent=shadow, scope="session", session=session, mode=req["mode"], rules=self.session_rules(rules))
        reply = await self.send({**req, "agent": shadow, "session": session})
        self.fire()
        return reply

    def needs_real(self) -> bool:
        return False


class HeadlessAllows(_Routed):
    """A headless ask from the rules lets the call of one tool go ahead instead of refusing it."""

    tool = ""
    suffix = "h"

    def applies(self, req: dict[str, Any]) -> bool:
        return req.get("tool") in self.tools() and req.get("mode") == "headless"

    def tools(self) -> tuple[str, ...]:
        return (self.tool,)

    def needs_real(self) -> bool:
        return True

    def first(self, req: dict[str, Any], reply: Any) -> bool:
        ref = refusal(reply)
        return ref.get("code") == "headless" and ref.get("asked_by") == "permission"

    def manifest(self, m: dict[str, Any]) -> dict[str, Any]:
        return _rules_map(m, lambda rules: _asks_allowed(rules) + [{"permission": "*", "pattern": "*", "action": "allow"}])

    def project(self, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return _asks_allowed(rules)

    def session_rules(self, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return _asks_allowed(rules)


def _headless_allows(tool: str) -> type[Mutant]:
    return type(f"HeadlessAllows_{tool}", (HeadlessAllows,), {"name": f"headless-allows-{tool}", "tool": tool, "summary": f"headless asks for {tool} let the call run"})


class HeadlessAllowsNoAccess(HeadlessAllows):
    name = "headless-allows-no-access-tools"
    summary = "headless asks for tools without accesses (todo, skill, tool_search) let the call run"

    def tools(self) -> tuple[str, ...]:
        return ("todo", "skill", "tool_search")


def _noncanonical(value: Any) -> bool:
    if not isinstance(value, str) or not value:
        return False
    parts = value.split("/")
    return "//" in value or any(p in (".", "..") for p in parts[:-1] + ([parts[-1]] if parts[-1] in (".", "..") else []))


def _redirect_targets(command: str) -> list[str]:
    return re.findall(r"(?:^|\s)\d*(?:>>|>|<)\s*([^\s;&|<>]+)", command)


class NoncanonicalDenyBypass(_Routed):
    """Literal deny rules are compared with the path as written: `./x`, `a/../x` and `a//x` slip past a deny of `x`."""

    tool = ""
    suffix = "n"

    def applies(self, req: dict[str, Any]) -> bool:
        if req.get("tool") != self.tool or not isinstance(req.get("args"), dict):
            return False
        args = req["args"]
        if self.tool == "bash":
            return any(_noncanonical(t) for t in _redirect_targets(str(args.get("command", ""))))
        return _noncanonical(args.get("path"))

    def manifest(self, m: dict[str, Any]) -> dict[str, Any]:
        return _rules_map(m, _drop_literal_denies)

    def project(self, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return _drop_literal_denies(rules)

    def session_rules(self, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return _drop_literal_denies(rules)


def _drop_literal_denies(rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rules if not (r.get("action") == "deny" and r.get("pattern") != "*" and not _WILD.search(_VAR.sub("", str(r.get("pattern")))))]


def _noncanonical_bypass(tool: str) -> type[Mutant]:
    return type(f"Noncanonical_{tool}", (NoncanonicalDenyBypass,), {"name": f"noncanonical-deny-bypass-{tool}", "tool": tool, "summary": f"literal denies miss non-canonical spellings of {tool}'s path"})


class PinOnlyForRead(_Routed):
    """Manifest denies are pinned for `read` only: for this tool a more specific project or session allow overrides them."""

    tool = ""
    suffix = "p"

    def applies(self, req: dict[str, Any]) -> bool:
        state = self.world.agents.get(req.get("agent", ""))
        return req.get("tool") == self.tool and state is not None and any(isinstance(r, dict) and r.get("action") == "deny" for r in state.manifest.get("rules") or [])

    def manifest(self, m: dict[str, Any]) -> dict[str, Any]:
        self._moved = [r for r in m.get("rules") or [] if isinstance(r, dict) and r.get("action") == "deny"]
        return _rules_map(m, lambda rules: [r for r in rules if r.get("action") != "deny"])

    def project(self, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return rules + getattr(self, "_moved", [])


def _pin_only_read(tool: str) -> type[Mutant]:
    return type(f"PinOnlyRead_{tool}", (PinOnlyForRead,), {"name": f"pin-only-for-read-{tool}", "tool": tool, "summary": f"manifest denies are not pinned for {tool}"})


def _exact(value: str) -> str:
    return re.sub(r"([\\*?\[\]{}])", r"\\\1", value)


class _Always(Mutant):
    """Remember an "always" answer wider than the exact subjects (ASK-3)."""

    group = "situation"

    def widen(self, tool: str, subject: str) -> tuple[str, str, str] | None:
        return None

    async def handle(self, req: dict[str, Any]) -> Any:
        entry = self.world.pending.get(req.get("ask", "")) if req.get("op") == "answer" else None
        reply = await self.send(req)
        if entry is None or req.get("choice") != "allow_always" or entry["ask"].get("layer") != "permission":
            return reply
        call = entry["call"]
        rules = [self.widen(call["tool"], s) for s in entry["ask"].get("subjects") or [] if isinstance(s, str)]
        extra = [{"permission": p, "pattern": pat, "action": a} for p, pat, a in (r for r in rules if r)]
        if extra:
            await self.remember(call, extra)
            self.fire()
        return reply

    async def remember(self, call: dict[str, Any], rules: list[dict[str, Any]]) -> None:
        await self.inject("set_rules", agent=call["agent"], scope="session", session=call["session"], mode=call["mode"], rules=rules)
        self.world.session_rules.setdefault(call["session"], []).append(rules)


class AlwaysCapabilityWide(_Always):
    name = "always-capability-wide"
    summary = "allow_always is remembered as an allow of the whole capability"

    def widen(self, tool: str, subject: str) -> tuple[str, str, str] | None:
        cap = subject.split(" ", 1)[0]
        return (cap, "*", "allow") if "." in cap else None


class AlwaysParentDirectory(_Always):
    name = "always-parent-directory"
    summary = "allow_always on a path is remembered for its whole directory"

    def widen(self, tool: str, subject: str) -> tuple[str, str, str] | None:
        cap, _, value = subject.partition(" ")
        return (tool, _exact(os.path.dirname(value)) + "/**", "allow") if cap.startswith("fs.") else None


class AlwaysProjectScope(_Always):
    name = "always-project-scope"
    summary = "allow_always is written to the project rules, so it outlives the session"

    def widen(self, tool: str, subject: str) -> tuple[str, str, str] | None:
        _cap, _, value = subject.partition(" ")
        return (tool, _exact(value) if value else "*", "allow")

    async def remember(self, call: dict[str, Any], rules: list[dict[str, Any]]) -> None:
        state = self.world.agents.get(call["agent"])
        if state is not None:
            state.project = state.project + rules
            await self.inject("set_rules", agent=call["agent"], scope="project", rules=state.project)


class _WatchdogAlways(Mutant):
    """Watchdog "always" answers remembered by a key wider than the exact call (ASK-6)."""

    group = "situation"

    def key(self, req: dict[str, Any]) -> Any:
        return None

    def __init__(self) -> None:
        super().__init__()
        self.approved: set[Any] = set()

    async def handle(self, req: dict[str, Any]) -> Any:
        if req.get("op") == "answer":
            entry = self.world.pending.get(req.get("ask", ""))
            if entry and req.get("choice") == "allow_always" and entry["ask"].get("layer") == "watchdog":
                self.approved.add(self.key(entry["call"]))
        if req.get("op") == "reset":
            self.approved.clear()
        reply = await self.send(req)
        ask = reply.get("ask") if isinstance(reply, dict) else None
        if req.get("op") == "call" and isinstance(ask, dict) and ask.get("layer") == "watchdog" and self.key(req) in self.approved:
            self.fire()
            return await self.send({"seq": req["seq"], "op": "answer", "ask": ask["id"], "choice": "allow_once"})
        return reply


class WatchdogAlwaysPerTool(_WatchdogAlways):
    name = "watchdog-always-per-tool"
    summary = "a watchdog allow_always covers every later call of the same tool in the session"

    def key(self, req: dict[str, Any]) -> Any:
        return (req.get("agent"), req.get("session"), req.get("tool"))


class WatchdogAlwaysCanonical(_WatchdogAlways):
    name = "watchdog-always-canonical-path"
    summary = "a watchdog allow_always covers every spelling of the same path"

    def key(self, req: dict[str, Any]) -> Any:
        args = dict(req.get("args") or {}) if isinstance(req.get("args"), dict) else {}
        if "path" in args:
            args["path"] = self.world.resolve(req.get("agent", ""), args["path"])
        return (req.get("agent"), req.get("session"), req.get("tool"), json.dumps(args, sort_keys=True))


def _expansions(pattern: str, bindings: dict[str, Any], workspace: str | None) -> int:
    count = 1
    for name in set(_VAR.findall(pattern)):
        if name == "workspace":
            count *= 1 if workspace else 0
        elif name == "ad-hoc":
            count *= len(bindings.get("ad-hoc") or [])
        elif name == "user-data":
            count *= 1 if bindings.get("user-data") else 0
    return count


class RuleIndexExpanded(Mutant):
    name = "rule-index-counts-expansions"
    group = "situation"
    summary = "rule_index counts the expanded patterns before the rule, not the rules as written"

    def reply(self, req: dict[str, Any], reply: Any) -> Any:
        ref = refusal(reply)
        state = self.world.agents.get(req.get("agent", ""))
        if state is None or ref.get("scope") not in ("manifest", "project") or not isinstance(ref.get("rule_index"), int):
            return reply
        rules = state.manifest.get("rules") or [] if ref["scope"] == "manifest" else state.project
        new = sum(_expansions(str(r.get("pattern", "")), state.bindings, state.workspace) for r in rules[: ref["rule_index"]] if isinstance(r, dict))
        if new != ref["rule_index"]:
            ref["rule_index"] = new
            self.fire()
        return reply


class _SessionIndex(Mutant):
    group = "situation"

    def __init__(self) -> None:
        super().__init__()
        self.order: dict[str, list[tuple[str, int]]] = {}   # session -> [(kind, count)], in the order rules were added

    def renumber(self, index: int, entries: list[tuple[str, int]]) -> int:
        return index

    async def handle(self, req: dict[str, Any]) -> Any:
        op = req.get("op")
        entry = self.world.pending.get(req.get("ask", "")) if op == "answer" else None
        reply = await self.send(req)
        ok = isinstance(reply, dict) and isinstance(reply.get("result"), dict) and "compile_error" not in reply["result"]
        if op == "reset":
            self.order.clear()
        elif op == "set_rules" and req.get("scope") == "session" and ok:
            self.order.setdefault(req["session"], []).append(("batch", len(req["rules"])))
        elif entry is not None and req.get("choice") in ("allow_always", "reject_always") and entry["ask"].get("layer") == "permission":
            self.order.setdefault(entry["call"]["session"], []).append(("always", len(entry["ask"].get("subjects") or [])))
        ref = refusal(reply)
        session = req.get("session") if op == "call" else (entry or {}).get("call", {}).get("session")
        if ref.get("scope") == "session" and isinstance(ref.get("rule_index"), int) and session:
            new = self.renumber(ref["rule_index"], self.order.get(session, []))
            if new != ref["rule_index"]:
                ref["rule_index"] = new
                self.fire()
        return reply


class RuleIndexSessionNoSidecar(_SessionIndex):
    name = "rule-index-session-without-sidecar"
    summary = "session rule indices leave out the sidecar rule at index 0"

    def renumber(self, index: int, entries: list[tuple[str, int]]) -> int:
        return max(0, index - 1)


class RuleIndexSessionPerBatch(_SessionIndex):
    name = "rule-index-session-per-batch"
    summary = "session rule indices start again with every set of rules added"

    def renumber(self, index: int, entries: list[tuple[str, int]]) -> int:
        start = 1
        for _kind, n in entries:
            if index < start + n:
                return 1 + index - start
            start += n
        return index


class RuleIndexSessionIgnoresAlways(_SessionIndex):
    name = "rule-index-session-ignores-always"
    summary = "rules made by always answers are not counted in session rule indices"

    def renumber(self, index: int, entries: list[tuple[str, int]]) -> int:
        start, skipped = 1, 0
        for kind, n in entries:
            if index < start + n:
                break
            if kind == "always":
                skipped += n
            start += n
        return index - skipped


class UnknownVariableAccepted(Mutant):
    """Rules with an unknown variable are dropped silently instead of being a compile error (VAR-2)."""

    group = "situation"
    scope = ""

    async def handle(self, req: dict[str, Any]) -> Any:
        if req.get("op") != "set_rules" or req.get("scope") != self.scope:
            return await self.send(req)
        keep = [r for r in req["rules"] if not any(v not in _KNOWN_VARS for v in _VAR.findall(str(r.get("pattern", ""))))]
        if len(keep) == len(req["rules"]):
            return await self.send(req)
        self.fire()
        reply = await self.send({**req, "rules": keep})
        return {"seq": req["seq"], "result": {}} if isinstance(reply, dict) and "result" in reply else reply


def _unknown_variable(scope: str) -> type[Mutant]:
    return type(f"UnknownVariable_{scope}", (UnknownVariableAccepted,), {"name": f"unknown-variable-accepted-{scope}", "scope": scope, "summary": f"{scope} rules with an unknown variable are accepted"})


def _bash_limit(state: Any) -> int:
    limits = state.manifest.get("limits") if state is not None else None
    value = limits.get("bash_bytes") if isinstance(limits, dict) else None
    return int(value) if isinstance(value, int) else 200 * 1024


class BashTruncatesAtLimit(Mutant):
    name = "bash-truncates-at-limit"
    group = "situation"
    summary = "bash output exactly as long as its limit is treated as cut (>= instead of >)"

    def reply(self, req: dict[str, Any], reply: Any) -> Any:
        env = envelope(reply)
        if req.get("tool") != "bash" or env is None or env.get("type") != "output" or env["metadata"].get("truncated"):
            return reply
        data = env.get("data") or {}
        output = data.get("output")
        if isinstance(output, str) and output and len(output.encode()) == _bash_limit(self.world.agents.get(req.get("agent", ""))):
            fd, path = tempfile.mkstemp(prefix="bash-output-", suffix=".txt")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(output)
            data["head"] = output
            env["metadata"].update({"truncated": True, "output_path": path})
            self.fire()
        return reply


class GrepTruncatesAtLimit(Mutant):
    name = "grep-truncates-at-limit"
    group = "situation"
    summary = "grep treats exactly grep_matches matches as past the limit (>= instead of >)"

    def reply(self, req: dict[str, Any], reply: Any) -> Any:
        env = envelope(reply)
        if req.get("tool") != "grep" or env is None or env.get("type") != "output" or env["metadata"].get("truncated"):
            return reply
        state = self.world.agents.get(req.get("agent", ""))
        limits = state.manifest.get("limits") if state else None
        limit = limits.get("grep_matches", 200) if isinstance(limits, dict) else 200
        matches = (env.get("data") or {}).get("matches") or []
        if matches and len(matches) == limit:
            lines = "".join(f"{m['path']}:{m['line']}:{m['text']}\n" for m in matches)
            fd, path = tempfile.mkstemp(prefix="grep-output-", suffix=".txt")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(lines)
            env["data"]["head"] = lines.rstrip("\n")
            env["metadata"].update({"truncated": True, "output_path": path})
            self.fire()
        return reply


class TextBoundAtLimit(Mutant):
    name = "text-bound-at-limit"
    group = "situation"
    summary = "write refuses content exactly as large as the text-size bound (>= instead of >)"

    def handle_content(self, req: dict[str, Any]) -> bool:
        state = self.world.agents.get(req.get("agent", ""))
        limits = state.manifest.get("limits") if state else None
        bound = limits.get("text_bytes", 8 << 20) if isinstance(limits, dict) else 8 << 20
        content = (req.get("args") or {}).get("content") if isinstance(req.get("args"), dict) else None
        return req.get("tool") == "write" and isinstance(content, str) and len(content.encode()) == bound

    async def handle(self, req: dict[str, Any]) -> Any:
        if req.get("op") == "call" and self.handle_content(req):
            self.fire()
            env = made_envelope("write", "edit", error=("too_large", "the content is larger than the text-size bound"))
            env["metadata"]["refusal"] = {"layer": "limit", "code": "too_large"}
            return {"seq": req["seq"], "envelope": env}
        return await self.send(req)


class BashLimitIgnored(Mutant):
    name = "bash-limit-ignored"
    group = "situation"
    summary = "the manifest's limits.bash_bytes is ignored (the default applies)"

    def request(self, req: dict[str, Any]) -> dict[str, Any]:
        m = req.get("manifest")
        if req.get("op") == "compile" and isinstance(m, dict) and isinstance(m.get("limits"), dict) and "bash_bytes" in m["limits"]:
            m = copy.deepcopy(m)
            del m["limits"]["bash_bytes"]
            self.fire()
            return {**req, "manifest": m}
        return req


class BashSidecarHoldsHead(Mutant):
    name = "bash-sidecar-holds-head"
    group = "situation"
    summary = "the sidecar of a cut bash output holds only the head, not the complete output"

    def reply(self, req: dict[str, Any], reply: Any) -> Any:
        env = envelope(reply)
        if req.get("tool") == "bash" and env is not None and env["metadata"].get("truncated") and isinstance((env.get("data") or {}).get("head"), str):
            path = env["metadata"].get("output_path")
            if isinstance(path, str) and os.path.isfile(path):
                with open(path, "w", encoding="utf-8") as fh:
                    fh.write(env["data"]["head"])
                self.fire()
        return reply


class RecompileKeepsSessions(Mutant):
    name = "recompile-keeps-sessions"
    group = "situation"
    summary = "compiling an agent again leaves its old sessions (and their sidecars) open"

    def __init__(self) -> None:
        super().__init__()
        self.alias: dict[str, str] = {}

    async def handle(self, req: dict[str, Any]) -> Any:
        if req.get("op") == "reset":
            self.alias.clear()
        out = dict(req)
        if "agent" in req:
            if req.get("op") == "compile" and req["agent"] in self.world.agents:
                self.alias[req["agent"]] = f"{req['agent']}~r{len(self.alias) + self.fired + 1}"
                self.fire()
            out["agent"] = self.alias.get(req["agent"], req["agent"])
            if "session" in req and out["agent"] != req["agent"]:
                out["session"] = f"{req['session']}~{out['agent']}"
        return await self.send(out)


class WriteCreatedIfEmpty(Mutant):
    name = "write-created-if-empty"
    group = "situation"
    summary = "write reports created: true when the file existed but was empty"

    async def handle(self, req: dict[str, Any]) -> Any:
        target = self.world.resolve(req.get("agent", ""), (req.get("args") or {}).get("path")) if req.get("tool") == "write" and isinstance(req.get("args"), dict) else None
        empty = target is not None and os.path.isfile(target) and os.path.getsize(target) == 0
        reply = await self.send(req)
        env = envelope(reply)
        if empty and env is not None and env.get("type") == "output" and (env.get("data") or {}).get("created") is False:
            env["data"]["created"] = True
            self.fire()
        return reply


def _edit_target(mutant: Mutant, req: dict[str, Any]) -> tuple[dict[str, Any], str | None] | None:
    args = req.get("args")
    if req.get("op") != "call" or req.get("tool") != "edit" or not isinstance(args, dict) or not isinstance(args.get("old_string"), str) or not args["old_string"]:
        return None
    return args, mutant.world.resolve(req.get("agent", ""), args.get("path"))


def _tool_error(tool: str, code: str, text: str) -> dict[str, Any]:
    return made_envelope(tool, KINDS.get(tool, "other"), error=(code, text))


class EditMissingBeforeNoChange(Mutant):
    name = "edit-missing-before-no-change"
    group = "situation"
    summary = "edit checks that the file exists before checking old_string == new_string"

    async def handle(self, req: dict[str, Any]) -> Any:
        got = _edit_target(self, req)
        if got and got[0].get("old_string") == got[0].get("new_string") and got[1] and not os.path.lexists(got[1]):
            self.fire()
            return {"seq": req["seq"], "envelope": _tool_error("edit", "not_found", "the file does not exist")}
        return await self.send(req)


class EditMatchBeforeNoChange(Mutant):
    name = "edit-match-before-no-change"
    group = "situation"
    summary = "edit counts occurrences before checking old_string == new_string"

    async def handle(self, req: dict[str, Any]) -> Any:
        got = _edit_target(self, req)
        if got and got[0].get("old_string") == got[0].get("new_string") and got[1] and os.path.isfile(got[1]):
            text = open(got[1], encoding="utf-8", errors="replace").read()
            n = text.count(got[0]["old_string"])
            if n == 0 or (n > 1 and not got[0].get("replace_all")):
                self.fire()
                code = "no_match" if n == 0 else "ambiguous"
                return {"seq": req["seq"], "envelope": _tool_error("edit", code, "old_string does not identify exactly one place")}
        return await self.send(req)


def _overlapping(text: str, sub: str) -> int:
    return sum(1 for i in range(len(text) - len(sub) + 1) if text.startswith(sub, i))


class EditCountsOverlapping(Mutant):
    name = "edit-counts-overlapping"
    group = "situation"
    summary = "edit counts overlapping occurrences (so 'aa' occurs twice in 'aaa')"

    async def handle(self, req: dict[str, Any]) -> Any:
        got = _edit_target(self, req)
        if not got or not got[1] or not os.path.isfile(got[1]) or got[0].get("old_string") == got[0].get("new_string"):
            return await self.send(req)
        text = open(got[1], encoding="utf-8", errors="replace").read()
        old = got[0]["old_string"]
        over, plain = _overlapping(text, old), text.count(old)
        if over == plain:
            return await self.send(req)
        self.fire()
        if not got[0].get("replace_all"):
            return {"seq": req["seq"], "envelope": _tool_error("edit", "ambiguous", "old_string occurs more than once")}
        reply = await self.send(req)
        env = envelope(reply)
        if env is not None and env.get("type") == "output":
            env["data"]["replacements"] = over
        return reply


def _read_bases(state: Any) -> list[str]:
    fs = ((state.manifest.get("requires") or {}).get("fs") or {}) if state else {}
    out = []
    for pattern in fs.get("read") or []:
        text = str(pattern).replace("{workspace}", state.workspace or "")
        if not text.startswith("/"):
            text = f"{state.workspace}/{text}"
        base = []
        for comp in text.split("/"):
            if _WILD.search(comp):
                break
            base.append(comp)
        out.append("/".join(base).rstrip("/") or "/")
    return out


def _string_prefix_only(path: str, base: str) -> bool:
    return (base.startswith(path) or path.startswith(base)) and not (base == path or base.startswith(path + "/") or path.startswith(base + "/"))


class SearchRootStringPrefix(Mutant):
    name = "search-root-string-prefix"
    group = "situation"
    summary = "a glob/grep root is proven when it is a string prefix of an fs.read base (/ws/ab for /ws/abc)"

    def reply(self, req: dict[str, Any], reply: Any) -> Any:
        tool = req.get("tool")
        if tool not in ("glob", "grep") or error_code(reply) != "out_of_scope" or refusal(reply).get("layer") != "capability":
            return reply
        state = self.world.agents.get(req.get("agent", ""))
        root = self.world.resolve(req.get("agent", ""), (req.get("args") or {}).get("path") or (state.workspace if state else None))
        if root and any(_string_prefix_only(root, base) for base in _read_bases(state)):
            self.fire()
            data = {"paths": [], "total": 0} if tool == "glob" else {"matches": [], "total": 0}
            return {"seq": req["seq"], "envelope": made_envelope(tool, "search", data=data)}
        return reply


class SearchScopeStringPrefix(Mutant):
    name = "search-scope-string-prefix"
    group = "situation"
    summary = "glob keeps results whose path merely starts with the text of an fs.read base (/ws/abc/x for /ws/ab/**)"

    def reply(self, req: dict[str, Any], reply: Any) -> Any:
        from wcmatch import glob as wcglob

        env = envelope(reply)
        if req.get("tool") != "glob" or env is None or env.get("type") != "output":
            return reply
        state = self.world.agents.get(req.get("agent", ""))
        root = self.world.resolve(req.get("agent", ""), (req.get("args") or {}).get("path") or (state.workspace if state else None))
        if not root or not os.path.isdir(root):
            return reply
        bases = _read_bases(state)
        paths = list(env["data"].get("paths") or [])
        for dirpath, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d != ".git"]
            for name in files:
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, root)
                flags = wcglob.GLOBSTAR | wcglob.DOTMATCH
                if full not in paths and os.path.isfile(full) and not os.path.islink(full) and wcglob.globmatch(rel, str(req["args"].get("pattern")), flags=flags):
                    if any(full.startswith(b) and not full.startswith(b + "/") for b in bases):
                        paths.append(full)
        if len(paths) != len(env["data"].get("paths") or []):
            paths.sort(key=lambda p: p.encode())
            env["data"]["paths"], env["data"]["total"] = paths, len(paths)
            self.fire()
        return reply


def _fold(pattern: str) -> str:
    out, i, in_class = [], 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if c == "[":
            in_class = True
        elif c == "]":
            in_class = False
        out.append(f"[{c.lower()}{c.upper()}]" if c.isalpha() and not in_class and c.lower() != c.upper() else c)
        i += 1
    return "".join(out)


class GlobCaseInsensitive(Mutant):
    name = "glob-case-insensitive"
    group = "situation"
    summary = "glob matches without regard to case"

    def request(self, req: dict[str, Any]) -> dict[str, Any]:
        args = req.get("args")
        if req.get("tool") == "glob" and isinstance(args, dict) and isinstance(args.get("pattern"), str) and _fold(args["pattern"]) != args["pattern"]:
            self.fire()
            return {**req, "args": {**args, "pattern": _fold(args["pattern"])}}
        return req


class GrepIgnoresCase(Mutant):
    name = "grep-always-ignores-case"
    group = "situation"
    summary = "grep matches without regard to case even when case_insensitive is false"

    def request(self, req: dict[str, Any]) -> dict[str, Any]:
        args = req.get("args")
        if req.get("tool") == "grep" and isinstance(args, dict) and not args.get("case_insensitive") and isinstance(args.get("pattern"), str):
            self.fire()
            return {**req, "args": {**args, "case_insensitive": True}}
        return req


class _GrepAdds(Mutant):
    """grep finds more than it should: the mutant searches extra files itself and adds their matches."""

    group = "situation"

    def extra_files(self, root: str) -> list[tuple[str, str]]:
        return []

    def reply(self, req: dict[str, Any], reply: Any) -> Any:
        env = envelope(reply)
        args = req.get("args")
        if req.get("tool") != "grep" or env is None or env.get("type") != "output" or not isinstance(args, dict):
            return reply
        state = self.world.agents.get(req.get("agent", ""))
        root = self.world.resolve(req.get("agent", ""), args.get("path") or (state.workspace if state else None))
        try:
            rx = re.compile(str(args.get("pattern")), re.IGNORECASE if args.get("case_insensitive") else 0)
        except re.error:
            return reply
        matches = list(env["data"].get("matches") or [])
        for shown, real in self.extra_files(root) if root else []:
            try:
                lines = open(real, encoding="utf-8", errors="replace").read().splitlines()
            except OSError:
                continue
            matches += [{"path": shown, "line": n, "text": line} for n, line in enumerate(lines, 1) if rx.search(line)]
        if len(matches) != len(env["data"].get("matches") or []):
            matches.sort(key=lambda m: (m["path"].encode(), m["line"]))
            env["data"]["matches"], env["data"]["total"] = matches, len(matches)
            self.fire()
        return reply


class GrepSearchesGit(_GrepAdds):
    name = "grep-searches-git"
    summary = "grep searches inside .git directories"

    def extra_files(self, root: str) -> list[tuple[str, str]]:
        out = []
        for dirpath, _dirs, files in os.walk(root):
            if ".git" in dirpath.split(os.sep):
                out += [(os.path.join(dirpath, f), os.path.join(dirpath, f)) for f in files]
        return out


class GrepFollowsSymlinks(_GrepAdds):
    name = "grep-follows-symlinks"
    summary = "grep follows symlinks to files and reports them under the link's name"

    def extra_files(self, root: str) -> list[tuple[str, str]]:
        out = []
        for dirpath, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d != ".git"]
            for f in files:
                full = os.path.join(dirpath, f)
                if os.path.islink(full) and os.path.isfile(full):
                    out.append((full, full))
        return out


class GrepKeepsLongLines(Mutant):
    name = "grep-keeps-long-lines"
    group = "situation"
    summary = "grep returns long lines whole instead of cutting them at 2000 bytes"

    def reply(self, req: dict[str, Any], reply: Any) -> Any:
        env = envelope(reply)
        if req.get("tool") != "grep" or env is None or env.get("type") != "output":
            return reply
        for m in env["data"].get("matches") or []:
            if isinstance(m.get("text"), str) and m["text"].endswith(LONG_LINE_MARK):
                try:
                    m["text"] = open(m["path"], encoding="utf-8", errors="replace").read().splitlines()[m["line"] - 1]
                    self.fire()
                except (OSError, IndexError):
                    pass
        return reply


class GrepCutsAtLimit(Mutant):
    name = "grep-cuts-lines-at-limit"
    group = "situation"
    summary = "grep cuts a line of exactly 2000 bytes (>= instead of >)"

    def reply(self, req: dict[str, Any], reply: Any) -> Any:
        env = envelope(reply)
        if req.get("tool") != "grep" or env is None or env.get("type") != "output":
            return reply
        for m in env["data"].get("matches") or []:
            if isinstance(m.get("text"), str) and len(m["text"].encode()) == LONG_LINE:
                m["text"] += LONG_LINE_MARK
                self.fire()
        return reply


class FetchStatusAsError(Mutant):
    name = "fetch-status-as-error"
    group = "situation"
    summary = "web_fetch turns a final 4xx/5xx response into an error instead of an output"

    def reply(self, req: dict[str, Any], reply: Any) -> Any:
        env = envelope(reply)
        status = (env.get("data") or {}).get("status") if env and env.get("type") == "output" else None
        if req.get("tool") == "web_fetch" and isinstance(status, int) and status >= 400:
            self.fire()
            return {"seq": req["seq"], "envelope": _tool_error("web_fetch", "http_error", "the server answered with an error status")}
        return reply


class SearchFailuresFree(Mutant):
    name = "search-failures-not-counted"
    group = "situation"
    summary = "web_search counts only successful searches toward the session's quota"

    def __init__(self) -> None:
        super().__init__()
        self.successes: dict[str, int] = {}
        self.n = 0

    async def handle(self, req: dict[str, Any]) -> Any:
        if req.get("op") == "reset":
            self.successes.clear()
        if req.get("op") != "call" or req.get("tool") != "web_search":
            return await self.send(req)
        state = self.world.agents.get(req.get("agent", ""))
        limits = state.manifest.get("limits") if state else None
        limit = limits.get("web_search_calls", 25) if isinstance(limits, dict) else 25
        if self.successes.get(req["session"], 0) >= limit:
            return {"seq": req["seq"], "envelope": _tool_error("web_search", "quota_exceeded", "this session has used its searches")}
        self.n += 1
        reply = await self.send({**req, "session": f"{req['session']}~q{self.n}"})  # a fresh count for every call
        env = envelope(reply)
        if env is not None and env.get("type") == "output":
            self.successes[req["session"]] = self.successes.get(req["session"], 0) + 1
        elif env is not None and not refusal(reply):
            self.fire()  # a failed search that a correct implementation would have counted
        return reply


class SkillCachePerAgent(Mutant):
    name = "skill-cache-per-agent"
    group = "situation"
    summary = "a loaded skill is cached per agent, so a new session sees the first session's copy"

    def __init__(self) -> None:
        super().__init__()
        self.cache: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}

    async def handle(self, req: dict[str, Any]) -> Any:
        if req.get("op") in ("reset", "compile"):
            self.cache = {k: v for k, v in self.cache.items() if req.get("op") == "compile" and k[0] != req.get("agent")}
        if req.get("op") != "call" or req.get("tool") != "skill" or not isinstance(req.get("args"), dict):
            return await self.send(req)
        key = (req["agent"], str(req["args"].get("name")))
        hit = self.cache.get(key)
        if hit is not None and hit[0] != req["session"]:
            self.fire()
            return {"seq": req["seq"], "envelope": copy.deepcopy(hit[1])}
        reply = await self.send(req)
        env = envelope(reply)
        if env is not None and env.get("type") == "output" and hit is None:
            self.cache[key] = (req["session"], copy.deepcopy(env))
        return reply


SITUATION_MUTANTS: list[type[Mutant]] = [
    *(_headless_allows(t) for t in ("read", "write", "edit", "glob", "grep", "bash", "web_fetch")),
    HeadlessAllowsNoAccess,
    *(_noncanonical_bypass(t) for t in ("read", "write", "edit", "glob", "grep", "bash")),
    *(_pin_only_read(t) for t in ("write", "edit", "glob", "grep", "bash", "web_fetch")),
    AlwaysCapabilityWide,
    AlwaysParentDirectory,
    AlwaysProjectScope,
    WatchdogAlwaysPerTool,
    WatchdogAlwaysCanonical,
    RuleIndexExpanded,
    RuleIndexSessionNoSidecar,
    RuleIndexSessionPerBatch,
    RuleIndexSessionIgnoresAlways,
    _unknown_variable("project"),
    _unknown_variable("session"),
    BashTruncatesAtLimit,
    GrepTruncatesAtLimit,
    TextBoundAtLimit,
    BashLimitIgnored,
    BashSidecarHoldsHead,
    RecompileKeepsSessions,
    WriteCreatedIfEmpty,
    EditMissingBeforeNoChange,
    EditMatchBeforeNoChange,
    EditCountsOverlapping,
    SearchRootStringPrefix,
    SearchScopeStringPrefix,
    GlobCaseInsensitive,
    GrepIgnoresCase,
    GrepSearchesGit,
    GrepFollowsSymlinks,
    GrepKeepsLongLines,
    GrepCutsAtLimit,
    FetchStatusAsError,
    SearchFailuresFree,
    SkillCachePerAgent,
]
