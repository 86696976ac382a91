"""The embedded scripted model answers only the host that started it (a loopback port is open to every local process)."""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx

from agentcore.agent.config import ModelConfig, open_model
from agentcore.agent.messages import user_message
from agentcore.agent.model import RequestSettings
from agentcore.agent.script import ScriptServer, load_script


def _script(tmp_path: Path) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text("- text: first turn\n- text: second turn\n")
    return path


def test_a_request_without_the_token_takes_no_turn_and_learns_nothing(tmp_path: Path) -> None:
    with ScriptServer(load_script(_script(tmp_path))) as server:
        url = server.base_url + "/chat/completions"
        body = {"model": "script", "messages": [{"role": "user", "content": "hi"}]}
        for headers in ({}, {"authorization": "Bearer not-needed"}, {"authorization": f"Bearer {server.token[:-1]}"}):
            reply = httpx.post(url, json=body, headers=headers)
            assert reply.status_code == 401
            assert "first turn" not in reply.text
        assert server.requests == 0  # nothing was served, so nothing was used up
        reply = httpx.post(url, json=body, headers={"authorization": f"Bearer {server.token}"})
        assert reply.status_code == 200 and reply.json()["choices"][0]["message"]["content"] == "first turn"


def test_the_host_holds_the_token_and_runs_from_the_first_turn(tmp_path: Path) -> None:
    async def go() -> str:
        async with open_model(ModelConfig(provider="script", name=str(_script(tmp_path)))) as client:
            turn = await client.request("", [user_message("hi")], [], RequestSettings(), _ignore)
            return "".join(getattr(p, "text", "") for p in turn.parts)

    async def _ignore(kind: str, text: str) -> None:
        return None

    assert anyio.run(go) == "first turn"


def test_two_servers_have_different_tokens(tmp_path: Path) -> None:
    a, b = ScriptServer(load_script(_script(tmp_path))), ScriptServer(load_script(_script(tmp_path)))
    try:
        assert a.token != b.token and len(a.token) == 32
    finally:
        a.stop()
        b.stop()
