"""The seam between our loop and model providers.

A `ModelClient` takes the system prompt, the conversation and the tool
definitions, streams text and reasoning deltas to a callback, and returns the
finished turn. It makes exactly one attempt: retries, backoff, cancellation
and events belong to the loop. `providers.py` implements it with pydantic-ai.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Literal, Protocol, Sequence

from .messages import Message, Part

Finish = Literal["stop", "tool_calls", "length", "content_filter", "error"]
# (kind, text): kind is "text" or "reasoning".
DeltaSink = Callable[[str, str], Awaitable[None]]


@dataclass(frozen=True)
class ToolSpec:
    """A tool definition as the model sees it."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class RequestSettings:
    """What every model request of a run is sent with: output token cap, temperature, timeout."""

    max_tokens: int | None = None
    temperature: float | None = None
    timeout_s: float = 600.0


@dataclass
class Usage:
    """Tokens and requests spent: by one turn, or summed over a run (`add`)."""

    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0

    def add(self, other: "Usage") -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.requests += other.requests

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, int]:
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens, "requests": self.requests}


@dataclass(frozen=True)
class ModelTurn:
    """One finished model response."""

    parts: tuple[Part, ...]
    finish: Finish
    usage: Usage = field(default_factory=Usage)
    model_name: str = ""


class ProviderError(Exception):
    """A failed model request. The message never holds a secret (`scrub` it before raising).

    `status` is the HTTP status when there was one; `retryable` says whether
    the same request may succeed later (429, 5xx, a dropped connection);
    `partial` says that deltas were already streamed to the host.
    """

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False, partial: bool = False,
                 retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.retryable = retryable
        self.partial = partial
        self.retry_after_s = retry_after_s


class ModelClient(Protocol):
    """One provider and model. `name` is `provider:model`, safe to show and record."""

    name: str
    supports_images: bool

    async def request(
        self,
        system: str,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: RequestSettings,
        on_delta: DeltaSink,
    ) -> ModelTurn:
        """One attempt; raises `ProviderError` on any failure."""
        ...

    def problems(self) -> list[str]:
        """What the model side found wrong with the run (a scripted model's failed expectations)."""
        ...

    async def aclose(self) -> None: ...


def scrub(text: str, secrets: Sequence[str]) -> str:
    """`text` with every secret replaced by `***` (provider error bodies sometimes echo request headers)."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return text
