"""Deliberately broken implementations: our engine's harness with one behaviour wrong.

They prove the suite can fail. Every case names (in `catches:`) the broken
implementations it must fail against, and a test checks both directions:
each listed one really fails the case, and each broken implementation is
caught by at least one case. Run one as a command with
`python -m conformance.broken NAME`, or in-process as `--impl broken:NAME`.
"""

from __future__ import annotations

import functools
import json
import os
import re
from typing import Any, Callable

from ..harness_agentcore import Agent, AgentcoreHarness

HEADLESS_TEXT = "Permission required but this run is headless; the call was not performed."
_KNOWN_VARS = re.compile(r"\{(?!workspace\}|ad-hoc\}|user-data\})[^{}]*\}")
_WRONG_KIND = {"read": "other", "edit": "read", "search": "other", "execute": "other", "fetch": "other", "think": "other", "other": "think"}


def _envelope(tool: str, kind: str, data: Any) -> dict[str, Any]:
    return {"type": "output", "data": data, "metadata": {"duration_ms": 0, "kind": kind, "tool": tool}}


class AlwaysAllow(AgentcoreHarness):
    """Every rule decision is `allow` (no denies, no asks)."""

    def on_session(self, session: Any) -> None:
        from ._rules import break_session

        break_session(session, "allow")


class DefaultAllow(AgentcoreHarness):
    """A subject no rule matches is allowed instead of asked (PERM-9 step 4)."""

    def on_session(self, session: Any) -> None:
        from ._rules import break_session

        break_session(session, "default-allow")


class SearchShowsAsked(AgentcoreHarness):
    """An explicit `ask` rule does not keep a path out of search results: only `deny` hides (PERM-14)."""

    def on_session(self, session: Any) -> None:
        from ._rules import break_session

        break_session(session, "anonymous-ask")


class FirstMatchWins(AgentcoreHarness):
    """The first matching rule in list order decides, not the most specific one."""

    def on_session(self, session: Any) -> None:
        from ._rules import break_session

        break_session(session, "first-match")


class TiesToAllow(AgentcoreHarness):
    """Equally specific rules resolve to the least restrictive action."""

    def on_session(self, session: Any) -> None:
        from ._rules import break_session

        break_session(session, "ties-allow")


class NoPin(AgentcoreHarness):
    """Manifest denies are not pinned: a more specific project/session allow overrides them."""

    def on_session(self, session: Any) -> None:
        from ._rules import break_session

        break_session(session, "no-pin")


class IgnoresManifestDeny(AgentcoreHarness):
    """Manifest rules with action deny are dropped when compiling."""

    def prepare_manifest(self, manifest: dict[str, Any]) -> dict[str, Any]:
        m = json.loads(json.dumps(manifest))
        if isinstance(m.get("rules"), list):
            m["rules"] = [r for r in m["rules"] if not (isinstance(r, dict) and r.get("action") == "deny")]
        return m


class AskNotDenyHeadless(AgentcoreHarness):
    """Headless sessions still put asks to a human instead of denying them."""

    def is_headless(self, mode: str) -> bool:
        return False


class NoTruncation(AgentcoreHarness):
    """Output limits from the manifest are ignored (effectively unlimited)."""

    def prepare_manifest(self, manifest: dict[str, Any]) -> dict[str, Any]:
        m = json.loads(json.dumps(manifest))
        limits = m.get("limits") if isinstance(m.get("limits"), dict) else {}
        for key in ("read_bytes", "glob_entries", "grep_matches", "bash_bytes", "web_fetch_bytes", "default_bytes", "text_bytes"):
            limits[key] = 1 << 30
        m["limits"] = limits
        return m


class IgnoresScope(AgentcoreHarness):
    """No capability check: an out-of-scope access goes on to the rules, which ask (denied headless)."""

    async def invoke(self, agent: Agent, session: Any, tool: str, args: Any) -> dict[str, Any]:
        env = await super().invoke(agent, session, tool, args)
        refusal = env.get("metadata", {}).get("refusal") or {}
        if refusal.get("layer") == "capability":
            env = {
                "type": "error",
                "error_text": HEADLESS_TEXT,
                "metadata": {**env["metadata"], "refusal": {"layer": "ask", "code": "headless"}, "error_code": "headless"},
            }
        return env


