"""Types shared by every LLM backend: requests, responses, usage and the protocol."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any, Protocol

from builder.backends.llm.config import OpenAIModelConfig, VLLMModelConfig

Message = dict[str, str]


class BackendUnavailable(RuntimeError):
    """The backend cannot be started here (missing extra, missing API key, ...)."""


@dataclass(frozen=True)
class ChatRequest:
    """One conversation to send; frozen and tuple-based so it can be hashed."""

    messages: tuple[Message, ...]
    item_id: str = ""
    json_schema: dict[str, Any] | None = None
    max_tokens: int | None = None

    @classmethod
    def of(
        cls,
        messages: Iterable[Message],
        item_id: str = "",
        json_schema: dict[str, Any] | None = None,
        max_tokens: int | None = None,
    ) -> ChatRequest:
        """Build a request from any iterable of messages (usually a list)."""
        return cls(tuple(dict(m) for m in messages), item_id, json_schema, max_tokens)

    def __hash__(self) -> int:
        # Dicts are unhashable, so hash a frozen view of the conversation instead.
        return hash((tuple(tuple(sorted(m.items())) for m in self.messages), self.item_id, self.max_tokens))


@dataclass(frozen=True)
class ChatResponse:
    """The answer to one request; `text` is None exactly when it failed."""

    text: str | None
    error: str | None
    cached: bool
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0

    @property
    def ok(self) -> bool:
        return self.text is not None

    @classmethod
    def failed(cls, reason: str, retries: int = 0) -> ChatResponse:
        return cls(text=None, error=f"llm_failed: {reason}", cached=False, retries=retries)


@dataclass
class LLMUsage:
    """Cumulative counters; subtract two snapshots to get one stage's share."""

    calls: int = 0
    cache_hits: int = 0
    retries: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def _combine(self, other: LLMUsage, sign: int) -> LLMUsage:
        return LLMUsage(*(getattr(self, f.name) + sign * getattr(other, f.name) for f in fields(self)))

    def __add__(self, other: LLMUsage) -> LLMUsage:
        return self._combine(other, 1)

    def __sub__(self, other: LLMUsage) -> LLMUsage:
        return self._combine(other, -1)

    def copy(self) -> LLMUsage:
        return self._combine(LLMUsage(), 1)

    def record(self, responses: Iterable[ChatResponse]) -> None:
        """Count a finished batch; cached answers cost nothing, so their tokens are skipped."""
        for r in responses:
            if r.cached:
                self.cache_hits += 1
                continue
            self.retries += r.retries
            if r.ok:
                self.calls += 1
                self.prompt_tokens += r.prompt_tokens
                self.completion_tokens += r.completion_tokens
            else:
                self.failures += 1


class LLMBackend(Protocol):
    """What the build stages need from a model."""

    name: str
    usage: LLMUsage

    @property
    def config(self) -> OpenAIModelConfig | VLLMModelConfig:
        """The model's settings from the recipe."""
        ...

    def chat_many(
        self,
        requests: Sequence[ChatRequest],
        on_done: Callable[[int], None] | None = None,
    ) -> list[ChatResponse]:
        """Answer every request, in order; never raises for a failed request."""
        ...

    def close(self) -> None:
        """Release the client, threads or GPU memory the backend holds."""
        ...
