"""Helpers shared by tests/test_agent_*.py (no tests here).

Every agent test runs the real loop against the real scripted model server
(an OpenAI-compatible loopback server) through the real provider code, and
the real engine.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agentcore.agent.config import ModelConfig, open_model
from agentcore.agent.loop import AgentLoop, RetryPolicy
from agentcore.api import Engine, compile_manifest

FAST_RETRY = RetryPolicy(attempts=4, base_s=0.01, max_s=0.05)
ALLOW_ALL = [{"permission": "*", "pattern": "*", "action": "allow"}]


def write_script(path: Path, turns: Sequence[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump(list(turns), sort_keys=False), encoding="utf-8")
    return path


def manifest(workspace: Path, *, tools: Sequence[str] = ("read", "grep", "glob", "write"), rules: Sequence[dict[str, str]] = ALLOW_ALL,
             write: Sequence[str] = ("{workspace}/**",), shell: Sequence[dict[str, Any]] = (), catalog: Any = None, **extra: Any) -> Any:
    data = {
        "name": "agent-test",
        "tools": list(tools),
        "requires": {"fs": {"read": ["{workspace}/**"], "write": list(write)}, "shell": list(shell)},
        "rules": list(rules),
        **extra,
    }
    return compile_manifest(data, workspace=workspace, catalog=catalog)


@dataclass
class Recorded:
    """Every event an observer saw, in order."""

    events: list[Any] = field(default_factory=list)

    def __call__(self, event: Any) -> None:
        self.events.append(event)

    def types(self) -> list[str]:
        return [e.type for e in self.events]

    def of(self, kind: str) -> list[Any]:
        return [e for e in self.events if e.type == kind]

    def envelopes(self) -> dict[str, dict[str, Any]]:
        return {e.call_id: e.envelope.to_dict() for e in self.of("call_finished")}


@asynccontextmanager
async def scripted_loop(engine: Engine, script: Path, **loop_kw: Any) -> AsyncIterator[tuple[AgentLoop, Recorded]]:
    """An AgentLoop on `engine` whose model is the script at `script`; yields (loop, recorded events)."""
    loop_kw.setdefault("retry", FAST_RETRY)
    async with open_model(ModelConfig(provider="script", name=str(script))) as client:
        loop = AgentLoop(engine, client, **loop_kw)
        seen = Recorded()
        loop.add_observer(seen)
        yield loop, seen


def tool_results(message_added: Sequence[Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for event in message_added:
        for part in event.message.parts:
            if part.kind == "tool_result":
                out[part.call_id] = part.envelope
    return out


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True)