class FollowsSymlinks(AgentcoreHarness):
    """Checks the path as written and then follows symlinks out of scope (read and write)."""

    async def invoke(self, agent: Agent, session: Any, tool: str, args: Any) -> dict[str, Any]:
        if tool in ("read", "write") and isinstance(args, dict) and isinstance(args.get("path"), str) and agent.workspace:
            ws = os.path.realpath(agent.workspace)
            lexical = os.path.normpath(os.path.join(ws, args["path"]))
            real = os.path.realpath(lexical)
            if lexical.startswith(ws + os.sep) and real != lexical:
                if tool == "read" and os.path.isfile(real):
                    with open(real, encoding="utf-8", errors="replace") as fh:
                        text = fh.read()
                    n = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
                    return _envelope(tool, "read", {"path": lexical, "content": text, "start_line": 1, "end_line": n, "total_lines": n, "next_offset": None})
                if tool == "write" and isinstance(args.get("content"), str):
                    with open(real, "w", encoding="utf-8") as fh:
                        fh.write(args["content"])
                    return _envelope(tool, "edit", {"path": lexical, "bytes_written": len(args["content"].encode()), "created": False})
        return await super().invoke(agent, session, tool, args)


class SchemaThrows(AgentcoreHarness):
    """Invalid arguments raise an exception instead of ending in an error envelope."""

    async def invoke(self, agent: Agent, session: Any, tool: str, args: Any) -> dict[str, Any]:
        registry = agent.engine.catalog
        if registry.has(tool) and (not isinstance(args, dict) or any(True for _ in registry.validator(tool).iter_errors(args))):
            raise TypeError(f"{tool}() got invalid arguments")
        return await super().invoke(agent, session, tool, args)


class WrongKinds(AgentcoreHarness):
    """Reports the wrong ACP kind for every tool."""

    def describe_compile(self, compiled: Any, registry: Any) -> dict[str, Any]:
        out = super().describe_compile(compiled, registry)
        out["tools"] = {t: {"kind": _WRONG_KIND.get(v["kind"], "other")} for t, v in out["tools"].items()}
        return out

    def shape_envelope(self, tool: str, args: Any, envelope: dict[str, Any]) -> dict[str, Any]:
        meta = envelope.get("metadata", {})
        meta["kind"] = _WRONG_KIND.get(meta.get("kind", "other"), "other")
        return envelope


class EchoesValues(AgentcoreHarness):
    """Error texts repeat the call's arguments (paths, contents, secrets)."""

    def shape_envelope(self, tool: str, args: Any, envelope: dict[str, Any]) -> dict[str, Any]:
        if envelope.get("type") == "error":
            envelope["error_text"] = f"{envelope.get('error_text', '')} (arguments: {json.dumps(args)})"
        return envelope


class KeepsSidecars(AgentcoreHarness):
    """Closing a session leaves its working directory (and sidecars) behind."""

    def close_session(self, session: Any) -> None:
        session.closed = True


class WideAlways(AgentcoreHarness):
    """An "always" answer is remembered as a tool-wide allow instead of an exact rule."""

    async def op_answer(self, req: dict[str, Any]) -> dict[str, Any]:
        current = self.current
        reply = await super().op_answer(req)
        if req.get("choice") == "allow_always" and current is not None:
            session, tool, _args = current
            session.add_session_rule(tool, "*", "allow")
        return reply


class EditAmbiguousApplies(AgentcoreHarness):
    """An ambiguous edit is applied everywhere instead of being refused."""

    async def invoke(self, agent: Agent, session: Any, tool: str, args: Any) -> dict[str, Any]:
        if tool == "edit" and isinstance(args, dict) and not args.get("replace_all"):
            args = {**args, "replace_all": True}
        return await super().invoke(agent, session, tool, args)


class UnknownVariableOk(AgentcoreHarness):
    """Patterns with an unknown variable are silently dropped instead of failing the compile."""

    def prepare_manifest(self, manifest: dict[str, Any]) -> dict[str, Any]:
        def scrub(obj: Any) -> Any:
            if isinstance(obj, dict):
                if "pattern" in obj and isinstance(obj["pattern"], str) and _KNOWN_VARS.search(obj["pattern"]):
                    return None
                return {k: scrub(v) for k, v in obj.items()}
            if isinstance(obj, list):
                items = [scrub(x) for x in obj]
                return [x for x in items if x is not None and not (isinstance(x, str) and _KNOWN_VARS.search(x))]
            return obj

        return scrub(json.loads(json.dumps(manifest)))


class InventsAnswers(AgentcoreHarness):
    """`question` is answered with the first option (or "yes") without asking anyone."""

    async def invoke(self, agent: Agent, session: Any, tool: str, args: Any) -> dict[str, Any]:
        if tool == "question" and isinstance(args, dict) and isinstance(args.get("questions"), list):
            answers = []
            for q in args["questions"]:
                opts = q.get("options") or [{"label": "yes"}]
                answers.append([opts[0].get("label", "yes")])
            return _envelope(tool, "other", {"answers": answers})
        return await super().invoke(agent, session, tool, args)


