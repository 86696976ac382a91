"""Mutants of the runner class: replies that break the protocol in ways the runner must notice."""

from __future__ import annotations

from typing import Any

from .proxy import Mutant, envelope


class SeqFloat(Mutant):
    name = "seq-float"
    group = "runner"
    summary = "replies carry seq as a float (7.0 for 7)"

    def reply(self, req: dict[str, Any], reply: Any) -> Any:
        if req.get("op") in ("call", "answer") and isinstance(reply, dict) and type(reply.get("seq")) is int:
            reply["seq"] = float(reply["seq"])
            self.fire()
        return reply


class CloseWithoutPayload(Mutant):
    name = "close-without-payload"
    group = "runner"
    summary = "close (the runner's cleanup close included) is answered without a payload"

    def reply(self, req: dict[str, Any], reply: Any) -> Any:
        if req.get("op") == "close":
            self.fire()
            return {"seq": req["seq"]}
        return reply


class EnvelopeWithoutMetadata(Mutant):
    name = "envelope-without-metadata"
    group = "runner"
    summary = "envelopes come without metadata (a malformed reply the runner must name)"

    def reply(self, req: dict[str, Any], reply: Any) -> Any:
        env = envelope(reply)
        if env is not None and "metadata" in env:
            del env["metadata"]
            self.fire()
        return reply


RUNNER_MUTANTS: list[type[Mutant]] = [SeqFloat, CloseWithoutPayload, EnvelopeWithoutMetadata]
