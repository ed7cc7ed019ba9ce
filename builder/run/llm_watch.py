"""Watching an LLM backend for requests that failed for transport reasons.

A stage that lost requests to an outage (connection refused, timeouts, 429/5xx that
outlasted the retries) must not be checkpointed as finished: its answers are not the
model's. Failed requests are never cached, so running the stage again re-sends exactly
those. The runner wraps each backend in `WatchedLLM` and reads its `TransportLog`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from builder.backends.llm import LLMBackend, LLMUsage
from builder.backends.llm.base import ChatRequest, ChatResponse

# Failures that are answers of a kind, not transport trouble: retrying later would not help.
_ANSWER_FAILURES = ("empty answer",)


def is_transport_failure(response: ChatResponse) -> bool:
    if response.ok or response.error is None:
        return False
    reason = response.error.removeprefix("llm_failed: ")
    return not reason.startswith(_ANSWER_FAILURES)


@dataclass
class TransportLog:
    """Transport failures so far, across every backend, and the last one seen."""

    failures: int = 0
    last_error: str | None = None


class WatchedLLM:
    """A backend that notes transport failures in a shared log; otherwise the backend itself."""

    def __init__(self, backend: LLMBackend, log: TransportLog):
        self._backend = backend
        self._log = log

    def chat_many(self, requests: Sequence[ChatRequest],
                  on_done: Callable[[int], None] | None = None) -> list[ChatResponse]:
        responses = self._backend.chat_many(requests, on_done)
        for r in responses:
            if is_transport_failure(r):
                self._log.failures += 1
                base_url = getattr(self._backend.config, "base_url", None)
                where = f"model {self._backend.name}" + (f" at {base_url}" if base_url else "")
                self._log.last_error = f"{r.error} ({where})"
        return responses

    @property
    def name(self) -> str:
        return self._backend.name

    @property
    def usage(self) -> LLMUsage:
        return self._backend.usage

    @property
    def config(self) -> Any:
        return self._backend.config

    def close(self) -> None:
        self._backend.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)
