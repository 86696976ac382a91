"""Which model runs: CLI flags over the environment over the manifest; scripts; keys by name only."""

from __future__ import annotations

import argparse
from pathlib import Path

import anyio
import pytest

from agentcore.agent.config import ModelConfig, ModelConfigError, open_model, resolve_model_config
from agentcore.agent.script import ScriptFileError, load_script


def spec(**kw: object) -> argparse.Namespace:
    base = {"id": None, "base_url": None, "api_key_env": None, "max_tokens": None, "temperature": None,
            "max_turn_requests": None, "request_timeout_s": None}
    return argparse.Namespace(**{**base, **kw})


def test_flags_beat_the_environment_which_beats_the_manifest(tmp_path: Path) -> None:
    manifest = spec(id="anthropic:from-manifest", base_url="http://manifest", max_turn_requests=9)
    assert resolve_model_config(manifest, env={}).id == "anthropic:from-manifest"
    env = {"AGENTCORE_MODEL": "openai:from-env", "AGENTCORE_BASE_URL": "http://env"}
    got = resolve_model_config(manifest, env=env)
    assert (got.id, got.base_url, got.api_key_env, got.max_turn_requests) == ("openai:from-env", "http://env", "OPENAI_API_KEY", 9)
    got = resolve_model_config(manifest, model="openai-compatible:llama3", base_url="http://flag", api_key_env="MY_KEY", env=env)
    assert (got.provider, got.name, got.base_url, got.api_key_env) == ("openai-compatible", "llama3", "http://flag", "MY_KEY")


def test_a_script_in_the_manifest_is_relative_to_the_manifest(tmp_path: Path) -> None:
    got = resolve_model_config(spec(id="script:turns.yaml"), manifest_dir=tmp_path / "agents", env={})
    assert got.name == str(tmp_path / "agents" / "turns.yaml") and got.id == "script:turns.yaml"
    flag = resolve_model_config(spec(id="script:turns.yaml"), model="script:other.yaml", manifest_dir=tmp_path / "agents", env={})
    assert flag.name == str(Path.cwd() / "other.yaml")


@pytest.mark.parametrize(
    "model, message",
    [
        (None, "no model is configured"),
        ("gpt-4", "PROVIDER:NAME"),
        ("acme:thing", "unknown model provider"),
        ("openai-compatible:llama3", "needs --base-url"),
    ],
)
def test_incomplete_or_wrong_configuration_is_refused(model: str | None, message: str) -> None:
    with pytest.raises(ModelConfigError, match=message):
        resolve_model_config(None, model=model, env={})


def test_a_missing_key_names_the_variable_and_never_a_value() -> None:
    config = resolve_model_config(None, model="anthropic:claude", api_key_env="TEAM_ANTHROPIC_KEY", env={})

    async def main() -> None:
        async with open_model(config, env={"OTHER": "sk-unrelated-value"}):
            pass

    with pytest.raises(ModelConfigError) as exc:
        anyio.run(main)
    assert "TEAM_ANTHROPIC_KEY" in str(exc.value) and "sk-unrelated" not in str(exc.value)


def test_openai_compatible_needs_no_key() -> None:
    config = ModelConfig(provider="openai-compatible", name="llama3", base_url="http://127.0.0.1:9/v1")

    async def main() -> str:
        async with open_model(config, env={}) as client:
            return client.name

    assert anyio.run(main) == "openai-compatible:llama3"


@pytest.mark.parametrize(
    "text, message",
    [
        ("- text: ok\n  tool_calls: [{tool: read, args: {path: a}, bogus: 1}]\n", "bogus"),
        ("[]\n", "turns"),
        ("- {error: {status: 200}}\n", "status"),
        ("turns:\n  - text: a\n  - text: [not, text]\n", "text"),
    ],
)
def test_a_bad_script_is_refused_with_the_place(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(ScriptFileError, match=message):
        load_script(path)


def test_a_model_process_does_not_import_httpxs_command_line_client() -> None:
    """httpx imports click, rich and pygments for its CLI whenever they are installed (mcp brings click): 30-70 ms
    of `agentcore run`'s start to its first request (issue 10). The provider layer keeps them out."""
    import subprocess
    import sys

    code = ("import sys, agentcore.agent.providers, pydantic_ai.models.openai, httpx; "
            "print(sorted(m for m in ('click', 'rich', 'pygments', 'httpx._main') if sys.modules.get(m) is not None))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]", done.stdout