class IgnoresWatchdog(AgentcoreHarness):
    """The host's watchdog is never consulted."""

    def make_watchdog(self, spec: dict[str, Any] | None, compiled: Any) -> Any:
        from agentcore.api import AllowAllWatchdog

        return AllowAllWatchdog()


_SED_AWK = frozenset({"sed", "gsed", "awk", "gawk", "mawk", "nawk"})
# Programs WDOG-14 added to the table: the short table below forgets them.
_WDOG14 = frozenset({"sort", "split", "sdiff", "diff3", "cmake", "sqlite3", "psql", "mysql", "m4", "dc", "cargo",
                     "pip", "pytest", "gcc", "x86_64-linux-gnu-gcc-12", "go", "docker", "ninja", "mvn"})


def _skim(argv: list[str]) -> bool:
    """The pre-revision-3 word scan: does the sed/awk text look like it runs or writes?"""
    text = "\n".join(a for a in argv[1:] if not a.startswith("-"))
    if argv[0].endswith("sed"):
        return bool(re.search(r"(?:^|[;\n{])\s*[0-9$/,!]*\s*[ewW]\b|/[gpI0-9]*[ewW](?:\s|$)", text))
    return bool(re.search(r"system\s*\(|\|\s*\"|\|\s*getline|print[^;{}\n]*>\s*\"(?!/dev/std)", text))


class _AlteredWatchdog:
    """The default watchdog, except for the bash calls `decide` answers itself ("allow", "deny" or None)."""

    def __init__(self, inner: Any, decide: Callable[[list[list[str]]], str | None]) -> None:
        self._inner, self._decide = inner, decide

    async def review(self, call: Any) -> Any:
        from agentcore.api import Verdict

        cmds = [list(c.argv) for c in (call.commands or ())]
        answer = self._decide(cmds) if call.tool == "bash" and cmds else None
        if answer == "allow":
            return Verdict.allow()
        if answer == "deny":
            return Verdict("deny", "arbitrary code execution: a stream editor", "code_execution_wrapper")
        return await self._inner.review(call)


def _altered(compiled: Any, decide: Callable[[list[list[str]]], str | None]) -> Any:
    from agentcore.watchdog.default import default_watchdog_for

    return _AlteredWatchdog(default_watchdog_for(compiled), decide)


def _sed_awk(cmds: list[list[str]]) -> list[list[str]]:
    return [c for c in cmds if c and c[0].rsplit("/", 1)[-1] in _SED_AWK]


def _sed_awk_skimmed(cmds: list[list[str]]) -> str | None:
    progs = _sed_awk(cmds)
    return "allow" if progs and not any(_skim(c) for c in progs) else None


def _sed_awk_refused(cmds: list[list[str]]) -> str | None:
    return "deny" if _sed_awk(cmds) else None


def _forgets_wdog14(cmds: list[list[str]]) -> str | None:
    return "allow" if any(c and c[0].rsplit("/", 1)[-1] in _WDOG14 for c in cmds) else None


class SkimsScripts(AgentcoreHarness):
    """sed scripts and awk programs are scanned for words instead of read with their grammars, so a label
    followed by `w`, `system` split by a continuation or a `}` in a string hides the danger."""

    def make_watchdog(self, spec: dict[str, Any] | None, compiled: Any) -> Any:
        return super().make_watchdog(spec, compiled) if spec else _altered(compiled, _sed_awk_skimmed)


class RefusesScripts(AgentcoreHarness):
    """Every sed and awk call is refused: safe, but ordinary one-liners no longer work."""

    def make_watchdog(self, spec: dict[str, Any] | None, compiled: Any) -> Any:
        return super().make_watchdog(spec, compiled) if spec else _altered(compiled, _sed_awk_refused)


class ShortProgramTable(AgentcoreHarness):
    """The default watchdog without WDOG-14's programs: sort/split hooks, REPLs, build tools pass."""

    def make_watchdog(self, spec: dict[str, Any] | None, compiled: Any) -> Any:
        return super().make_watchdog(spec, compiled) if spec else _altered(compiled, _forgets_wdog14)


class GlobSkipsHidden(AgentcoreHarness):
    """Search results leave out hidden files (names starting with a dot)."""

    def shape_envelope(self, tool: str, args: Any, envelope: dict[str, Any]) -> dict[str, Any]:
        data = envelope.get("data")
        if tool == "glob" and isinstance(data, dict) and isinstance(data.get("paths"), list):
            keep = [p for p in data["paths"] if not any(part.startswith(".") for part in p.split("/"))]
            data["total"] = data.get("total", 0) - (len(data["paths"]) - len(keep))
            data["paths"] = keep
        return envelope


