"""Running many small conversations at once: each job asks, reads the answer, and may ask again.

A job is a generator: it yields a request, is sent the response, and either yields a
follow-up (a re-ask) or returns its result. `run_jobs` starts every job's first request
together and sends a follow-up the moment the answer before it has been judged, so on a
backend with a pool (`open_pool`) a stage's requests, re-asks included, share one
concurrency bound until the last answer. Other backends (vLLM) go in rounds through
`chat_many`: all first requests in one batch, then all follow-ups, and so on.
Jobs are judged on the caller's thread, never on the backend's event loop.
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Generator, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, TypeVar, cast

from builder.backends.llm.base import ChatRequest, ChatResponse, LLMBackend

if TYPE_CHECKING:  # the pool (asyncio) comes with a backend that opens one
    from builder.backends.llm.pool import ChatPool

T = TypeVar("T")
Job = Generator[ChatRequest, ChatResponse, T]
_PENDING = object()


def _advance(job: Job[T], response: ChatResponse | None) -> tuple[ChatRequest | None, object]:
    """The job's next request, or None and its result."""
    try:
        return (next(job) if response is None else job.send(response)), _PENDING
    except StopIteration as stop:
        return None, stop.value


def run_jobs(backend: LLMBackend, jobs: Sequence[Job[T]], on_done: Callable[[int], None] | None = None) -> list[T]:
    """Each job's result, in order. `on_done(n)` counts progress in jobs: with a pool as
    they finish, in rounds as their first answers come."""
    open_pool: Callable[[], ChatPool] | None = getattr(backend, "open_pool", None)
    if open_pool is None:
        return _in_rounds(backend, jobs, on_done)
    pool = open_pool()
    try:
        return _pooled(pool, jobs, on_done)
    finally:
        pool.close()


def _pooled(pool: ChatPool, jobs: Sequence[Job[T]], on_done: Callable[[int], None] | None) -> list[T]:
    results: list[object] = [_PENDING] * len(jobs)
    answered: queue.SimpleQueue[tuple[int, Future[ChatResponse]]] = queue.SimpleQueue()
    in_flight = 0

    def send(indexes: list[int], requests: list[ChatRequest]) -> None:
        nonlocal in_flight
        in_flight += len(indexes)
        for i, future in zip(indexes, pool.submit(requests), strict=True):
            future.add_done_callback(lambda f, i=i: answered.put((i, f)))

    finished = _step(jobs, range(len(jobs)), [None] * len(jobs), results, send)
    if on_done is not None and finished:
        on_done(finished)
    while in_flight:
        # Take every answer that is already in, so follow-ups go out together.
        ready = [answered.get()]
        while True:
            try:
                ready.append(answered.get_nowait())
            except queue.Empty:
                break
        in_flight -= len(ready)
        finished = _step(jobs, [i for i, _ in ready], [f.result() for _, f in ready], results, send)
        if on_done is not None and finished:
            on_done(finished)
    return cast(list[T], results)


def _step(
    jobs: Sequence[Job[T]],
    indexes: Sequence[int],
    responses: Sequence[ChatResponse | None],
    results: list[object],
    send: Callable[[list[int], list[ChatRequest]], None],
) -> int:
    """Advance the jobs at `indexes`, send their follow-ups, and say how many finished."""
    again: list[int] = []
    requests: list[ChatRequest] = []
    for i, response in zip(indexes, responses):
        request, results[i] = _advance(jobs[i], response)
        if request is not None:
            again.append(i)
            requests.append(request)
    if again:
        send(again, requests)
    return len(indexes) - len(again)


def _in_rounds(backend: LLMBackend, jobs: Sequence[Job[T]], on_done: Callable[[int], None] | None) -> list[T]:
    """Jobs advanced a round at a time; `on_done` follows the first round, answer by answer
    as `chat_many` reports them, so a bar sized to the jobs moves during a long batch."""
    results: list[object] = [_PENDING] * len(jobs)
    current: dict[int, ChatRequest] = {}

    def send(indexes: list[int], requests: list[ChatRequest]) -> None:
        current.update(zip(indexes, requests))

    finished = _step(jobs, range(len(jobs)), [None] * len(jobs), results, send)
    if on_done is not None and finished:
        on_done(finished)
    progress = on_done
    while current:
        order = list(current)
        responses = backend.chat_many([current[i] for i in order], progress)
        progress = None
        current.clear()
        _step(jobs, order, responses, results, send)
    return cast(list[T], results)
