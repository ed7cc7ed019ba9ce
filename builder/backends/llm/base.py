"""Types shared by every LLM backend: requests, responses, usage and the protocol."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

from builder.backends.llm.config import OpenAIModelConfig, VLLMModelConfig
from builder.util.secrets import mask_string

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
    llama-server's `timings.cache_n` where the usage has no such detail); `batch` that it
    came back through a provider's batch API (billed at the batch price).
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
    batch: bool = False

    @property
    def ok(self) -> bool:
        return self.text is not None

    @property
    def reason(self) -> str | None:
        """The short snake_case drop reason, or None for an answer."""
        return None if self.error is None else self.error.split(":", 1)[0]

    @classmethod
    def failed(cls, detail: str, retries: int = 0, transport: bool = False) -> ChatResponse:
        # The detail may quote what the server said, a configured key included: it is
        # printed and stored (drops, stats.json), so it is masked here, once.
        return cls(
            text=None, error=f"llm_failed: {mask_string(detail)}", cached=False, retries=retries, transport=transport
        )

    @classmethod
    def truncated(cls, detail: str, retries: int = 0) -> ChatResponse:
        return cls(text=None, error=f"llm_truncated: {detail}", cached=False, retries=retries)


_ATTEMPTS = re.compile(r" after \d+ attempts?$")


def failure_cause(error: str) -> str:
    """What went wrong, without the drop reason or the attempt count, so that requests
    that failed alike count together (`llm_failed: HTTP 500 after 7 attempts` -> `HTTP 500`)."""
    detail = error.split(": ", 1)[1] if error.startswith(("llm_failed: ", "llm_truncated: ")) else error
    return _ATTEMPTS.sub("", detail)


@dataclass
class LLMUsage:
    """Cumulative counters; subtract two snapshots to get one stage's share.

    `transport_failures` counts the failed requests that never got an answer (see
    `ChatResponse.transport`); `last_transport_error` says what the last one was and
    where it was sent, so a runner can tell an outage from bad answers. `cached_tokens`
    are the prompt tokens of answered calls that the server served from its prompt cache.
    `last_error` is the last failure of any kind, and `failure_causes` counts the failures
    by cause (see `failure_cause`), so a build that lost every answer can say why.
    The `batch_*` counters are the share of the answered calls that came back through a
    provider's batch API (included in `calls` and the token totals too), so the ledger
    can price them at the batch rate.
    """

    calls: int = 0
    cache_hits: int = 0
    retries: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    transport_failures: int = 0
    batch_calls: int = 0
    batch_prompt_tokens: int = 0
    batch_completion_tokens: int = 0
    batch_cached_tokens: int = 0
    last_transport_error: str | None = None
    last_error: str | None = None
    failure_causes: dict[str, int] = field(default_factory=dict)

    def _combine(self, other: LLMUsage, sign: int) -> LLMUsage:
        counts = [
            getattr(self, f.name) + sign * getattr(other, f.name)
            for f in fields(self)
            if isinstance(getattr(self, f.name), int)
        ]
        causes = {
            c: self.failure_causes.get(c, 0) + sign * other.failure_causes.get(c, 0)
            for c in {**self.failure_causes, **other.failure_causes}
        }
        causes = {c: n for c, n in sorted(causes.items()) if n}
        if sign > 0:
            last = other.last_transport_error or self.last_transport_error
            last_error = other.last_error or self.last_error
        else:
            # after - before: the share had a transport error only if it counted one.
            last = self.last_transport_error if self.transport_failures > other.transport_failures else None
            last_error = self.last_error if self.failures > other.failures else None
        return LLMUsage(*counts, last_transport_error=last, last_error=last_error, failure_causes=causes)

    def as_record(self) -> dict[str, Any]:
        """The counters as stats.json stores them; the causes only when a request failed."""
        record = {f.name: getattr(self, f.name) for f in fields(self)}
        if not self.failures:
            del record["last_error"], record["failure_causes"]
        if not self.batch_calls:
            # Left out while nothing went through a batch, so synchronous builds' stats stay as they were.
            for name in ("batch_calls", "batch_prompt_tokens", "batch_completion_tokens", "batch_cached_tokens"):
                del record[name]
        return record

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
                if r.batch:
                    self.batch_calls += 1
                    self.batch_prompt_tokens += r.prompt_tokens
                    self.batch_completion_tokens += r.completion_tokens
                    self.batch_cached_tokens += r.cached_tokens
                continue
            self.failures += 1
            # The address may carry credentials (`?api_key=`), and these messages are printed.
            self.last_error = mask_string(f"{r.error} ({source})" if source and r.transport else str(r.error))
            cause = failure_cause(mask_string(str(r.error)))
            self.failure_causes[cause] = self.failure_causes.get(cause, 0) + 1
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
