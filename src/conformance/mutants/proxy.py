"""A mutating proxy between the runner and any harness, using only the protocol.

`MutatingTransport` wraps any transport (a command, our in-process engine,
a third party's harness) and hands every request to a `Mutant`, which may
rewrite the request, rewrite the reply, answer by itself, or send the
harness requests of its own (compiling a *shadow* agent with a changed
manifest and routing some calls to it, adding session rules, answering an
ask). That is how one behaviour of a real implementation is made subtly
wrong without touching its internals. Each mutant counts how often it
*fired* (changed something): a mutant that never fires shows a situation
the cases never set up.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

Forward = Callable[[dict[str, Any]], Awaitable[Any]]
# Requests the proxy makes up itself carry seq numbers far from the runner's.
INJECTED_SEQ = 1_000_000_000


@dataclass
class AgentState:
    """An agent as the proxy last saw it compiled, with its project rules; `generation` counts recompiles, naming its shadow agents."""

    manifest: dict[str, Any]
    workspace: str | None
    bindings: dict[str, Any]
    watchdog: dict[str, Any] | None
    generation: int = 0
    project: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class World:
    """What the proxy has seen go through: agents, sessions, the call an ask belongs to."""

    agents: dict[str, AgentState] = field(default_factory=dict)
    sessions: dict[str, tuple[str, str]] = field(default_factory=dict)       # session -> (agent, mode)
    session_rules: dict[str, list[list[dict[str, Any]]]] = field(default_factory=dict)  # session -> set_rules batches
    pending: dict[str, dict[str, Any]] = field(default_factory=dict)         # ask id -> (call request, ask)
    answered: list[tuple[dict[str, Any], dict[str, Any], Any]] = field(default_factory=list)

    def observe(self, req: dict[str, Any], reply: Any) -> None:
        op = req.get("op")
        ok = isinstance(reply, dict) and isinstance(reply.get("result"), dict) and "compile_error" not in reply["result"]
        if op == "reset":
            self.agents.clear()
            self.sessions.clear()
            self.session_rules.clear()
            self.pending.clear()
        elif op == "compile" and ok:
            old = self.agents.get(req["agent"])
            self.agents[req["agent"]] = AgentState(copy.deepcopy(req["manifest"]), req.get("workspace"), req.get("bindings") or {}, req.get("watchdog"), (old.generation + 1) if old else 0)
            for name in [s for s, (a, _m) in self.sessions.items() if a == req["agent"]]:
                self.sessions.pop(name)
                self.session_rules.pop(name, None)
        elif op == "set_rules" and ok:
            self._rules(req)
        elif op in ("call", "set_rules") and "session" in req:
            self.sessions.setdefault(req["session"], (req["agent"], req.get("mode", "headless")))
        elif op == "close":
            self.sessions.pop(req.get("session", ""), None)
            self.session_rules.pop(req.get("session", ""), None)
        if op in ("call", "answer") and isinstance(reply, dict) and isinstance(reply.get("ask"), dict):
            origin = req if op == "call" else self.pending.get(req.get("ask", ""), {}).get("call", req)
            self.pending[reply["ask"].get("id", "")] = {"call": origin, "ask": reply["ask"]}
        if op == "answer":
            entry = self.pending.pop(req.get("ask", ""), None)
            if entry is not None:
                self.answered.append((entry["call"], entry["ask"], req.get("choice")))

    def _rules(self, req: dict[str, Any]) -> None:
        agent = self.agents.get(req["agent"])
        if req["scope"] == "project" and agent is not None:
            agent.project = list(req["rules"])
        elif req["scope"] == "session":
            self.sessions.setdefault(req["session"], (req["agent"], req.get("mode", "headless")))
            self.session_rules.setdefault(req["session"], []).append(list(req["rules"]))

    def resolve(self, agent: str, raw: Any) -> str | None:
        """The canonical path a path argument names (what an implementation must check)."""
        state = self.agents.get(agent)
        if not isinstance(raw, str) or not raw or state is None:
            return None
        path = raw
        if path.startswith("~/"):
            path = os.path.expanduser(path)
        elif not path.startswith("/"):
            if not state.workspace:
                return None
            path = os.path.join(state.workspace, path)
        return os.path.realpath(path)


def envelope(reply: Any) -> dict[str, Any] | None:
    env = reply.get("envelope") if isinstance(reply, dict) else None
    return env if isinstance(env, dict) else None


def refusal(reply: Any) -> dict[str, Any]:
    env = envelope(reply)
    meta = env.get("metadata") if env else None
    r = meta.get("refusal") if isinstance(meta, dict) else None
    return r if isinstance(r, dict) else {}


def error_code(reply: Any) -> str | None:
    env = envelope(reply)
    meta = env.get("metadata") if env else None
    return meta.get("error_code") if isinstance(meta, dict) else None


def made_envelope(tool: str, kind: str, *, data: Any = None, error: tuple[str, str] | None = None) -> dict[str, Any]:
    """An envelope the proxy answers with itself (as a wrong implementation would have produced it)."""
    meta: dict[str, Any] = {"duration_ms": 0, "tool": tool, "kind": kind}
    if error is not None:
        meta["error_code"] = error[0]
        return {"type": "error", "error_text": error[1], "metadata": meta}
    return {"type": "output", "data": data, "metadata": meta}


class Mutant:
    """One wrong behaviour, made at the protocol. Subclasses override `handle` (or the two hooks)."""

    name: str = ""
    group: str = ""      # the class of gap it stands for (ISSUE: envelope, situation, runner)
    summary: str = ""

    def __init__(self) -> None:
        self.fired = 0
        self.world = World()
        self._injected = 0
        self._forward: Forward | None = None

    def fire(self, times: int = 1) -> None:
        self.fired += times

    async def exchange(self, req: dict[str, Any], forward: Forward) -> Any:
        self._forward = forward
        reply = await self.handle(req)
        self.world.observe(req, reply)
        return reply

    async def handle(self, req: dict[str, Any]) -> Any:
        reply = await self.send(self.request(req))
        return self.reply(req, reply)

    def request(self, req: dict[str, Any]) -> dict[str, Any]:
        return req

    def reply(self, req: dict[str, Any], reply: Any) -> Any:
        return reply

    async def send(self, req: dict[str, Any]) -> Any:
        assert self._forward is not None
        return await self._forward(req)

    async def inject(self, op: str, **fields: Any) -> Any:
        """A request of the proxy's own (the runner never sees it or its reply)."""
        self._injected += 1
        return await self.send({"seq": INJECTED_SEQ + self._injected, "op": op, **fields})

    async def shadow(self, agent: str, suffix: str, transform: Callable[[dict[str, Any]], dict[str, Any]], project: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None) -> str | None:
        """Compile `agent` again under another name with a changed manifest (and project rules); its name, or None."""
        state = self.world.agents.get(agent)
        if state is None:
            return None
        name = f"{agent}~{suffix}{state.generation}"
        fields: dict[str, Any] = {"agent": name, "manifest": transform(copy.deepcopy(state.manifest)), "workspace": state.workspace, "bindings": state.bindings}
        if state.watchdog is not None:
            fields["watchdog"] = state.watchdog
        reply = await self.inject("compile", **fields)
        if not (isinstance(reply, dict) and isinstance(reply.get("result"), dict) and "compile_error" not in reply["result"]):
            return None
        rules = project(list(state.project)) if project is not None else list(state.project)
        if rules:
            await self.inject("set_rules", agent=name, scope="project", rules=rules)
        return name


class MutatingTransport:
    """A transport that passes every exchange of `inner` through a mutant."""

    def __init__(self, inner: Any, mutant: Mutant) -> None:
        self.inner = inner
        self.mutant = mutant

    @property
    def description(self) -> str:
        return f"{self.inner.description} via mutant:{self.mutant.name}"

    async def start(self, tg: Any) -> None:
        self.mutant.world = World()  # a restarted harness has forgotten everything
        await self.inner.start(tg)

    def stderr_tail(self) -> str:
        return str(self.inner.stderr_tail())

    async def exchange(self, request: dict[str, Any]) -> Any:
        return await self.mutant.exchange(request, self.inner.exchange)

    async def stop(self) -> None:
        await self.inner.stop()
