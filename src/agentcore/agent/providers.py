"""pydantic-ai as the provider layer, behind our `ModelClient` seam.

Only its direct request API is used (`pydantic_ai.direct.model_request_stream`):
one streamed request per call, with our tool definitions. The SDK clients
are built with `max_retries=0`, so the loop's retry policy is the only one.
Everything here is imported lazily: a command that runs no model never pays
for pydantic-ai, openai or anthropic (about a second of imports).
"""

from __future__ import annotations

import sys
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable, Sequence

from .messages import ImagePart, Message, Part, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from .model import DeltaSink, Finish, ModelTurn, ProviderError, RequestSettings, ToolSpec, Usage, scrub

if TYPE_CHECKING:
    import ssl

    from pydantic_ai.messages import ModelMessage, ModelResponse
    from pydantic_ai.models import Model

# httpx's package imports its command-line client (click, rich, pygments) whenever they are installed, and
# mcp's dependencies install click: 30-70 ms of a model process's start (`agentcore run` to its first request,
# issue 10) for a program nothing here runs. Marked absent before pydantic-ai imports httpx, httpx keeps its
# stub `main` instead; only `httpx.main()` in this process is affected, and no host calls it.
if "httpx" not in sys.modules:
    sys.modules.setdefault("httpx._main", None)  # type: ignore[assignment]

_RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
# Characters of one response (text, reasoning, tool calls' names and arguments) before it is cut off. The
# largest output caps are about 128k tokens (0.5 MB of text); a server that streams without end would
# otherwise grow this process's memory for as long as the request's deadline lets it (10 minutes).
MAX_RESPONSE_CHARS = 16 * 1024 * 1024
_FINISH: dict[str | None, Finish] = {
    "stop": "stop", "tool_call": "tool_calls", "length": "length", "content_filter": "content_filter", "error": "error",
}


class PydanticAIClient:
    """A `ModelClient` over one pydantic-ai `Model`; `secrets` are scrubbed from every error text."""

    def __init__(self, name: str, model: "Model", *, secrets: Sequence[str] = (), supports_images: bool = False,
                 closers: Sequence[Any] = (), problems: Callable[[], list[str]] | None = None) -> None:
        self.name = name
        self.supports_images = supports_images
        self._model = model
        self._secrets = tuple(s for s in secrets if s)
        self._closers = list(closers)
        self._problems = problems

    def problems(self) -> list[str]:
        """What the model side found wrong with the run (a script's failed expectations)."""
        return self._problems() if self._problems is not None else []

    async def request(self, system: str, messages: Sequence[Message], tools: Sequence[ToolSpec],
                      settings: RequestSettings, on_delta: DeltaSink) -> ModelTurn:
        from pydantic_ai.direct import model_request_stream
        from pydantic_ai.models import ModelRequestParameters
        from pydantic_ai.tools import ToolDefinition

        params = ModelRequestParameters(
            function_tools=[ToolDefinition(name=t.name, description=t.description, parameters_json_schema=t.parameters) for t in tools],
            allow_text_output=True,
        )
        history = to_pydantic(system, messages)
        streamed = False
        size = 0
        try:
            async with model_request_stream(self._model, history, model_settings=_settings(settings),
                                            model_request_parameters=params) as stream:
                async for event in stream:
                    size += _event_chars(event)
                    if size > MAX_RESPONSE_CHARS:
                        raise _TooLarge  # leaving the stream closes the connection: nothing more is read
                    streamed = await _forward(event, on_delta) or streamed
                response = stream.get()
        except _TooLarge:
            raise ProviderError(f"the model's response passed {MAX_RESPONSE_CHARS >> 20} MiB and was cut off", status=None,
                                retryable=False, partial=streamed) from None
        except Exception as exc:  # every provider failure becomes one ProviderError
            raise self._error(exc, streamed) from None
        return from_pydantic(response)

    def _error(self, exc: BaseException, partial: bool) -> ProviderError:
        from pydantic_ai.exceptions import ContentFilterError, ModelHTTPError

        if isinstance(exc, ContentFilterError):
            return ProviderError("the provider refused the content", status=None, retryable=False, partial=partial)
        status = exc.status_code if isinstance(exc, ModelHTTPError) else None
        retry_after = _retry_after(exc)
        retryable = status is None or status in _RETRYABLE_STATUS or status >= 500
        detail = scrub(str(exc), self._secrets).splitlines()[0][:200] if str(exc) else ""
        what = f"status {status}" if status is not None else type(exc).__name__
        return ProviderError(f"model request failed ({what}){': ' + detail if detail else ''}", status=status,
                             retryable=retryable, partial=partial, retry_after_s=retry_after)

    async def aclose(self) -> None:
        for closer in self._closers:
            await closer()