class UnsortedResults(AgentcoreHarness):
    """Search results come back in reverse order."""

    def shape_envelope(self, tool: str, args: Any, envelope: dict[str, Any]) -> dict[str, Any]:
        data = envelope.get("data")
        if isinstance(data, dict):
            for key in ("paths", "matches"):
                if isinstance(data.get(key), list):
                    data[key] = list(reversed(data[key]))
        return envelope


class RelativePaths(AgentcoreHarness):
    """Paths in results are given relative to the workspace instead of absolute."""

    def shape_envelope(self, tool: str, args: Any, envelope: dict[str, Any]) -> dict[str, Any]:
        data = envelope.get("data")
        if isinstance(data, dict) and isinstance(data.get("path"), str):
            data["path"] = os.path.basename(data["path"])
        if isinstance(data, dict) and isinstance(data.get("paths"), list):
            data["paths"] = [os.path.basename(p) for p in data["paths"]]
        return envelope


class WritesProtected(AgentcoreHarness):
    """Writes to protected files (shell rc files, .git/hooks, ...) go through when fs.write covers them."""

    async def invoke(self, agent: Agent, session: Any, tool: str, args: Any) -> dict[str, Any]:
        env = await super().invoke(agent, session, tool, args)
        if tool == "write" and env.get("metadata", {}).get("error_code") == "protected" and agent.workspace:
            target = os.path.join(os.path.realpath(agent.workspace), args["path"])
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "w", encoding="utf-8") as fh:
                fh.write(args["content"])
            return _envelope(tool, "edit", {"path": target, "bytes_written": len(args["content"].encode()), "created": True})
        return env


class _CompiledWithout(AgentcoreHarness):
    """Compiles with one of the manifest compiler's rule-5 collectors (`hidden`) finding nothing."""

    hidden = ""

    async def op_compile(self, req: dict[str, Any]) -> dict[str, Any]:
        from agentcore.manifest import compiled

        real = getattr(compiled, self.hidden)
        setattr(compiled, self.hidden, lambda *_args: ())
        try:
            return await super().op_compile(req)
        finally:
            setattr(compiled, self.hidden, real)


class SubagentsUnprotected(_CompiledWithout):
    """Only the agent's own manifest is protected, not the subagent manifests its `agents` map names."""

    hidden = "agent_files"


class SkillsUnprotected(_CompiledWithout):
    """The skill directories of `skills.paths` are writable like any other path of fs.write (ENV-7 rule 5)."""

    hidden = "skill_files"


class ToolsGrantScope(AgentcoreHarness):
    """Enabling a file tool silently grants the whole workspace (the reading LOCK-5 rejects)."""

    def prepare_manifest(self, manifest: dict[str, Any]) -> dict[str, Any]:
        m = json.loads(json.dumps(manifest))
        tools = set(m.get("tools") or [])
        req = m.setdefault("requires", {})
        fs = req.setdefault("fs", {})
        if tools & {"read", "edit", "glob", "grep"}:
            fs["read"] = list(fs.get("read", [])) + ["{workspace}/**"]
        if tools & {"write", "edit"}:
            fs["write"] = list(fs.get("write", [])) + ["{workspace}/**"]
        return m


class LenientCompile(AgentcoreHarness):
    """A manifest that does not compile is accepted anyway, with nothing granted."""

    async def op_compile(self, req: dict[str, Any]) -> dict[str, Any]:
        reply = await super().op_compile(req)
        if "compile_error" in reply.get("result", {}):
            m = req.get("manifest") if isinstance(req.get("manifest"), dict) else {}
            tools = [t for t in m.get("tools", []) if isinstance(t, str)] if isinstance(m.get("tools"), list) else []
            fallback = {"name": str(m.get("name") or "lenient"), "tools": [t for t in tools if _is_registered(t)]}
            reply = await super().op_compile({**req, "manifest": fallback})
        return reply

    async def op_set_rules(self, req: dict[str, Any]) -> dict[str, Any]:
        reply = await super().op_set_rules(req)
        if "compile_error" in reply.get("result", {}):
            return {"result": {}}
        return reply


class McpRequiresIgnored(AgentcoreHarness):
    """The `requires` of MCP servers are left out of the effective set (MCP-4, CAP-1)."""

    def prepare_manifest(self, manifest: dict[str, Any]) -> dict[str, Any]:
        servers = manifest.get("mcp")
        if not isinstance(servers, dict):
            return manifest
        stripped = {k: {kk: vv for kk, vv in v.items() if kk != "requires"} if isinstance(v, dict) else v for k, v in servers.items()}
        return {**manifest, "mcp": stripped}


def _is_registered(tool: str) -> bool:
    from agentcore.api import default_catalog

    return default_catalog().has(tool)


