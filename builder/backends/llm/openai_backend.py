"""Backend for any OpenAI-compatible chat completions endpoint."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import queue
import random
import re
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import replace
from typing import Any, TypeVar, cast

from builder.backends.llm.base import BackendUnavailable, ChatRequest, ChatResponse, LLMUsage
from builder.backends.llm.batch_book import BatchBook
from builder.backends.llm.batch_mode import BatchAsker
from builder.backends.llm.budget import SpendGate, metered
from builder.backends.llm.cache import CacheWriter, LLMCache, Origin, fill, key_for, split_cached
from builder.backends.llm.config import OpenAIModelConfig
from builder.backends.llm.endpoints import Endpoint, Endpoints, ssl_context
from builder.backends.llm.openai_replies import answer_of, classify, decoded
from builder.backends.llm.openai_requests import dumps
from builder.backends.llm.pool import AnsweredPool, LoopPool
from builder.util.secrets import remember_secret

T = TypeVar("T")

# A 200 with no content is usually a hiccup; retry it a little, not max_retries times.
_EMPTY_RETRIES = 2
# Local servers ignore the key, but the SDK insists on having one.
_PLACEHOLDER_KEY = "sk-local-placeholder"
# How a server says it cannot take the request as sent: a 400 or 422 ...
_REJECTED = re.compile(r"^llm_failed: HTTP (400|422)\b")
# ... and words that say the rejected part was the response format.
_FORMAT_WORDS = re.compile(r"response_format|json_schema|schema|grammar", re.IGNORECASE)


def resolve_api_key(config: OpenAIModelConfig) -> str:
    """Read the key from the configured environment variable only, never from the recipe."""
    key = os.environ.get(config.api_key_env)
    if key:
        remember_secret(key)  # a server may quote it back in an error message
        return key
    if config.local:
        return _PLACEHOLDER_KEY
    raise BackendUnavailable(
        f"model {config.model!r} needs an API key: set the environment variable "
        f"{config.api_key_env} (or point base_url at a local server)"
    )


def warm_up() -> None:
    """Do now, on the calling thread, the one-time work of a first client: importing the
    SDK (done by importing this module) and the shared SSL context."""
    ssl_context()


class _LoopThread:
    """A private event loop on a daemon thread, so callers need no loop of their own."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


