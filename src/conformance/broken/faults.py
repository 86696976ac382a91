"""Harnesses that break the protocol rather than the spec, to test the runner itself.

They are not part of the catch matrix: every case "fails" against them, by
design, with the status the runner must assign (crash, timeout, error).
"""

from __future__ import annotations

import os
from typing import Any

import anyio

from ..harness_agentcore import AgentcoreHarness


class _Died(Exception):
    """Escapes `handle`: the in-process transport reports the harness as dead."""


class CrashOnCall(AgentcoreHarness):
    """Dies on every `call` (exits the process when run as a command)."""

    async def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        if req["op"] == "call":
            if os.environ.get("CONFORMANCE_HARNESS_STDIO") == "1":
                os._exit(3)
            raise _Died("crash-on-call")
        return await super().handle(req)


class HangOnCall(AgentcoreHarness):
    """Never answers a `call`."""

    async def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        if req["op"] == "call":
            await anyio.sleep_forever()
        return await super().handle(req)


class ErrorOnCall(AgentcoreHarness):
    """Reports every `call` as an error it caught itself."""

    async def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        if req["op"] == "call":
            return {"error": {"message": "this harness cannot run calls"}}
        return await super().handle(req)


class SkipCalls(AgentcoreHarness):
    """Skips every `call` (an implementation that supports only compile)."""

    async def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        if req["op"] == "call":
            return {"skip": {"reason": "calls are not supported"}}
        return await super().handle(req)


class SkipEverything(AgentcoreHarness):
    """Skips every operation: a harness that claims nothing and so can fail nothing."""

    async def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        if req["op"] in ("reset", "compile", "set_rules", "call", "answer"):
            return {"skip": {"reason": "not supported"}}
        return await super().handle(req)


class WrongSeq(AgentcoreHarness):
    """Answers `call` with a seq that does not match the request."""

    async def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        reply = await super().handle(req)
        if req["op"] == "call":
            return {**reply, "seq": req["seq"] + 1000}  # overrides the echo the serve loop adds
        return reply


class NoPayload(AgentcoreHarness):
    """Answers `call` with a reply that carries none of the payload keys."""

    async def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        if req["op"] == "call":
            return {"nothing": True}
        return await super().handle(req)


FAULTS: dict[str, type[AgentcoreHarness]] = {
    "crash-on-call": CrashOnCall,
    "hang-on-call": HangOnCall,
    "error-on-call": ErrorOnCall,
    "skip-calls": SkipCalls,
    "skip-everything": SkipEverything,
    "wrong-seq": WrongSeq,
    "no-payload": NoPayload,
}
