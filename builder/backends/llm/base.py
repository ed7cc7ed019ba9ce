"""Types shared by every LLM backend: requests, responses, usage and the protocol."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

from builder.backends.llm.config import OpenAIModelConfig, VLLMModelConfig
from builder.secrets import mask_string

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
    """The answer to one request; `text` is None exactly when it failed.

    `error` starts with the drop reason (`llm_failed` or `llm_truncated`) and goes on
    with details. `transport` marks failures where no answer came back at all (server
    unreachable, timeouts, 5xx or 429 after every retry, rejected credentials), which a
    rerun may cure; the other failures are about the answer itself. `reasoning` is the
    server's separate reasoning channel, when it has one; `source` the server that
    answered, when one did over HTTP; `cached_tokens` how many prompt tokens the server
    says it served from its prompt cache (`usage.prompt_tokens_details.cached_tokens`, or
    llama-server's `timings.cache_n` where the usage has no such detail).
    """

    text: str | None
    error: str | None
    cached: bool
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0
    reasoning: str | None = None
    transport: bool = False
    source: str | None = field(default=None, compare=False)
    cached_tokens: int = 0

    @property
    def ok(self) -> bool:
        return self.text is not None

    @property
    def reason(self) -> str | None:
        """The short snake_case drop reason, or None for an answer."""
        return None if self.error is None else self.error.split(":", 1)[0]

    @classmethod
    def failed(cls, detail: str, retries: int = 0, transport: bool = False) -> ChatResponse:
        return cls(text=None, error=f"llm_failed: {detail}", cached=False, retries=retries, transport=transport)

    @classmethod
    def truncated(cls, detail: str, retries: int = 0) -> ChatResponse:
        return cls(text=None, error=f"llm_truncated: {detail}", cached=False, retries=retries)


@dataclass
class LLMUsage:
    """Cumulative counters; subtract two snapshots to get one stage's share.

    `transport_failures` counts the failed requests that never got an answer (see
    `ChatResponse.transport`); `last_transport_error` says what the last one was and
    where it was sent, so a runner can tell an outage from bad answers. `cached_tokens`
    are the prompt tokens of answered calls that the server served from its prompt cache.
    """

    calls: int = 0
    cache_hits: int = 0
    retries: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    transport_failures: int = 0
    last_transport_error: str | None = None

    def _combine(self, other: LLMUsage, sign: int) -> LLMUsage:
        counts = [getattr(self, f.name) + sign * getattr(other, f.name) for f in fields(self)
                  if isinstance(getattr(self, f.name), int)]
        if sign > 0:
            last = other.last_transport_error or self.last_transport_error
        else:
            # after - before: the share had a transport error only if it counted one.
            last = self.last_transport_error if self.transport_failures > other.transport_failures else None
        return LLMUsage(*counts, last_transport_error=last)

    def __add__(self, other: LLMUsage) -> LLMUsage:
        return self._combine(other, 1)

    def __sub__(self, other: LLMUsage) -> LLMUsage:
        return self._combine(other, -1)

    def copy(self) -> LLMUsage:
        return self._combine(LLMUsage(), 1)

    def record(self, responses: Iterable[ChatResponse], source: str = "") -> None:
        """Count a finished batch; cached answers cost nothing, so their tokens are skipped.

        `source` (the server's address) is added to a transport error's message.
        """
        for r in responses:
            if r.cached:
                self.cache_hits += 1
                continue
            self.retries += r.retries
            if r.ok:
                self.calls += 1
                self.prompt_tokens += r.prompt_tokens
                self.completion_tokens += r.completion_tokens
                self.cached_tokens += r.cached_tokens
                continue
            self.failures += 1
            if r.transport:
                self.transport_failures += 1
                # The address may carry credentials (`?api_key=`), and this message is printed.
                self.last_transport_error = mask_string(f"{r.error} ({source})" if source else str(r.error))


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

    # A backend with a cache also has `mark_failed(requests, kind)`: it records that the
    # cached answers to `requests` were unusable (see `LLMCache.mark_failed`).