class OpenAIBackend:
    """Sends chat requests concurrently, retries transient failures and caches answers.

    With several servers (`base_urls`) each one gets up to `max_concurrency` requests,
    and each attempt goes to the least busy (see `endpoints`).
    """

    def __init__(
        self,
        name: str,
        config: OpenAIModelConfig,
        cache: LLMCache,
        gate: SpendGate | None = None,
        batches: BatchBook | None = None,
    ) -> None:
        self.name = name
        self._gate = gate  # the run's spending limit, checked before each request sent
        self.config = config
        self.cache = cache
        self.usage = LLMUsage()
        self._usage_lock = threading.Lock()
        self._endpoints = Endpoints(
            config.endpoints, resolve_api_key(config), config.timeout_s, config.max_concurrency, config.max_reply_bytes
        )
        # Why the server refused `response_format`, once it has: from then on the prompt
        # alone asks for JSON (see `_sent`).
        self.schema_refused: str | None = None
        # Attempts that ran out of timeout_s, and how long the last one waited: counted as
        # they happen, so the progress line can say so long before the batch ends.
        self.timed_out = 0
        self.last_wait_s = 0.0
        self._writer = CacheWriter(cache)
        self._slots = asyncio.Semaphore(config.max_concurrency * len(self._endpoints.all))
        self._loop = _LoopThread(f"llm-{name}")
        self._loop.submit(self._endpoints.prepare()).result()
        self._closed = False
        # With `batch: true`, missing answers are asked through provider batches recorded in `batches`.
        self._batch = (
            BatchAsker(name, config, cache, batches, resolve_api_key(config), self._key, self._body, gate)
            if config.batch and batches is not None
            else None
        )

    def chat_many(
        self,
        requests: Sequence[ChatRequest],
        on_done: Callable[[int], None] | None = None,
    ) -> list[ChatResponse]:
        if self._closed:
            raise RuntimeError(f"LLM backend {self.name!r} is closed")
        if self._batch is not None:
            answers = self._batch.answer(requests)
            if on_done is not None:
                on_done(len(answers))
            with self._usage_lock:
                self.usage.record(answers)
            return answers
        keys = [self._key(r) for r in requests]
        responses, missing = split_cached(self.cache, keys)
        hits = len(requests) - sum(len(p) for p in missing.values())
        if on_done is not None and hits:
            on_done(hits)
        if missing:
            try:
                self._wait(requests, responses, missing, on_done)
            finally:
                # Whatever arrived, even before an interrupt, is on disk when we return.
                self._writer.flush()
        done = cast(list[ChatResponse], responses)
        with self._usage_lock:
            self.usage.record(done, self._endpoints.source)
        return done

    def open_pool(self) -> LoopPool:
        """A pool that takes requests while others are in flight, within max_concurrency."""
        if self._closed:
            raise RuntimeError(f"LLM backend {self.name!r} is closed")
        if self._batch is not None:
            return AnsweredPool(self.chat_many)
        return LoopPool(
            self._loop.loop,
            key=self._key,
            ask=self._ask_bounded,
            cache=self.cache,
            writer=self._writer,
            record=self._record_one,
            store=self._store,
        )

    def settle_batches(self) -> None:
        """The stage now ending has counted the batch answers it was handed (see BatchAsker.settle)."""
        if self._batch is not None:
            self._batch.settle()

    def mark_failed(self, requests: Sequence[ChatRequest], kind: str) -> None:
        """Mark the cached answers to `requests` as unusable (`kind` is the drop reason)."""
        self._writer.flush()
        self.cache.mark_failed((self._key(r) for r in requests), kind)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._loop.submit(self._endpoints.close()).result()
        self._loop.stop()
        self._writer.close()

    def __enter__(self) -> OpenAIBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _wanted_format(self, request: ChatRequest) -> dict[str, Any] | None:
        """The response_format the recipe asks for: the request's schema, when it has one."""
        if not (self.config.structured_output and request.json_schema):
            return None
        return {"type": "json_schema", "json_schema": {"name": "answer", "schema": request.json_schema}}

    def _key(self, request: ChatRequest) -> str:
        # Keyed by what the recipe asks for, not by what the server took, so a rerun finds
        # the answers before it learns again that the server refuses schemas.
        sampling = self.config.sampling(request.max_tokens)
        return key_for("openai", self.config.model, sampling, request.messages, self._wanted_format(request))

    def _wait(
        self,
        requests: Sequence[ChatRequest],
        responses: list[ChatResponse | None],
        missing: dict[str, list[int]],
        on_done: Callable[[int], None] | None,
    ) -> None:
        """Run the batch on the private loop; progress callbacks run here, on the caller's thread."""
        progress: queue.SimpleQueue[int | None] | None = queue.SimpleQueue() if on_done else None
        future = self._loop.submit(self._answer_all(requests, responses, missing, progress))
        try:
            if on_done is not None and progress is not None:
                while (count := progress.get()) is not None:
                    on_done(count)
            future.result()
        except BaseException:
            future.cancel()
            raise

    async def _answer_all(
        self,
        requests: Sequence[ChatRequest],
        responses: list[ChatResponse | None],
        missing: dict[str, list[int]],
        progress: queue.SimpleQueue[int | None] | None,
    ) -> None:
        async def one(key: str, positions: list[int]) -> None:
            async with self._slots:
                answer = await self._ask(requests[positions[0]])
            self._store(key, answer)
            fill(responses, positions, answer)
            if progress is not None:
                progress.put(len(positions))

        try:
            await asyncio.gather(*(one(k, p) for k, p in missing.items()))
        finally:
            if progress is not None:
                progress.put(None)

    def _store(self, key: str, answer: ChatResponse) -> None:
        """Hand a good answer to the cache writer, with where it came from."""
        if answer.ok:
            origin = Origin(self.config.model, self.cache.stage, answer.source, answer.cached_tokens, answer.batch)
            self._writer.put(
                key, cast(str, answer.text), answer.prompt_tokens, answer.completion_tokens, answer.reasoning, origin
            )

    async def _ask_bounded(self, request: ChatRequest) -> ChatResponse:
        async with self._slots:
            return await self._ask(request)

    def _record_one(self, response: ChatResponse) -> None:
        with self._usage_lock:
            self.usage.record([response], self._endpoints.source)

    def _body(self, request: ChatRequest, max_tokens: int) -> dict[str, Any]:
        cfg = self.config
        body: dict[str, Any] = {
            "model": cfg.model,
            "messages": list(request.messages),
            "temperature": cfg.temperature,
            "max_tokens": max_tokens,
        }
        response_format = None if self.schema_refused else self._wanted_format(request)
        optional = {"top_p": cfg.top_p, "seed": cfg.seed, "response_format": response_format}
        body.update({k: v for k, v in optional.items() if v is not None})
        return {**body, **cfg.extra_body}

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        cfg = self.config
        if retry_after is not None:
            return min(retry_after, cfg.backoff_max_s)
        # Full jitter keeps many clients that failed together from retrying together.
        return random.uniform(0.0, min(cfg.backoff_max_s, cfg.backoff_initial_s * 2**attempt))

    async def _ask(self, request: ChatRequest) -> ChatResponse:
        """One answer; an answer cut off at max_tokens is asked once more with twice the budget."""
        budget = request.max_tokens or self.config.max_tokens
        first = await self._metered(request, budget)
        if first.reason != "llm_truncated":
            return first
        second = await self._metered(request, 2 * budget)
        retries = first.retries + 1 + second.retries
        if not second.ok:
            return replace(second, retries=retries)
        return replace(
            second,
            retries=retries,
            prompt_tokens=first.prompt_tokens + second.prompt_tokens,
            completion_tokens=first.completion_tokens + second.completion_tokens,
            cached_tokens=first.cached_tokens + second.cached_tokens,
        )

    async def _metered(self, request: ChatRequest, max_tokens: int) -> ChatResponse:
        return await metered(self._gate, request, max_tokens, self.config.price, self._sent)

    async def _sent(self, request: ChatRequest, max_tokens: int) -> ChatResponse:
        """The answer to one request; when a server rejects it with a response_format, the
        request is asked again without one, and if the server then answers (or said the
        format was what it rejected) the model falls back to prompt-only JSON for good."""
        body = self._body(request, max_tokens)
        answer = await self._with_retries(body)
        if "response_format" not in body or not _REJECTED.match(answer.error or ""):
            return answer
        plain = await self._with_retries({k: v for k, v in body.items() if k != "response_format"})
        named = bool(_FORMAT_WORDS.search(answer.error or ""))
        if not (plain.ok or named):
            return answer
        if self.schema_refused is None:
            self.schema_refused = (answer.error or "").removeprefix("llm_failed: ")
        return replace(plain, retries=answer.retries + 1 + plain.retries)

    async def _with_retries(self, body: dict[str, Any]) -> ChatResponse:
        """An answer or a failure; an answer cut off at max_tokens is a `truncated` failure."""
        try:
            payload = dumps(body)
        except ValueError as error:  # e.g. NaN in extra_body: no server could read it
            return ChatResponse.failed(f"unsendable request: {error}"[:200], 0)
        attempts = self.config.max_retries + 1
        empties = 0
        endpoint: Endpoint | None = None
        for attempt in range(attempts):
            retry_after: float | None = None
            # A retry goes to another server when there is one: the last may be down.
            endpoint = self._endpoints.pick(avoid=endpoint)
            started = time.perf_counter()
            try:
                answer = answer_of(decoded(await endpoint.send(payload, attempt)), attempt, body["max_tokens"])
            except Exception as error:  # one bad request must not sink the batch
                reason, retryable, retry_after, transport = classify(error)
                if reason == "timeout":
                    self.timed_out += 1
                    self.last_wait_s = time.perf_counter() - started
                    reason = (
                        f"timeout: no whole reply within timeout_s={self.config.timeout_s:g} s "
                        f"(the attempt waited {self.last_wait_s:.1f} s)"
                    )
                if not retryable:
                    return ChatResponse.failed(reason, attempt, transport)
            else:
                if answer.ok or answer.reason == "llm_truncated":
                    return replace(answer, source=endpoint.url or str(endpoint.client.base_url))
                reason, transport, empties = "empty answer", False, empties + 1
                if empties > _EMPTY_RETRIES:
                    break
            if attempt + 1 < attempts:
                await asyncio.sleep(self._delay(attempt, retry_after))
        return ChatResponse.failed(f"{reason} after {attempt + 1} attempts", attempt, transport)
