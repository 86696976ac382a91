"""The ACP translation of a call's live output (text mode): bounded whatever the chunking, still live."""

from __future__ import annotations

import json
from typing import Any

from acp_adapter.updates import NOTES_SHOWN, TEXT_CAP, Translator


def _events(chunks: list[str], stream: str = "stdout") -> list[dict[str, Any]]:
    start = {"type": "call_started", "call_id": "c1", "kind": "execute", "title": "bash", "tool": "bash", "session_id": "s"}
    return [start, *({"type": "output_chunk", "call_id": "c1", "session_id": "s", "stream": stream, "text": c} for c in chunks)]


def _sent(chunks: list[str], stream: str = "stdout") -> list[dict[str, Any]]:
    t = Translator("s", terminal_output=False)
    return [u for e in _events(chunks, stream) for u in t.updates(e)]


def test_a_command_writing_a_byte_at_a_time_cannot_flood_the_editor() -> None:
    """One update per chunk, each with the whole text, was quadratic: 100,000 one-byte chunks sent ~2 G characters."""
    updates = _sent(["x"] * 100_000)
    total = sum(len(json.dumps(u)) for u in updates)
    assert total < 10 * TEXT_CAP + 200 * len(updates), total
    last = updates[-1]["content"][0]["content"]["text"]
    assert last == "```\n" + "x" * TEXT_CAP + "\n```"  # the cap is reached and shown


def test_small_outputs_stay_live_line_by_line() -> None:
    lines = [f"step {i}\n" for i in range(8)]
    updates = [u for u in _sent(lines) if u.get("content")]
    assert len(updates) == len(lines)  # every line of a short output is shown as it comes
    assert updates[-1]["content"][0]["content"]["text"] == "```\n" + "".join(lines) + "\n```"


def test_progress_notes_show_the_latest_only() -> None:
    updates = [u for u in _sent([f"note {i} " + "y" * 5000 for i in range(1000)], stream="progress") if u.get("content")]
    assert len(updates) == 1000
    biggest = max(len(u["content"][0]["content"]["text"]) for u in updates)
    assert biggest <= NOTES_SHOWN * 1001, biggest
    assert updates[-1]["content"][0]["content"]["text"].splitlines()[-1].startswith("note 999 ")