class AllToolsEnabled(AgentcoreHarness):
    """Every locked tool is callable whatever the manifest's `tools` list says."""

    def prepare_manifest(self, manifest: dict[str, Any]) -> dict[str, Any]:
        from agentcore.api import LOCKED_IDS

        m = json.loads(json.dumps(manifest))
        listed = list(m.get("tools") or [])
        m["tools"] = listed + [t for t in LOCKED_IDS if t not in listed]
        return m


class SloppyWindows(AgentcoreHarness):
    """`read` ignores its line and byte windows and returns the whole file."""

    async def invoke(self, agent: Agent, session: Any, tool: str, args: Any) -> dict[str, Any]:
        if tool == "read" and isinstance(args, dict) and isinstance(args.get("path"), str):
            args = {"path": args["path"]}
        return await super().invoke(agent, session, tool, args)


class NormalisesText(AgentcoreHarness):
    """Text is normalised: CRLF becomes LF on read and on write."""

    async def invoke(self, agent: Agent, session: Any, tool: str, args: Any) -> dict[str, Any]:
        if tool in ("write", "edit") and isinstance(args, dict):
            args = {k: (v.replace("\r\n", "\n") if isinstance(v, str) and k in ("content", "new_string") else v) for k, v in args.items()}
        env = await super().invoke(agent, session, tool, args)
        data = env.get("data")
        if tool == "read" and isinstance(data, dict) and isinstance(data.get("content"), str):
            data["content"] = data["content"].replace("\r\n", "\n")
        return env


class ModeReset(AgentcoreHarness):
    """Writes and edits leave the file with mode 0644 whatever it had."""

    async def invoke(self, agent: Agent, session: Any, tool: str, args: Any) -> dict[str, Any]:
        env = await super().invoke(agent, session, tool, args)
        data = env.get("data")
        if tool in ("write", "edit") and env.get("type") == "output" and isinstance(data, dict) and isinstance(data.get("path"), str):
            os.chmod(data["path"], 0o644)
        return env


class LooseEnvelope(AgentcoreHarness):
    """Envelopes with extra keys, a float duration, `truncated: false`, and refusals that lose their rule."""

    def shape_envelope(self, tool: str, args: Any, envelope: dict[str, Any]) -> dict[str, Any]:
        env = dict(envelope)
        env["ok"] = env.get("type") == "output"
        meta = dict(env.get("metadata", {}))
        meta["duration_ms"] = float(meta.get("duration_ms", 0)) + 0.5
        meta.setdefault("truncated", False)
        refusal = meta.get("refusal")
        if isinstance(refusal, dict):
            meta["refusal"] = {"layer": refusal.get("layer"), "code": refusal.get("code")}
        elif env.get("type") == "error":
            meta["refusal"] = {"layer": "tool", "code": meta.get("error_code")}
        env["metadata"] = meta
        return env


class PersistsAlways(AgentcoreHarness):
    """"Always" answers outlive their session: every later session of the agent starts with them."""

    def __init__(self) -> None:
        super().__init__()
        self._remembered: list[tuple[str, str, str]] = []

    def on_session(self, session: Any) -> None:
        for rule in self._remembered:
            session.add_session_rule(*rule)

    async def op_answer(self, req: dict[str, Any]) -> dict[str, Any]:
        current = self.current
        reply = await super().op_answer(req)
        if req.get("choice") in ("allow_always", "reject_always") and current is not None:
            session, tool, _args = current
            for rule in session.session_rules:
                if rule.rule.scope == "session" and rule.rule.permission == tool:
                    self._remembered.append((rule.rule.permission, rule.rule.pattern, rule.rule.action))
        return reply


class GrepZeroBased(AgentcoreHarness):
    """`grep` reports 0-based line numbers."""

    def shape_envelope(self, tool: str, args: Any, envelope: dict[str, Any]) -> dict[str, Any]:
        data = envelope.get("data")
        if tool == "grep" and isinstance(data, dict) and isinstance(data.get("matches"), list):
            for m in data["matches"]:
                if isinstance(m, dict) and isinstance(m.get("line"), int):
                    m["line"] -= 1
        return envelope


class LastWinsKeys(AgentcoreHarness):
    """Manifest files are read by a plain parser: of two equal keys the last silently wins, aliases expand."""

    def manifest_file(self, text: str, fmt: str) -> tuple[str, str]:
        import yaml

        try:
            data = yaml.safe_load(text)  # JSON is YAML; duplicate keys keep the last value
        except yaml.YAMLError:
            return text, fmt
        return json.dumps(data, default=str), "json"


class UnboundedNumbers(AgentcoreHarness):
    """Manifest files may give a limit or timeout as YAML's `.inf`: read as the largest number there is (REQ-14)."""

    def manifest_file(self, text: str, fmt: str) -> tuple[str, str]:
        import math

        import yaml

        def finite(value: Any) -> Any:
            if isinstance(value, float) and not math.isfinite(value):
                return 1e300  # an implementation that clamps instead of refusing: as good as no bound
            if isinstance(value, dict):
                return {k: finite(v) for k, v in value.items()}
            if isinstance(value, list):
                return [finite(v) for v in value]
            return value

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError:
            return text, fmt
        return json.dumps(finite(data), default=str), "json"


