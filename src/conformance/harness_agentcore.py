"""The harness for our own engine: protocol operations -> `agentcore` API calls.

Runs in-process (the runner's default) or as a command:
`python -m conformance.harness_agentcore`. A call that reaches the ask
broker is suspended: the engine call keeps running in a task while the
harness replies `{"ask": ...}`, and resumes when the runner sends `answer`.

The class exposes small hooks (`prepare_manifest`, `describe_compile`,
`invoke`, `shape_envelope`, `is_headless`, ...) so the deliberately broken
implementations in `conformance.broken` can each change one behaviour.
"""

from __future__ import annotations

import itertools
import json
import shutil
import sys
import tempfile
import traceback
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import anyio
from anyio.abc import TaskGroup

from . import SPEC_REVISION
from .protocol import ANSWERS, CHOICES, MODES, SCOPES, error_reply, hello, serve_stdio

NON_TOOL_FEATURES: tuple[str, ...] = (
    "manifest",           # compile validates manifests (compile errors), SPEC sections 5-9 and 16
    "capability",         # the capability check (CAP)
    "rules",              # permission rules and ask resolution (PERM, ASK)
    "envelope.extensions",  # metadata.tool, kind, error_code and refusal (ENVL-2, ENVL-4, ENVL-5)
    "compile.describe",   # compile replies carry `effective` and `tools`
    "interactive",        # asks are put to the runner and answered with `answer`
    "rules.project",      # set_rules scope=project
    "rules.session",      # set_rules scope=session
    "watchdog.host",      # compile accepts a scripted host watchdog
    "bindings",           # compile accepts {ad-hoc} and {user-data} bindings
    "limits",             # manifest `limits` are honoured
    "symlinks",           # workspaces may contain symlinks
    "hardlinks",          # workspaces may contain hard links
    "fixture.http",       # web_fetch reaches the runner's loopback servers (listed by literal address)
    "manifest.text",      # compile accepts the manifest file's exact text (manifest_text)
    "mcp",                # compile accepts the manifest's `mcp:` block (MCP-1, MCP-4)
)


# -- scripted host watchdog (WDOG-9: a host may install its own) --------------------------


@dataclass
class ScriptedWatchdog:
    """Verdicts by tool id, as the runner scripted them; `*` matches every tool."""

    verdicts: Sequence[dict[str, Any]]

    async def review(self, call: Any) -> Any:
        from agentcore.api import Verdict

        for v in self.verdicts:
            if v.get("tool", "*") in ("*", call.tool):
                action = v.get("action", "allow")
                if action == "raise":  # a watchdog that fails (WDOG-3)
                    raise RuntimeError("scripted watchdog failure")
                return Verdict(action, v.get("reason", ""), v.get("category", "host"))
        return Verdict.allow()

    def read_screen(self, manifest: Any) -> Any:
        """What a search withholds (WDOG-17): everything when a `read` would not be allowed, else nothing."""
        from agentcore.api import CLOSED_SCREEN, OPEN_SCREEN

        for v in self.verdicts:
            if v.get("tool", "*") in ("*", "read"):
                return OPEN_SCREEN if v.get("action", "allow") == "allow" else CLOSED_SCREEN
        return OPEN_SCREEN


# -- suspension of calls that ask ---------------------------------------------------------


@dataclass
class Flight:
    """One engine call in progress; it may be waiting for an answer."""

    events_send: Any
    events_recv: Any
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    answers: dict[str, tuple[Any, str]] = field(default_factory=dict)


class SuspendingBroker:
    """An interactive broker whose questions go to the runner as `ask` replies."""

    name = "conformance-runner"
    headless = False

    def __init__(self, harness: "AgentcoreHarness") -> None:
        self._h = harness

    async def ask(self, request: Any) -> str:
        got = await self._h.suspend(
            {
                "type": "permission",
                "tool": request.tool,
                "kind": request.kind,
                "layer": request.layer,
                "title": request.title,
                "subjects": [s.describe() for s in request.subjects],
                "always": request.always_label(),
                "options": list(CHOICES),
            },
            expect="choice",
        )
        return got if got in ANSWERS else "cancelled"

    async def question(self, questions: Sequence[dict[str, Any]]) -> list[list[str]] | None:
        got = await self._h.suspend({"type": "question", "questions": list(questions)}, expect="answers")
        return got if isinstance(got, list) else None


