"""A request pool that takes new requests while earlier ones are still in flight.

`chat_many` answers one batch and returns, so a stage whose requests come in kinds, or
whose answers lead to re-asks, would send them as rounds and leave the endpoint idle
between them. A pool accepts requests at any time and bounds them all by the backend's
one concurrency limit, so a stage keeps the endpoint full until its last answer (see
`jobs.run_jobs`, which drives it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future
from dataclasses import replace
from typing import Protocol

from builder.backends.llm.base import ChatRequest, ChatResponse
from builder.backends.llm.cache import CacheWriter, LLMCache, split_cached


class ChatPool(Protocol):
    def submit(self, requests: Sequence[ChatRequest]) -> list[Future[ChatResponse]]:
        """One future per request, resolved when its answer (or failure) is in."""
        ...

    def close(self) -> None:
        """Cancel what is still in flight and commit the answers received to the cache."""
        ...


class LoopPool:
    """A `ChatPool` on an event loop running in another thread.

    Cached answers resolve at once; identical requests in flight at the same time are
    sent once and share the answer (the copies count as cache hits, as in `chat_many`).
    `record` counts each answer handed out and `store` hands a fresh one to the cache
    (it keeps only good ones); both run on the loop's thread.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        *,
        key: Callable[[ChatRequest], str],
        ask: Callable[[ChatRequest], Awaitable[ChatResponse]],
        cache: LLMCache,
        writer: CacheWriter,
        record: Callable[[ChatResponse], None],
        store: Callable[[str, ChatResponse], None],
    ) -> None:
        self._loop = loop
        self._key = key
        self._ask = ask
        self._cache = cache
        self._writer = writer
        self._record = record
        self._store = store
        # Touched only on the loop's thread.
        self._waiting: dict[str, list[Future[ChatResponse]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def submit(self, requests: Sequence[ChatRequest]) -> list[Future[ChatResponse]]:
        keys = [self._key(r) for r in requests]
        cached, missing = split_cached(self._cache, keys)
        futures: list[Future[ChatResponse]] = [Future() for _ in requests]
        for future, response in zip(futures, cached):
            if response is not None:
                self._hand_out(future, response)
        if missing:
            work = [(key, requests[at[0]], [futures[i] for i in at]) for key, at in missing.items()]
            self._loop.call_soon_threadsafe(self._start, work)
        return futures

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self._cancel_all(), self._loop).result()
        self._writer.flush()

    def _hand_out(self, future: Future[ChatResponse], response: ChatResponse) -> None:
        self._record(response)
        future.set_result(response)

    def _start(self, work: list[tuple[str, ChatRequest, list[Future[ChatResponse]]]]) -> None:
        for key, request, futures in work:
            if key in self._waiting:
                self._waiting[key].extend(futures)
                continue
            self._waiting[key] = futures
            task = self._loop.create_task(self._answer(key, request))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _answer(self, key: str, request: ChatRequest) -> None:
        try:
            answer = await self._ask(request)
        except BaseException:
            for future in self._waiting.pop(key):
                future.cancel()
            raise
        self._store(key, answer)
        first, *copies = self._waiting.pop(key)
        self._hand_out(first, answer)
        copy = replace(answer, cached=True, retries=0) if answer.ok else answer
        for future in copies:
            self._hand_out(future, copy)

    async def _cancel_all(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class AnsweredPool:
    """A `ChatPool` over a backend that answers a whole batch at once (`chat_many`): each
    submit returns its futures already resolved, or raises what `chat_many` raises."""

    def __init__(self, chat_many: Callable[[Sequence[ChatRequest]], list[ChatResponse]]) -> None:
        self._chat_many = chat_many

    def submit(self, requests: Sequence[ChatRequest]) -> list[Future[ChatResponse]]:
        futures: list[Future[ChatResponse]] = []
        for answer in self._chat_many(requests):
            future: Future[ChatResponse] = Future()
            future.set_result(answer)
            futures.append(future)
        return futures

    def close(self) -> None:
        return None