class UncappedSidecars(AgentcoreHarness):
    """Sidecars take every byte of an output: the sidecar caps of the manifest are ignored (TRUNC-9)."""

    def prepare_manifest(self, manifest: dict[str, Any]) -> dict[str, Any]:
        m = json.loads(json.dumps(manifest))
        if isinstance(m.get("limits"), dict):
            m["limits"] = {k: v for k, v in m["limits"].items() if k not in ("sidecar_bytes", "session_sidecar_bytes")}
        return m


class SkillIndexUnbounded(AgentcoreHarness):
    """The skill index takes every skill in every entry of its directories: no 256-skill or 4,096-entry cap (SKILL-1)."""

    async def op_call(self, req: dict[str, Any]) -> dict[str, Any]:
        from agentcore.tools import skill

        caps = skill.MAX_SKILLS, skill.MAX_FOLDERS
        skill.MAX_SKILLS = skill.MAX_FOLDERS = 10**9
        try:
            return await super().op_call(req)
        finally:
            skill.MAX_SKILLS, skill.MAX_FOLDERS = caps


class SearchShowsSecrets(AgentcoreHarness):
    """glob and grep show what the watchdog would ask about before a `read` (its answer for paths is ignored)."""

    def make_watchdog(self, spec: dict[str, Any] | None, compiled: Any) -> Any:
        if spec is not None:
            return super().make_watchdog(spec, compiled)
        from agentcore.api import OPEN_SCREEN
        from agentcore.watchdog.default import default_watchdog_for

        dog = default_watchdog_for(compiled)
        dog.read_screen = lambda manifest: OPEN_SCREEN  # type: ignore[method-assign]  # review unchanged, screen ignored
        return dog


class NoSandbox(AgentcoreHarness):
    """Commands run without OS confinement (environment `none` forced)."""

    def prepare_manifest(self, manifest: dict[str, Any]) -> dict[str, Any]:
        return {**manifest, "environment": "none"}


class WholeRootVisible(AgentcoreHarness):
    """The sandbox shows the whole host root read-only whatever fs.read says (`sandbox.view: full` forced)."""

    def prepare_manifest(self, manifest: dict[str, Any]) -> dict[str, Any]:
        return {**manifest, "sandbox": {"view": "full"}}


