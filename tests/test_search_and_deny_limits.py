"""Review findings (file tools and sandbox): each test shows the side effect, with a control."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from test_bash_support import ALLOW_ALL, Lab, arity, assert_ran

pytestmark = [pytest.mark.bwrap, pytest.mark.anyio, pytest.mark.timeout(120)]

SECRET = "late-secret-5c1d77\n"
SHELL = [arity("cat", 1), arity("tee", 1)]


def deny_read(pattern: str) -> list[dict[str, str]]:
    return [*ALLOW_ALL, {"permission": "fs.read", "pattern": pattern, "action": "deny"}]


async def run(agent: Any, command: str) -> dict[str, Any]:
    return assert_ran(await agent.call("bash", {"command": command}))


async def test_a_literal_read_deny_hides_a_file_created_after_the_first_call(agent_for: Callable[..., Any], lab: Lab) -> None:
    """ENV-6: a literal deny hides its path "when it exists", i.e. when the call is made, not when the
    engine derived its policy. A `.env` the user writes while a long session runs must stay hidden."""
    agent = agent_for(SHELL, rules=deny_read("config/secret.txt"))
    assert (await run(agent, "cat a.txt"))["output"] == "alpha\n"  # the first call fixes the engine's policy
    (lab.ws / "config").mkdir()
    (lab.ws / "config" / "secret.txt").write_text(SECRET)  # written by the user, not by the agent
    data = await run(agent, "cat config/secret.txt")
    assert SECRET.strip() not in data["output"], data
    assert (lab.ws / "config" / "secret.txt").read_text() == SECRET
    # Control: a neighbour that no rule names is readable.
    (lab.ws / "config" / "other.txt").write_text("other\n")
    assert (await run(agent, "cat config/other.txt"))["output"] == "other\n"


# -- glob patterns whose matching backtracks ---------------------------------------------------

DEEP_DIRS = 60  # `x/x/.../x/y`: a path of 121 bytes, which `write` creates with its parents


@pytest.mark.parametrize("tool", ["glob", "grep"])
async def test_a_glob_with_many_globstars_cannot_stall_the_engine(workspace: Any, make_agent: Callable[..., Any], tool: str) -> None:
    """Several `**` components make the translated regex backtrack polynomially in a path's depth
    (O(depth^n)); the match runs synchronously on the event loop, so no deadline, abort or other
    session can run until it ends (hours for 8 of them). The agent builds the deep path itself."""
    agent = make_agent(workspace, rules=[{"permission": "*", "pattern": "*", "action": "allow"}],
                       tools=["write", "glob", "grep"])
    deep = "x/" * DEEP_DIRS + "y"
    assert (await agent.call("write", {"path": deep, "content": "needle\n"})).ok
    pattern = "**/x/" * 6 + "b"
    args = {"pattern": pattern} if tool == "glob" else {"pattern": "needle", "glob": pattern}
    env = await agent.call(tool, args)
    # Refused before any matching (FILE-12, FILE-15), and the text does not echo the pattern (ENVL-6).
    assert env.type == "error" and env.to_dict()["metadata"]["error_code"] == "invalid_arguments", env.to_dict()
    assert pattern not in env.to_dict()["error_text"]
    # The usual patterns (up to two `**`) still match the deep file.
    good = "**/x/**/y"
    args = {"pattern": good} if tool == "glob" else {"pattern": "needle", "glob": good}
    env = await agent.call(tool, args)
    assert env.ok and env.data["total"] == 1, env.to_dict()
