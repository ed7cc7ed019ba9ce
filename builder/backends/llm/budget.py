"""A spending limit checked before every request a metered backend sends.

The gate admits a request only while what was spent plus the worst case of every request
in flight, this one included, stays within each limit: calls count exactly; tokens and
USD count a request at its estimated prompt plus its whole max_tokens until its answer
says what it really cost. Answers served from the LLM cache never reach the gate, so
they cost nothing. After the first refusal the gate stays shut: the build stops asking
rather than slipping smaller requests into what is left, and a refused request comes
back as a failure that got no answer (`transport`), so its stage is left unfinished and
a rerun asks exactly those again.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from builder.backends.llm.base import ChatRequest, ChatResponse

BUDGET_SPENT = "budget_spent"
# Prompt tokens per character assumed before any answer reports a count: about one token
# per two characters overestimates English and most scripts, so the first requests err
# on the safe side; each answer then teaches the gate the server's real ratio.
_FIRST_TOKENS_PER_CHAR = 0.5


@dataclass
class Spent:
    calls: int = 0
    tokens: int = 0
    usd: float = 0.0


@dataclass(frozen=True)
class _Ticket:
    tokens: int
    usd: float


class SpendGate:
    """Thread-safe: every backend of a run shares one gate, each from its own event loop."""

    def __init__(self, calls: int | None = None, tokens: int | None = None, usd: float | None = None) -> None:
        self.limit = {k: v for k, v in (("calls", calls), ("tokens", tokens), ("usd", usd)) if v is not None}
        self.spent = Spent()
        self.stage: str | None = None  # the stage now asking (the runner names it)
        self.stopped_at: str | None = None  # the stage of the first refusal
        self.refused = 0
        self._held = Spent()  # worst cases of the requests in flight
        self._tokens_per_char = 0.0  # the highest ratio answers have shown
        self._lock = threading.Lock()

    def _estimate(self, request: ChatRequest, max_tokens: int, price: Any) -> _Ticket:
        chars = sum(len(m.get("content") or "") for m in request.messages)
        prompt = math.ceil(chars * (self._tokens_per_char or _FIRST_TOKENS_PER_CHAR))
        usd = price.usd(prompt, 0, max_tokens) if price is not None else 0.0
        return _Ticket(prompt + max_tokens, usd)

    def admit(self, request: ChatRequest, max_tokens: int, price: Any) -> _Ticket | None:
        """A ticket to send `request`, or None (and the gate shuts) when it might not fit."""
        with self._lock:
            if not self.refused:
                ticket = self._estimate(request, max_tokens, price)
                worst = {
                    "calls": self.spent.calls + self._held.calls + 1,
                    "tokens": self.spent.tokens + self._held.tokens + ticket.tokens,
                    "usd": self.spent.usd + self._held.usd + ticket.usd,
                }
                if all(worst[k] <= limit for k, limit in self.limit.items()):
                    self._held = Spent(
                        self._held.calls + 1, self._held.tokens + ticket.tokens, self._held.usd + ticket.usd
                    )
                    return ticket
                self.stopped_at = self.stage
            self.refused += 1
            return None

    def settle(self, ticket: _Ticket, request: ChatRequest, answer: ChatResponse, price: Any) -> None:
        """Replace a request's worst case by what its answer cost (a failure costs its call)."""
        with self._lock:
            self._held = Spent(self._held.calls - 1, self._held.tokens - ticket.tokens, self._held.usd - ticket.usd)
            self.spent.calls += 1
            self.spent.tokens += answer.prompt_tokens + answer.completion_tokens
            if price is not None:
                self.spent.usd += price.usd(answer.prompt_tokens, answer.cached_tokens, answer.completion_tokens)
            chars = sum(len(m.get("content") or "") for m in request.messages)
            if chars and answer.prompt_tokens:
                self._tokens_per_char = max(self._tokens_per_char, answer.prompt_tokens / chars)

    def refusal(self) -> ChatResponse:
        limits = ", ".join(f"{k} {v:g}" for k, v in self.limit.items())
        return ChatResponse(
            text=None,
            error=f"{BUDGET_SPENT}: not sent, the build's budget ({limits}) is spent",
            cached=False,
            transport=True,
        )


def metered_now(
    gate: SpendGate | None,
    request: ChatRequest,
    max_tokens: int,
    price: Any,
    send: Callable[[ChatRequest, int], ChatResponse],
) -> ChatResponse:
    """`metered` for a backend that answers in process, without an event loop (the mock)."""
    if gate is None:
        return send(request, max_tokens)
    ticket = gate.admit(request, max_tokens, price)
    if ticket is None:
        return gate.refusal()
    answer = ChatResponse.failed("not answered", transport=True)
    try:
        answer = send(request, max_tokens)
    finally:
        gate.settle(ticket, request, answer, price)
    return answer


async def metered(
    gate: SpendGate | None,
    request: ChatRequest,
    max_tokens: int,
    price: Any,
    send: Callable[[ChatRequest, int], Awaitable[ChatResponse]],
) -> ChatResponse:
    """`send(request, max_tokens)` when the gate admits it (always, without a gate)."""
    if gate is None:
        return await send(request, max_tokens)
    ticket = gate.admit(request, max_tokens, price)
    if ticket is None:
        return gate.refusal()
    answer = ChatResponse.failed("not answered", transport=True)
    try:
        answer = await send(request, max_tokens)
    finally:
        gate.settle(ticket, request, answer, price)
    return answer
