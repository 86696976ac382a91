"""Mutants of the envelope class: a property that holds on one envelope type, or for one tool, but not everywhere.

Each rewrites replies only: the implementation behind the proxy did the
right thing, and the envelope it reports is subtly wrong in one place.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..properties import KINDS
from .proxy import Mutant, envelope, refusal

_RULE_NUMBER = re.compile(r"#([0-9]+)")


class DurationFloat(Mutant):
    """`duration_ms` is a float on refusals of one layer (JSON `12.5`, not an integer)."""

    group = "envelope"
    layer = ""

    def reply(self, req: dict[str, Any], reply: Any) -> Any:
        env = envelope(reply)
        if env is not None and refusal(reply).get("layer") == self.layer and isinstance(env.get("metadata"), dict):
            env["metadata"]["duration_ms"] = float(env["metadata"].get("duration_ms", 0)) + 0.5
            self.fire()
        return reply


def _duration_float(layer: str) -> type[Mutant]:
    return type(f"DurationFloat_{layer}", (DurationFloat,), {"name": f"duration-float-{layer}", "layer": layer, "summary": f"duration_ms is a float on {layer} refusals"})


class DurationFloatAfterAnswer(Mutant):
    name = "duration-float-after-answer"
    group = "envelope"
    summary = "duration_ms is a float on every envelope that follows an answered ask"

    def reply(self, req: dict[str, Any], reply: Any) -> Any:
        env = envelope(reply)
        if req.get("op") == "answer" and env is not None and isinstance(env.get("metadata"), dict):
            env["metadata"]["duration_ms"] = float(env["metadata"].get("duration_ms", 0))
            self.fire()
        return reply


class DurationFloatToolError(Mutant):
    name = "duration-float-tool-error"
    group = "envelope"
    summary = "duration_ms is a float on tool errors (errors without a refusal)"

    def reply(self, req: dict[str, Any], reply: Any) -> Any:
        env = envelope(reply)
        if env is not None and env.get("type") == "error" and not refusal(reply) and isinstance(env.get("metadata"), dict):
            env["metadata"]["duration_ms"] = float(env["metadata"].get("duration_ms", 0)) + 0.25
            self.fire()
        return reply


class RefusalKind(Mutant):
    """The kind reported on one tool's refusals is wrong (the output envelopes are right)."""

    group = "envelope"
    tool = ""

    def reply(self, req: dict[str, Any], reply: Any) -> Any:
        env = envelope(reply)
        if env is not None and req.get("op") in ("call", "answer") and refusal(reply) and env.get("metadata", {}).get("tool") == self.tool:
            env["metadata"]["kind"] = "think" if KINDS[self.tool] == "other" else "other"
            self.fire()
        return reply


def _refusal_kind(tool: str) -> type[Mutant]:
    return type(f"RefusalKind_{tool}", (RefusalKind,), {"name": f"refusal-kind-{tool}", "tool": tool, "summary": f"refusals of {tool} carry the wrong kind"})


class AskSubjectAsWritten(Mutant):
    name = "ask-subject-as-written"
    group = "envelope"
    summary = "ask subjects show the path as written (joined to the workspace, not canonicalised)"

    def reply(self, req: dict[str, Any], reply: Any) -> Any:
        ask = reply.get("ask") if isinstance(reply, dict) else None
        args = req.get("args") if req.get("op") == "call" else None
        state = self.world.agents.get(req.get("agent", ""))
        if not (isinstance(ask, dict) and isinstance(args, dict) and isinstance(args.get("path"), str) and state and state.workspace):
            return reply
        raw = args["path"] if args["path"].startswith("/") else f"{state.workspace}/{args['path']}"
        subjects = ask.get("subjects") or []
        new = [f"{s.split(' ', 1)[0]} {raw}" if isinstance(s, str) and s.startswith("fs.") else s for s in subjects]
        if new != subjects:
            ask["subjects"] = new
            self.fire()
        return reply