class FollowsHardLinks(AgentcoreHarness):
    """Proves the path and ignores its link count: read, write and edit go through a file's other names."""

    async def invoke(self, agent: Agent, session: Any, tool: str, args: Any) -> dict[str, Any]:
        env = await super().invoke(agent, session, tool, args)
        if (env.get("metadata") or {}).get("error_code") != "hard_link" or not agent.workspace:
            return env
        path = os.path.join(os.path.realpath(agent.workspace), str(args.get("path", "")))
        if tool == "read":
            with open(path, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
            n = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
            return _envelope(tool, "read", {"path": path, "content": text, "start_line": 1, "end_line": n, "total_lines": n, "next_offset": None})
        if tool == "write" and isinstance(args.get("content"), str):
            with open(path, "w", encoding="utf-8") as fh:  # in place: through every name of the inode
                fh.write(args["content"])
            return _envelope(tool, "edit", {"path": path, "bytes_written": len(args["content"].encode()), "created": False})
        return env


class UnpinnedDenies(AgentcoreHarness):
    """The sandbox masks read-denied paths but pins no directory: renaming a parent carries a denied
    file away from its mask, and the next call reads it under the new name."""

    async def invoke(self, agent: Agent, session: Any, tool: str, args: Any) -> dict[str, Any]:
        if tool == "bash":
            env, _policy = agent.engine.environment()
            if not getattr(env, "unpinned", False):
                agent.engine._environment = _unpinned_bwrap()()
        return await super().invoke(agent, session, tool, args)


@functools.lru_cache(maxsize=1)
def _unpinned_bwrap() -> type:
    from agentcore.environments.bwrap import BwrapEnvironment

    class Unpinned(BwrapEnvironment):
        unpinned = True

        def _assemble(self, argv: Any, policy: Any, plan: Any, filter_fd: str, channel_fd: str) -> list[str]:
            roots = {os.path.realpath(r) for r in policy.write_roots}
            args = list(plan.args)
            kept: list[str] = []
            i = 0
            while i < len(args):
                # A pin is `--bind D D` (`--bind-fd FD D` once anchored) for a directory D inside a write root; drop it.
                pin = args[i] == "--bind-fd" or (args[i] == "--bind" and i + 2 < len(args) and args[i + 1] == args[i + 2])
                if pin and i + 2 < len(args) and args[i + 2] not in roots:
                    i += 3
                    continue
                kept.append(args[i])
                i += 1
            return super()._assemble(argv, policy, type(plan)(args=tuple(kept), placeholders=plan.placeholders), filter_fd, channel_fd)

    return Unpinned



class NoSweep(AgentcoreHarness):
    """Protected files a sandboxed command creates are left where it made them (no sweep after the command)."""

    async def invoke(self, agent: Agent, session: Any, tool: str, args: Any) -> dict[str, Any]:
        from agentcore.environments import callguard, guard

        real = callguard.finish
        callguard.finish = lambda prepared: guard.SweepReport()  # type: ignore[assignment]
        try:
            return await super().invoke(agent, session, tool, args)
        finally:
            callguard.finish = real  # type: ignore[assignment]


class IgnoresWalkLimits(AgentcoreHarness):
    """The per-call walk ignores the manifest's `limits.walk_entries` and `limits.walk_depth` (its defaults apply)."""

    async def invoke(self, agent: Agent, session: Any, tool: str, args: Any) -> dict[str, Any]:
        from agentcore.environments import calltree

        real = calltree.bounded_scan
        calltree.bounded_scan = lambda limits, *a, **k: calltree.scan(*a, **k)  # type: ignore[assignment]
        try:
            return await super().invoke(agent, session, tool, args)
        finally:
            calltree.bounded_scan = real  # type: ignore[assignment]


class UnsafeGit(AgentcoreHarness):
    """Sandboxed git reads the repository's configuration as it is (no git variables, no overrides)."""

    async def invoke(self, agent: Agent, session: Any, tool: str, args: Any) -> dict[str, Any]:
        import dataclasses

        from agentcore.environments import callguard

        real = callguard.prepare

        def prepare(policy: Any, roots: Any) -> Any:
            got = real(policy, roots)
            env = {k: v for k, v in got.policy.env.items() if not k.startswith("GIT_") and k not in ("PAGER", "SSH_ASKPASS")}
            return dataclasses.replace(got, policy=dataclasses.replace(got.policy, env=env))

        callguard.prepare = prepare  # type: ignore[assignment]
        try:
            return await super().invoke(agent, session, tool, args)
        finally:
            callguard.prepare = real  # type: ignore[assignment]


def _naive_fetch(url: str) -> dict[str, Any]:
    """What a careless web_fetch does: urllib, redirects followed anywhere (its own limit), no bounds, no conversion."""
    import urllib.error
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        try:
            resp = opener.open(url, timeout=10)
        except urllib.error.HTTPError as exc:
            resp = exc  # an HTTP error status is still a response
        with resp:
            body = resp.read()
            data = {"url": resp.geturl(), "status": resp.status, "content_type": resp.headers.get("Content-Type", ""),
                    "content": body.decode("utf-8", "replace")}
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return {"type": "error", "error_text": f"fetch failed: {type(exc).__name__}",
                "metadata": {"duration_ms": 0, "kind": "fetch", "tool": "web_fetch", "error_code": "http_error"}}
    return _envelope("web_fetch", "fetch", data)


def _tool_error(envelope: dict[str, Any]) -> str | None:
    """The error code of an execution-time failure (not a refusal by a layer before execution)."""
    meta = envelope.get("metadata") or {}
    if envelope.get("type") != "error" or "refusal" in meta:
        return None
    return meta.get("error_code")


class NoSearchQuota(AgentcoreHarness):
    """web_search never runs out: the per-session budget is not counted (SRCH-3)."""

    def on_session(self, session: Any) -> None:
        from agentcore.session import SessionStores

        class _Uncounted(SessionStores):
            def __setattr__(self, name: str, value: Any) -> None:
                if name != "web_search_calls":  # every increment is lost
                    super().__setattr__(name, value)

        session.stores = _Uncounted()

class SearchQueryInBytes(AgentcoreHarness):
    """web_search counts the query's limit in UTF-8 bytes, not characters (SRCH-4): a long non-ASCII query is refused."""

    async def invoke(self, agent: Agent, session: Any, tool: str, args: Any) -> dict[str, Any]:
        query = args.get("query") if tool == "web_search" and isinstance(args, dict) else None
        if isinstance(query, str) and len(query.encode("utf-8", "surrogatepass")) > 2000:
            return {"type": "error", "error_text": "the query is longer than 2000 characters",
                    "metadata": {"duration_ms": 0, "kind": "fetch", "tool": "web_search", "error_code": "invalid_arguments"}}
        return await super().invoke(agent, session, tool, args)


class RedirectsUnchecked(AgentcoreHarness):
    """web_fetch follows redirects wherever they lead, as often as its HTTP library allows, without asking the rules again."""

    def shape_envelope(self, tool: str, args: Any, envelope: dict[str, Any]) -> dict[str, Any]:
        if tool == "web_fetch" and _tool_error(envelope) in ("host_not_allowed", "redirect_refused", "too_many_redirects", "forbidden_address"):
            return _naive_fetch(str(args.get("url", "")))
        return envelope


class NoDownloadLimit(AgentcoreHarness):
    """web_fetch downloads bodies of any size and any media type."""

    def shape_envelope(self, tool: str, args: Any, envelope: dict[str, Any]) -> dict[str, Any]:
        if tool == "web_fetch" and _tool_error(envelope) in ("too_large", "binary_content"):
            return _naive_fetch(str(args.get("url", "")))
        return envelope


class RawHtml(AgentcoreHarness):
    """web_fetch returns the page as sent (HTML not converted, scripts and styles kept)."""

    def shape_envelope(self, tool: str, args: Any, envelope: dict[str, Any]) -> dict[str, Any]:
        if tool == "web_fetch" and envelope.get("type") == "output":
            fetched = _naive_fetch(str(args.get("url", "")))
            if fetched.get("type") == "output":
                envelope["data"]["content"] = fetched["data"]["content"]
        return envelope

BROKEN: dict[str, type[AgentcoreHarness]] = {
    "always-allow": AlwaysAllow,
    "default-allow": DefaultAllow,
    "search-shows-asked": SearchShowsAsked,
    "first-match-wins": FirstMatchWins,
    "ties-to-allow": TiesToAllow,
    "no-pin": NoPin,
    "ignores-manifest-deny": IgnoresManifestDeny,
    "ask-not-deny-headless": AskNotDenyHeadless,
    "no-truncation": NoTruncation,
    "ignores-scope": IgnoresScope,
    "follows-symlinks": FollowsSymlinks,
    "schema-throws": SchemaThrows,
    "wrong-kinds": WrongKinds,
    "echoes-values": EchoesValues,
    "keeps-sidecars": KeepsSidecars,
    "wide-always": WideAlways,
    "edit-ambiguous-applies": EditAmbiguousApplies,
    "unknown-variable-ok": UnknownVariableOk,
    "invents-answers": InventsAnswers,
    "ignores-watchdog": IgnoresWatchdog,
    "skims-scripts": SkimsScripts,
    "refuses-scripts": RefusesScripts,
    "short-program-table": ShortProgramTable,
    "glob-skips-hidden": GlobSkipsHidden,
    "unsorted-results": UnsortedResults,
    "relative-paths": RelativePaths,
    "writes-protected": WritesProtected,
    "subagents-unprotected": SubagentsUnprotected,
    "skills-unprotected": SkillsUnprotected,
    "tools-grant-scope": ToolsGrantScope,
    "lenient-compile": LenientCompile,
    "mcp-requires-ignored": McpRequiresIgnored,
    "all-tools-enabled": AllToolsEnabled,
    "sloppy-windows": SloppyWindows,
    "normalises-text": NormalisesText,
    "mode-reset": ModeReset,
    "loose-envelope": LooseEnvelope,
    "persists-always": PersistsAlways,
    "grep-zero-based": GrepZeroBased,
    "no-sandbox": NoSandbox,
    "whole-root-visible": WholeRootVisible,
    "follows-hard-links": FollowsHardLinks,
    "unpinned-denies": UnpinnedDenies,
    "no-sweep": NoSweep,
    "ignores-walk-limits": IgnoresWalkLimits,
    "unsafe-git": UnsafeGit,
    "redirects-unchecked": RedirectsUnchecked,
    "no-download-limit": NoDownloadLimit,
    "raw-html": RawHtml,
    "no-search-quota": NoSearchQuota,
    "search-query-in-bytes": SearchQueryInBytes,
    "last-wins-keys": LastWinsKeys,
    "uncapped-sidecars": UncappedSidecars,
    "unbounded-numbers": UnboundedNumbers,
    "search-shows-secrets": SearchShowsSecrets,
    "skill-index-unbounded": SkillIndexUnbounded,
}


def broken_harness(name: str) -> Callable[[], Any]:
    """The harness class of a broken implementation, or of a protocol fault (see faults.py)."""
    from .faults import FAULTS

    cls = BROKEN.get(name) or FAULTS.get(name)
    if cls is None:
        raise ValueError(f"unknown broken implementation {name!r}; known: {', '.join(sorted(BROKEN) + sorted(FAULTS))}")

    class Named(cls):  # type: ignore[misc, valid-type]
        pass

    Named.name = f"agentcore-broken-{name}"
    Named.__name__ = cls.__name__
    return Named