# -- the harness ---------------------------------------------------------------------------


@dataclass
class Agent:
    """An agent the runner compiled under a name: its engine and manifest, the project rules last set, its workspace."""

    engine: Any
    manifest: Any
    project_rules: tuple[Any, ...] = ()
    workspace: Path | None = None


@dataclass
class SessionSlot:
    """A session the runner named: the agent it belongs to and the mode it was opened in (fixed from then on, ASK-9)."""

    agent: str
    session: Any
    mode: str


class HarnessError(Exception):
    """A request the harness cannot carry out (bad fields, unknown names)."""


_PROBED: dict[str, bool] | None = None


class AgentcoreHarness:
    name = "agentcore"
    language = "python"

    def __init__(self) -> None:
        self.agents: dict[str, Agent] = {}
        self.sessions: dict[str, SessionSlot] = {}
        self.flight: Flight | None = None
        self._tg: TaskGroup | None = None
        self._tmp_dir: Path | None = None
        self._ask_ids = itertools.count(1)
        self.current: tuple[Any, str, Any] | None = None  # (session, tool, args) of the latest call

    # -- lifecycle ---------------------------------------------------------------------
    async def __aenter__(self) -> "AgentcoreHarness":
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self._drop_all()
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        await self._tg.__aexit__(None, None, None)
        if self._tmp_dir is not None:
            shutil.rmtree(self._tmp_dir, ignore_errors=True)
            self._tmp_dir = None

    @property
    def _tmp(self) -> Path:
        """The harness's scratch directory, made when first needed (a harness that is built but never
        entered leaves nothing), and removed on exit or, failing that, when the harness is collected."""
        if self._tmp_dir is None:
            self._tmp_dir = Path(tempfile.mkdtemp(prefix="conformance-harness-"))
            weakref.finalize(self, shutil.rmtree, self._tmp_dir, True)
        return self._tmp_dir

    # -- dispatch ----------------------------------------------------------------------
    async def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        op = req["op"]
        try:
            return await getattr(self, f"op_{op}")(req)
        except HarnessError as exc:
            return error_reply(str(exc))
        except Exception as exc:  # the harness caught it: report, do not die
            return error_reply(f"{type(exc).__name__} in {op}", traceback=traceback.format_exc(limit=8))

    # -- start / reset -----------------------------------------------------------------
    async def features(self) -> list[str]:
        probed = await probe_tools()
        feats = [f for f, ok in probed.items() if ok] + list(NON_TOOL_FEATURES)
        if default_watchdog_available():
            feats.append("watchdog.default")
        if shutil.which("git"):
            feats.append("exec.git")
        return feats

    async def op_start(self, req: dict[str, Any]) -> dict[str, Any]:
        from importlib.metadata import PackageNotFoundError, version

        try:
            ver = version("agentcore-toolspec")
        except PackageNotFoundError:
            ver = "0"
        return hello(self.name, ver, language=self.language, spec_version=SPEC_REVISION, features=await self.features())

    async def op_reset(self, req: dict[str, Any]) -> dict[str, Any]:
        self._drop_all()
        return {"result": {}}

    def _drop_all(self) -> None:
        self._cancel_flight()
        for slot in self.sessions.values():
            slot.session.close()
        self.sessions.clear()
        self.agents.clear()
        for child in self._tmp_dir.iterdir() if self._tmp_dir is not None and self._tmp_dir.exists() else ():
            shutil.rmtree(child, ignore_errors=True)

    # -- compile -----------------------------------------------------------------------
    def prepare_manifest(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """Hook: the manifest as the engine will see it."""
        return manifest

    def describe_compile(self, compiled: Any, registry: Any) -> dict[str, Any]:
        """Hook: the compile result (effective set and kinds) reported to the runner."""
        return {
            "effective": compiled.effective.to_json(),
            "tools": {t: {"kind": registry.get(t).kind} for t in compiled.tools},
        }

    def make_watchdog(self, spec: dict[str, Any] | None, compiled: Any) -> Any:
        if spec is not None:
            return ScriptedWatchdog(list(spec.get("verdicts", [])))
        if default_watchdog_available():
            return None  # the engine builds the default watchdog
        from agentcore.api import AllowAllWatchdog

        return AllowAllWatchdog()

    def manifest_file(self, text: str, fmt: str) -> tuple[str, str]:
        """The text and format of the manifest file to load (a hook for the broken implementations)."""
        return text, fmt

    def _write_manifest(self, req: dict[str, Any], directory: Path) -> Path:
        """The request's manifest as a file: its exact text (`manifest_text`), or the object as JSON."""
        text = req.get("manifest_text")
        if isinstance(text, str):
            fmt = req.get("manifest_format", "yaml")
            if fmt not in ("yaml", "json"):
                raise HarnessError("manifest_format must be yaml or json")
            text, fmt = self.manifest_file(text, fmt)
        elif isinstance(req.get("manifest"), dict):
            text, fmt = json.dumps(self.prepare_manifest(req["manifest"])), "json"
        else:
            raise HarnessError("compile needs a manifest object or manifest_text")
        path = directory / f"manifest.{fmt}"
        path.write_text(text, encoding="utf-8")
        return path

    async def op_compile(self, req: dict[str, Any]) -> dict[str, Any]:
        from agentcore.api import Engine, ManifestError, default_catalog, load_manifest

        name = _name(req, "agent")
        ws = req.get("workspace")
        bindings = req.get("bindings") or {}
        path = self._write_manifest(req, Path(tempfile.mkdtemp(prefix="agent-", dir=self._tmp)))
        registry = default_catalog()
        try:
            compiled = load_manifest(
                path,
                workspace=Path(ws) if ws else None,
                catalog=registry,
                ad_hoc=[Path(p) for p in bindings.get("ad-hoc", [])],
                user_data=Path(bindings["user-data"]) if bindings.get("user-data") else None,
            )
        except ManifestError as exc:
            return {"result": {"compile_error": {"message": exc.message, "location": exc.location}}}
        for sname in [s for s, slot in self.sessions.items() if slot.agent == name]:
            self.sessions.pop(sname).session.close()
        engine = Engine(
            compiled,
            catalog=registry,
            broker=SuspendingBroker(self),
            watchdog=self.make_watchdog(req.get("watchdog"), compiled),
        )
        self.agents[name] = Agent(engine=engine, manifest=compiled, workspace=Path(ws) if ws else None)
        return {"result": self.describe_compile(compiled, registry)}

    # -- rules -------------------------------------------------------------------------
    def _agent(self, req: dict[str, Any]) -> tuple[str, Agent]:
        name = _name(req, "agent")
        agent = self.agents.get(name)
        if agent is None:
            raise HarnessError(f"no compiled agent named {name!r}")
        return name, agent

    def _session(self, req: dict[str, Any]) -> Any:
        """The named session, opened on first use; its mode is fixed then (ASK-9)."""
        aname, agent = self._agent(req)
        sname = _name(req, "session")
        mode = req.get("mode", "headless")
        if mode not in MODES:
            raise HarnessError("mode must be headless or interactive")
        slot = self.sessions.get(sname)
        if slot is None:
            session = agent.engine.open_session(headless=self.is_headless(mode))
            self.on_session(session)
            slot = SessionSlot(aname, session, mode)
            self.sessions[sname] = slot
        elif slot.agent != aname:
            raise HarnessError(f"session {sname!r} belongs to another agent")
        elif slot.mode != mode:
            raise HarnessError(f"session {sname!r} was opened {slot.mode}; its mode cannot change")
        return slot.session

    def on_session(self, session: Any) -> None:
        """Hook: a session was just opened."""

    def rules_for(self, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Hook: the rules as the engine will see them."""
        return rules

    async def op_set_rules(self, req: dict[str, Any]) -> dict[str, Any]:
        from agentcore.api import ManifestError, compile_rule_list

        scope = req.get("scope")
        if scope not in SCOPES:
            raise HarnessError("scope must be project or session")
        rules = req.get("rules")
        if not isinstance(rules, list) or not all(isinstance(r, dict) for r in rules):
            raise HarnessError("rules must be a list of objects")
        rules = self.rules_for(rules)
        _aname, agent = self._agent(req)
        try:
            if scope == "project":
                compiled = compile_rule_list(rules, agent.manifest, catalog=agent.engine.catalog)
                agent.project_rules = compiled
                agent.engine.project_rules = compiled
                for slot in self.sessions.values():
                    if self.agents.get(slot.agent) is agent:
                        slot.session.set_project_rules(compiled)
            else:
                compile_rule_list(rules, agent.manifest, catalog=agent.engine.catalog)  # validated as project rules are
                session = self._session(req)
                for r in rules:
                    session.add_session_rule(r["permission"], r["pattern"], r["action"])
        except ManifestError as exc:
            return {"result": {"compile_error": {"message": exc.message, "location": exc.location}}}
        return {"result": {}}

    # -- calls -------------------------------------------------------------------------
    def is_headless(self, mode: str) -> bool:
        """Hook: whether a call in this mode gets the headless treatment."""
        return mode == "headless"

    async def invoke(self, agent: Agent, session: Any, tool: str, args: Any) -> dict[str, Any]:
        """Hook: one engine call, as an envelope dict."""
        env = await agent.engine.call(session, tool, args)
        return env.to_dict()

    def shape_envelope(self, tool: str, args: Any, envelope: dict[str, Any]) -> dict[str, Any]:
        """Hook: the envelope as reported to the runner."""
        return envelope

    async def op_call(self, req: dict[str, Any]) -> dict[str, Any]:
        if self.flight is not None:
            raise HarnessError("another call is still waiting for an answer")
        _aname, agent = self._agent(req)
        session = self._session(req)
        tool = req.get("tool")
        if not isinstance(tool, str):
            raise HarnessError("call needs a tool id")
        args = req.get("args", {})
        self.current = (session, tool, args)
        send, recv = anyio.create_memory_object_stream[tuple[str, Any]](8)
        flight = Flight(send, recv)
        self.flight = flight

        async def run() -> None:
            with flight.scope:
                try:
                    env = await self.invoke(agent, session, tool, args)
                    await send.send(("envelope", self.shape_envelope(tool, args, env)))
                except Exception as exc:
                    await send.send(("error", {"message": f"{type(exc).__name__} during call", "traceback": traceback.format_exc(limit=8)}))

        assert self._tg is not None
        self._tg.start_soon(run)
        return await self._next(flight)

    async def _next(self, flight: Flight) -> dict[str, Any]:
        kind, payload = await flight.events_recv.receive()
        if kind == "ask":
            return {"ask": payload}
        self.flight = None
        if kind == "error":
            return {"error": payload}
        return {"envelope": payload}

    async def suspend(self, payload: dict[str, Any], *, expect: str) -> Any:
        """Called by the broker inside the engine call: hand an ask out, wait for the answer."""
        flight = self.flight
        if flight is None:
            return None
        ask_id = f"ask-{next(self._ask_ids)}"
        send, recv = anyio.create_memory_object_stream[Any](1)
        flight.answers[ask_id] = (send, expect)
        await flight.events_send.send(("ask", {"id": ask_id, **payload}))
        return await recv.receive()

    async def op_answer(self, req: dict[str, Any]) -> dict[str, Any]:
        flight = self.flight
        ask_id = req.get("ask")
        if flight is None or ask_id not in flight.answers:
            raise HarnessError("no pending ask with that id")
        send, expect = flight.answers.pop(ask_id)
        if expect == "choice":
            value = req.get("choice")
            if value not in ANSWERS:
                raise HarnessError("choice must be one of " + ", ".join(ANSWERS))
        else:
            value = req.get("answers")
            if value is not None and not isinstance(value, list):
                raise HarnessError("a question needs answers: [[string]] (or null when dismissed)")
        await send.send(value)
        return await self._next(flight)

    def _cancel_flight(self) -> None:
        if self.flight is not None:
            self.flight.scope.cancel()
            self.flight = None

    async def op_close(self, req: dict[str, Any]) -> dict[str, Any]:
        sname = _name(req, "session")
        slot = self.sessions.get(sname)
        if slot is not None:
            self._cancel_flight()
            self.close_session(slot.session)
        return {"result": {}}

    def close_session(self, session: Any) -> None:
        """Hook: closing a session (removes its sidecars)."""
        session.close()


def _name(req: dict[str, Any], key: str) -> str:
    value = req.get(key)
    if not isinstance(value, str) or not value:
        raise HarnessError(f"{req.get('op')} needs a non-empty {key!r}")
    return value


# -- feature probes ------------------------------------------------------------------------


def default_watchdog_available() -> bool:
    try:
        from agentcore.api import default_watchdog  # noqa: F401
    except ImportError:
        return False
    return True


_PROBE_ARGS: dict[str, dict[str, Any]] = {
    "read": {"path": "probe.txt"},
    "write": {"path": "probe-out.txt", "content": "x"},
    "edit": {"path": "probe.txt", "old_string": "probe", "new_string": "edited"},
    "glob": {"pattern": "*.txt"},
    "grep": {"pattern": "probe"},
    "bash": {"command": "true"},
    "todo": {"todos": []},
    "task": {"description": "probe", "prompt": "probe", "agent": "no-such-agent"},
    "question": {"questions": [{"question": "probe?"}]},
    "web_search": {"query": "probe"},
    "web_fetch": {"url": "http://127.0.0.1:9/"},
    "skill": {"name": "no-such-skill"},
    "tool_search": {"query": "probe"},
}
# Tools whose probe must produce an output envelope (the others only must not be stubs).
_MUST_RUN = frozenset({"read", "write", "edit", "glob", "grep", "bash", "todo"})


async def probe_tools() -> dict[str, bool]:
    """Features (`tool.<id>`, `exec.bash`) this engine really implements, found by calling each tool once."""
    global _PROBED
    if _PROBED is None:
        _PROBED = await _probe()
    return dict(_PROBED)


async def _probe() -> dict[str, bool]:
    from agentcore.api import LOCKED_IDS, AllowAllWatchdog, Engine, default_catalog, load_manifest

    registry = default_catalog()
    results: dict[str, bool] = {}
    root = Path(tempfile.mkdtemp(prefix="conformance-probe-"))
    try:
        ws = root / "ws"
        ws.mkdir()
        for tool in LOCKED_IDS:
            if not registry.has(tool):
                results[f"tool.{tool}"] = False
                continue
            (ws / "probe.txt").write_text("probe\n", encoding="utf-8")
            manifest = {
                "name": "probe",
                "tools": [tool],
                "requires": {
                    "fs": {"read": ["{workspace}/**"], "write": ["{workspace}/**"]},
                    "shell": [{"cmd": "true"}],
                    "net": {"hosts": ["127.0.0.1:9"]},
                },
                "rules": [{"permission": "*", "pattern": "*", "action": "allow"}],
            }
            path = root / f"{tool}.json"
            path.write_text(json.dumps(manifest), encoding="utf-8")
            calls = [("tool", _PROBE_ARGS[tool])]
            if tool == "bash":
                # The pipeline (parse, capability) works even where nothing can execute.
                calls = [("tool", {"command": "false"}), ("exec", _PROBE_ARGS[tool])]
            for feature, args in calls:
                name = f"{feature}.{tool}"
                try:
                    compiled = load_manifest(path, workspace=ws, catalog=registry)
                    engine = Engine(compiled, catalog=registry, watchdog=AllowAllWatchdog())
                    session = engine.open_session(headless=True)
                    try:
                        with anyio.fail_after(20):
                            env = (await engine.call(session, tool, args)).to_dict()
                    finally:
                        session.close()
                except Exception:
                    results[name] = False
                    continue
                meta = env.get("metadata", {})
                code = meta.get("error_code")
                ok = code != "not_implemented" and code != "internal_error"
                if tool == "bash" and feature == "tool":
                    ok = meta.get("refusal", {}).get("layer") == "capability"
                elif tool in _MUST_RUN:
                    ok = env.get("type") == "output"
                results[name] = ok
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return results


def main(argv: list[str] | None = None) -> int:
    anyio.run(serve_stdio, AgentcoreHarness)
    return 0


if __name__ == "__main__":
    sys.exit(main())