class AskSubjectUnresolved(Mutant):
    name = "ask-subject-not-resolved"
    group = "envelope"
    summary = "ask subjects are normalised but symlinks in them are not resolved"

    def reply(self, req: dict[str, Any], reply: Any) -> Any:
        import os

        ask = reply.get("ask") if isinstance(reply, dict) else None
        args = req.get("args") if req.get("op") == "call" else None
        state = self.world.agents.get(req.get("agent", ""))
        if not (isinstance(ask, dict) and isinstance(args, dict) and isinstance(args.get("path"), str) and state and state.workspace):
            return reply
        lexical = os.path.normpath(os.path.join(state.workspace, args["path"]))
        subjects = ask.get("subjects") or []
        new = [f"{s.split(' ', 1)[0]} {lexical}" if isinstance(s, str) and s.startswith("fs.") else s for s in subjects]
        if new != subjects:
            ask["subjects"] = new
            self.fire()
        return reply


class _RuleText(Mutant):
    group = "envelope"

    def rewrite(self, text: str, ref: dict[str, Any], req: dict[str, Any]) -> str:
        return text

    def reply(self, req: dict[str, Any], reply: Any) -> Any:
        env = envelope(reply)
        ref = refusal(reply)
        if env is not None and ref.get("layer") == "permission" and isinstance(env.get("error_text"), str):
            new = self.rewrite(env["error_text"], ref, req)
            if new != env["error_text"]:
                env["error_text"] = new
                self.fire()
        return reply


class RefusalTextPattern(_RuleText):
    name = "refusal-text-names-pattern"
    summary = "a rule refusal's text quotes the deciding rule's pattern"

    def rewrite(self, text: str, ref: dict[str, Any], req: dict[str, Any]) -> str:
        rules = self._rules(ref.get("scope"), req)
        index = ref.get("rule_index")
        if isinstance(index, int) and 0 <= index < len(rules):
            return f"{text} (rule pattern {rules[index].get('pattern')})"
        return text

    def _rules(self, scope: Any, req: dict[str, Any]) -> list[dict[str, Any]]:
        session = req.get("session", "")
        if req.get("op") == "answer":
            origin = self.world.pending.get(req.get("ask", ""), {}).get("call", {})
            session = origin.get("session", "")
        agent = self.world.sessions.get(session, (req.get("agent", ""), ""))[0]
        state = self.world.agents.get(agent)
        if scope == "manifest" and state:
            return [r for r in state.manifest.get("rules") or [] if isinstance(r, dict)]
        if scope == "project" and state:
            return state.project
        if scope == "session":
            return [{"pattern": "<sidecar>"}] + [r for batch in self.world.session_rules.get(session, []) for r in batch]
        return []


class RefusalTextZeroBased(_RuleText):
    name = "refusal-text-zero-based"
    summary = "a rule refusal's text numbers rules from 0 instead of 1"

    def rewrite(self, text: str, ref: dict[str, Any], req: dict[str, Any]) -> str:
        return _RULE_NUMBER.sub(lambda m: f"#{int(m.group(1)) - 1}", text, count=1)


class RefusalTextNoScope(_RuleText):
    name = "refusal-text-no-scope"
    summary = "a rule refusal's text does not say which scope the rule came from"

    def rewrite(self, text: str, ref: dict[str, Any], req: dict[str, Any]) -> str:
        scope = ref.get("scope")
        return text.replace(str(scope), "a") if isinstance(scope, str) else text


class RefusalDropsRuleProject(Mutant):
    name = "refusal-drops-rule-for-project"
    group = "envelope"
    summary = "refusals decided by a project rule lose scope and rule_index"

    def reply(self, req: dict[str, Any], reply: Any) -> Any:
        ref = refusal(reply)
        if ref.get("scope") == "project":
            ref.pop("scope", None)
            ref.pop("rule_index", None)
            self.fire()
        return reply


class RefusalDropsAskedByWatchdog(Mutant):
    name = "refusal-drops-asked-by-watchdog"
    group = "envelope"
    summary = "ask refusals the watchdog caused lose asked_by"

    def reply(self, req: dict[str, Any], reply: Any) -> Any:
        ref = refusal(reply)
        if ref.get("layer") == "ask" and ref.get("asked_by") == "watchdog":
            del ref["asked_by"]
            self.fire()
        return reply


