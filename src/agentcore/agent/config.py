"""Which model runs, from CLI flags, the environment and the manifest's `model:` block (in that order).

The command-line contract, the same on `run`, `batch` and `acp`:

- `--model PROVIDER:NAME` with PROVIDER one of `openai`, `anthropic`,
  `openai-compatible` (Chat Completions, as local servers speak it) or
  `script` (`script:FILE`, the embedded scripted model);
- `--base-url URL`;
- `--api-key-env VAR`: the environment variable holding the key (default
  `OPENAI_API_KEY` or `ANTHROPIC_API_KEY`; `openai-compatible` needs none).

The environment may set `AGENTCORE_MODEL`, `AGENTCORE_BASE_URL` and
`AGENTCORE_API_KEY_ENV`. A key is read from the environment when the client
is built and is held by the client alone: it is never part of a config, an
event, a recording or an error text.
"""

from __future__ import annotations

import os
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, AsyncIterator, Mapping

from .model import ModelClient

PROVIDERS = ("openai", "anthropic", "openai-compatible", "script")
DEFAULT_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
DEFAULT_MAX_TURN_REQUESTS = 50
DEFAULT_REQUEST_TIMEOUT_S = 300.0


class ModelConfigError(Exception):
    """The model configuration is incomplete or wrong (a usage error)."""


@dataclass(frozen=True)
class ModelConfig:
    """The model to run, where and with which limits, resolved from flags, environment and manifest; it names the API key's variable, never the key."""

    provider: str
    name: str
    base_url: str | None = None
    api_key_env: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    max_turn_requests: int = DEFAULT_MAX_TURN_REQUESTS
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S
    context_window: int | None = None

    @property
    def id(self) -> str:
        """`provider:name`, safe to show and record (a script shows its file name only)."""
        name = Path(self.name).name if self.provider == "script" else self.name
        return f"{self.provider}:{name}"

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.id, "base_url": self.base_url, "api_key_env": self.api_key_env,
                "max_tokens": self.max_tokens, "temperature": self.temperature,
                "max_turn_requests": self.max_turn_requests, "request_timeout_s": self.request_timeout_s}


def parse_model_id(text: str) -> tuple[str, str]:
    provider, sep, name = text.partition(":")
    if not sep or not name:
        raise ModelConfigError(f"--model must be PROVIDER:NAME with PROVIDER one of {', '.join(PROVIDERS)}")
    if provider not in PROVIDERS:
        raise ModelConfigError(f"unknown model provider {provider!r}; use one of {', '.join(PROVIDERS)}")
    return provider, name


def resolve_model_config(
    manifest_model: Any,
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key_env: str | None = None,
    manifest_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> ModelConfig:
    """The model to run: CLI flags, then the environment, then the manifest's `model:` block."""
    env = os.environ if env is None else env
    spec_id = getattr(manifest_model, "id", None)
    chosen = model or env.get("AGENTCORE_MODEL") or spec_id
    if not chosen:
        raise ModelConfigError("no model is configured: pass --model PROVIDER:NAME (for an offline run, --model script:FILE)")
    provider, name = parse_model_id(chosen)
    if provider == "script" and not Path(name).is_absolute():
        # A script named in the manifest is relative to the manifest; one on the command line to the cwd.
        base = manifest_dir if (chosen == spec_id and manifest_dir is not None and not model and not env.get("AGENTCORE_MODEL")) else Path.cwd()
        name = str(base / name)
    config = ModelConfig(
        provider=provider,
        name=name,
        base_url=base_url or env.get("AGENTCORE_BASE_URL") or getattr(manifest_model, "base_url", None),
        api_key_env=api_key_env or env.get("AGENTCORE_API_KEY_ENV") or getattr(manifest_model, "api_key_env", None)
        or DEFAULT_KEY_ENV.get(provider),
        max_tokens=getattr(manifest_model, "max_tokens", None),
        temperature=getattr(manifest_model, "temperature", None),
        max_turn_requests=getattr(manifest_model, "max_turn_requests", None) or DEFAULT_MAX_TURN_REQUESTS,
        request_timeout_s=getattr(manifest_model, "request_timeout_s", None) or DEFAULT_REQUEST_TIMEOUT_S,
        context_window=getattr(manifest_model, "context_window", None),
    )
    if provider == "openai-compatible" and not config.base_url:
        raise ModelConfigError("openai-compatible needs --base-url (for example http://localhost:11434/v1 for Ollama)")
    return config


def with_limits(config: ModelConfig, *, max_turn_requests: int | None = None, max_tokens: int | None = None) -> ModelConfig:
    return replace(
        config,
        max_turn_requests=max_turn_requests or config.max_turn_requests,
        max_tokens=max_tokens or config.max_tokens,
    )


def _key(config: ModelConfig, env: Mapping[str, str], required: bool) -> str | None:
    if not config.api_key_env:
        return None
    value = env.get(config.api_key_env)
    if required and not value:
        raise ModelConfigError(f"the environment variable {config.api_key_env} (the API key for {config.provider}) is not set")
    return value or None


def check_model_config(config: ModelConfig, env: Mapping[str, str] | None = None) -> None:
    """What `open_model` would refuse, found without opening anything: a missing key or script."""
    env = os.environ if env is None else env
    if config.provider in ("openai", "anthropic"):
        _key(config, env, True)
    if config.provider == "script" and not Path(config.name).is_file():
        raise ModelConfigError(f"the script {config.name} does not exist")


@asynccontextmanager
async def open_model(config: ModelConfig, env: Mapping[str, str] | None = None) -> AsyncIterator[ModelClient]:
    """A client for `config`, closed (and a script's server stopped) on exit.

    Provider libraries are imported here, only for the provider in use.
    """
    env = os.environ if env is None else env
    from . import providers

    server = None
    if config.provider == "script":
        from .script import ScriptFileError, ScriptServer, load_script

        try:
            server = ScriptServer(load_script(Path(config.name))).start()
        except ScriptFileError as exc:
            raise ModelConfigError(str(exc)) from None
        client: ModelClient = providers.openai_chat_client(config.id, "script", base_url=server.base_url, api_key=server.token,
                                                           timeout_s=config.request_timeout_s, problems=server.problems)
    elif config.provider == "openai-compatible":
        client = providers.openai_chat_client(config.id, config.name, base_url=config.base_url, api_key=_key(config, env, False),
                                              timeout_s=config.request_timeout_s)
    elif config.provider == "openai":
        client = providers.openai_responses_client(config.id, config.name, base_url=config.base_url,
                                                   api_key=_key(config, env, True) or "", timeout_s=config.request_timeout_s)
    else:
        client = providers.anthropic_client(config.id, config.name, base_url=config.base_url,
                                            api_key=_key(config, env, True) or "", timeout_s=config.request_timeout_s)
    try:
        yield client
    finally:
        await client.aclose()
        if server is not None:
            server.stop()