def _settings(settings: RequestSettings) -> dict[str, Any]:
    out: dict[str, Any] = {"timeout": settings.timeout_s}
    if settings.max_tokens is not None:
        out["max_tokens"] = settings.max_tokens
    if settings.temperature is not None:
        out["temperature"] = settings.temperature
    return out


def _retry_after(exc: BaseException) -> float | None:
    headers = getattr(exc, "headers", None) or {}
    value = headers.get("retry-after") if isinstance(headers, dict) else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


class _TooLarge(Exception):
    pass


def _event_chars(event: Any) -> int:
    """Characters a stream event adds to the response: its part's (or delta's) text, name and arguments."""
    part = getattr(event, "part", None) or getattr(event, "delta", None)
    n = 0
    for name in ("content", "content_delta", "tool_name", "tool_name_delta", "args", "args_delta"):
        value = getattr(part, name, None)
        if isinstance(value, str):
            n += len(value)
        elif isinstance(value, dict):  # arguments that arrived whole, already parsed
            n += len(repr(value))
    return n


async def _forward(event: Any, on_delta: DeltaSink) -> bool:
    """Stream text and reasoning as they arrive; True when something was sent."""
    from pydantic_ai.messages import (
        PartDeltaEvent,
        PartStartEvent,
        TextPartDelta,
        ThinkingPart,
        ThinkingPartDelta,
    )
    from pydantic_ai.messages import (
        TextPart as PTextPart,
    )

    if isinstance(event, PartStartEvent):
        part = event.part
        if isinstance(part, PTextPart) and part.content:
            await on_delta("text", part.content)
            return True
        if isinstance(part, ThinkingPart) and part.content:
            await on_delta("reasoning", part.content)
            return True
    elif isinstance(event, PartDeltaEvent):
        delta = event.delta
        if isinstance(delta, TextPartDelta) and delta.content_delta:
            await on_delta("text", delta.content_delta)
            return True
        if isinstance(delta, ThinkingPartDelta) and delta.content_delta:
            await on_delta("reasoning", delta.content_delta)
            return True
    return False


# -- translation ----------------------------------------------------------------------------


def to_pydantic(system: str, messages: Sequence[Message]) -> list["ModelMessage"]:
    """Our conversation in pydantic-ai's form; the system prompt opens the first request."""
    from pydantic_ai.messages import ModelRequest, SystemPromptPart

    out: list[ModelMessage] = []
    pending_system = [SystemPromptPart(system)] if system else []
    for message in messages:
        if message.role == "assistant":
            out.append(_response(message))
            continue
        parts = pending_system + (_tool_returns(message) if message.role == "tool" else [_user_prompt(message)])
        pending_system = []
        out.append(ModelRequest(parts=parts))
    return out


def _user_prompt(message: Message) -> Any:
    from pydantic_ai.messages import BinaryContent, UserPromptPart

    content: list[Any] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            content.append(part.text)
        elif isinstance(part, ImagePart):
            import base64

            content.append(BinaryContent(data=base64.b64decode(part.data), media_type=part.media_type))
    return UserPromptPart(content if len(content) != 1 or not isinstance(content[0], str) else content[0])


def _tool_returns(message: Message) -> list[Any]:
    from pydantic_ai.messages import ToolReturnPart

    return [ToolReturnPart(tool_name=p.tool, content=p.content(), tool_call_id=p.call_id)
            for p in message.parts if isinstance(p, ToolResultPart)]