class _Echo(Mutant):
    group = "envelope"

    def extra(self, req: dict[str, Any], reply: Any) -> str | None:
        return None

    def reply(self, req: dict[str, Any], reply: Any) -> Any:
        env = envelope(reply)
        if env is not None and env.get("type") == "error" and req.get("op") == "call":
            extra = self.extra(req, reply)
            if extra:
                env["error_text"] = f"{env.get('error_text', '')}: {extra}"
                self.fire()
        return reply


class ToolErrorEchoesPath(_Echo):
    name = "tool-error-echoes-path"
    summary = "a file tool's own errors (not found, is a directory, ...) repeat the path argument"

    def extra(self, req: dict[str, Any], reply: Any) -> str | None:
        args = req.get("args")
        if refusal(reply) or not isinstance(args, dict) or req.get("tool") not in ("read", "write", "edit", "glob", "grep"):
            return None
        return args.get("path") if isinstance(args.get("path"), str) else None


class EditErrorEchoesOldString(_Echo):
    name = "edit-error-echoes-old-string"
    summary = "edit's no_match / ambiguous / no_change errors quote old_string"

    def extra(self, req: dict[str, Any], reply: Any) -> str | None:
        args = req.get("args")
        code = (envelope(reply) or {}).get("metadata", {}).get("error_code")
        if req.get("tool") == "edit" and code in ("no_match", "ambiguous", "no_change") and isinstance(args, dict):
            return str(args.get("old_string", ""))
        return None


class SchemaErrorEchoesValue(_Echo):
    name = "schema-error-echoes-value"
    summary = "schema refusals quote the offending argument value"

    def extra(self, req: dict[str, Any], reply: Any) -> str | None:
        if refusal(reply).get("layer") != "schema" or error_code_of(reply) != "invalid_arguments":
            return None
        return json.dumps(req.get("args"))[:400]


def error_code_of(reply: Any) -> Any:
    return (envelope(reply) or {}).get("metadata", {}).get("error_code")


class WatchdogCodeGeneric(Mutant):
    name = "watchdog-code-generic"
    group = "envelope"
    summary = "a watchdog deny always has code `watchdog`, whatever the verdict's category"

    def reply(self, req: dict[str, Any], reply: Any) -> Any:
        ref = refusal(reply)
        if ref.get("layer") == "watchdog" and ref.get("code") not in ("watchdog", "watchdog_error"):
            ref["code"] = "watchdog"
            (envelope(reply) or {})["metadata"]["error_code"] = "watchdog"
            self.fire()
        return reply


class HeadlessTextParaphrased(Mutant):
    name = "headless-text-paraphrased"
    group = "envelope"
    summary = "headless refusals of tools other than read carry a paraphrase of the fixed text"

    def reply(self, req: dict[str, Any], reply: Any) -> Any:
        env = envelope(reply)
        ref = refusal(reply)
        if env is not None and ref.get("code") == "headless" and ref.get("layer") == "ask" and req.get("tool") not in ("read", None):
            env["error_text"] = "This run is headless, so the call needing permission was not performed."
            self.fire()
        return reply


ENVELOPE_MUTANTS: list[type[Mutant]] = [
    *(_duration_float(layer) for layer in ("schema", "capability", "permission", "ask", "watchdog")),
    DurationFloatAfterAnswer,
    DurationFloatToolError,
    *(_refusal_kind(tool) for tool in KINDS),
    AskSubjectAsWritten,
    AskSubjectUnresolved,
    RefusalTextPattern,
    RefusalTextZeroBased,
    RefusalTextNoScope,
    RefusalDropsRuleProject,
    RefusalDropsAskedByWatchdog,
    ToolErrorEchoesPath,
    EditErrorEchoesOldString,
    SchemaErrorEchoesValue,
    WatchdogCodeGeneric,
    HeadlessTextParaphrased,
]