def _response(message: Message) -> "ModelResponse":
    from pydantic_ai.messages import ModelResponse, ThinkingPart
    from pydantic_ai.messages import TextPart as PTextPart
    from pydantic_ai.messages import ToolCallPart as PToolCall

    parts: list[Any] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            parts.append(PTextPart(content=part.text))
        elif isinstance(part, ReasoningPart):
            parts.append(ThinkingPart(content=part.text))
        elif isinstance(part, ToolCallPart):
            parts.append(PToolCall(tool_name=part.tool, args=part.arguments, tool_call_id=part.call_id))
    return ModelResponse(parts=parts)


def from_pydantic(response: "ModelResponse") -> ModelTurn:
    from pydantic_ai.messages import TextPart as PTextPart
    from pydantic_ai.messages import ThinkingPart
    from pydantic_ai.messages import ToolCallPart as PToolCall

    parts: list[Part] = []
    for part in response.parts:
        if isinstance(part, PTextPart) and part.content:
            parts.append(TextPart(part.content))
        elif isinstance(part, ThinkingPart) and part.content:
            parts.append(ReasoningPart(part.content))
        elif isinstance(part, PToolCall):
            args = part.args if isinstance(part.args, str) else _json(part.args)
            parts.append(ToolCallPart(part.tool_call_id or "", part.tool_name, args or ""))
    usage = Usage(response.usage.input_tokens or 0, response.usage.output_tokens or 0, 1)
    finish = _FINISH.get(response.finish_reason, "stop")
    if finish == "stop" and any(isinstance(p, ToolCallPart) for p in parts):
        finish = "tool_calls"
    return ModelTurn(tuple(parts), finish, usage, response.model_name or "")


def _json(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False) if value is not None else ""


# -- building clients --------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _tls_context() -> "ssl.SSLContext":
    """The SDKs' default TLS context, built once per process: building it loads the CA bundle (about 50 ms),
    and a batch opens a client per task."""
    import httpx2

    return httpx2.create_ssl_context()


def openai_chat_client(name: str, model_name: str, *, base_url: str | None, api_key: str | None, timeout_s: float,
                       problems: Callable[[], list[str]] | None = None) -> PydanticAIClient:
    """Chat Completions (OpenAI, or any OpenAI-compatible server: Ollama, vLLM, llama.cpp, OpenRouter)."""
    from openai import AsyncOpenAI, DefaultAsyncHttpxClient
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    # The SDK insists on some key; a local server without authentication gets a placeholder.
    client = AsyncOpenAI(api_key=api_key or "not-needed", base_url=base_url, max_retries=0, timeout=timeout_s,
                         http_client=DefaultAsyncHttpxClient(verify=_tls_context(), timeout=timeout_s))
    model = OpenAIChatModel(model_name, provider=OpenAIProvider(openai_client=client))
    return PydanticAIClient(name, model, secrets=[api_key or ""], closers=[client.close], problems=problems)


def openai_responses_client(name: str, model_name: str, *, base_url: str | None, api_key: str, timeout_s: float) -> PydanticAIClient:
    """OpenAI's own API (the Responses API)."""
    from openai import AsyncOpenAI, DefaultAsyncHttpxClient
    from pydantic_ai.models.openai import OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider

    client = AsyncOpenAI(api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout_s,
                         http_client=DefaultAsyncHttpxClient(verify=_tls_context(), timeout=timeout_s))
    model = OpenAIResponsesModel(model_name, provider=OpenAIProvider(openai_client=client))
    return PydanticAIClient(name, model, secrets=[api_key], supports_images=True, closers=[client.close])


def anthropic_client(name: str, model_name: str, *, base_url: str | None, api_key: str, timeout_s: float) -> PydanticAIClient:
    from anthropic import AsyncAnthropic, DefaultAsyncHttpxClient
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    client = AsyncAnthropic(api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout_s,
                            http_client=DefaultAsyncHttpxClient(verify=_tls_context(), timeout=timeout_s))
    model = AnthropicModel(model_name, provider=AnthropicProvider(anthropic_client=client))
    return PydanticAIClient(name, model, secrets=[api_key], supports_images=True, closers=[client.close])
