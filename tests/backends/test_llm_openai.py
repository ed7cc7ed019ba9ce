"""OpenAIBackend over real HTTP against the local fake server."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from builder.backends.llm import ChatRequest, LLMCache
from builder.testing.openai_server import Reply

from .conftest import MakeBackend

Start = Callable[..., Any]


def ask(text: str, **kwargs: Any) -> ChatRequest:
    return ChatRequest.of([{"role": "user", "content": text}], **kwargs)


def flaky(first: Reply, times: int = 1) -> Callable[[dict[str, Any]], str | Reply]:
    """Answer `first` the first `times` times a question is seen, then echo it."""
    seen: Counter[str] = Counter()

    def respond(body: dict[str, Any]) -> str | Reply:
        question = body["messages"][-1]["content"]
        seen[question] += 1
        return first if seen[question] <= times else f"echo: {question}"

    return respond


def test_answers_come_back_in_request_order_within_the_concurrency_bound(
    fake_openai: Start, make_backend: MakeBackend
) -> None:
    srv = fake_openai(latency_s=0.02)
    backend = make_backend(srv, max_concurrency=4)
    progress: list[int] = []
    answers = backend.chat_many([ask(f"q{i}") for i in range(40)], on_done=progress.append)
    assert [a.text for a in answers] == [f"echo: q{i}" for i in range(40)]
    assert srv.max_in_flight == 4
    assert sum(progress) == 40
    assert backend.usage.calls == 40 and backend.usage.prompt_tokens == 40


def test_cache_answers_repeats_without_sending(fake_openai: Start, make_backend: MakeBackend) -> None:
    srv = fake_openai()
    cache = LLMCache.memory()
    questions = [ask(f"q{i}", item_id=f"id{i}") for i in range(10)]
    first = make_backend(srv, cache=cache).chat_many(questions)
    sent = srv.request_count

    again = make_backend(srv, cache=cache)
    renamed = [ask(f"q{i}", item_id=f"other{i}") for i in range(10)]
    second = again.chat_many(renamed)
    assert srv.request_count == sent
    assert [a.text for a in second] == [a.text for a in first]
    assert all(a.cached for a in second) and again.usage.cache_hits == 10 and again.usage.calls == 0

    make_backend(srv, cache=cache, temperature=0.7).chat_many(questions[:1])
    assert srv.request_count == sent + 1


def test_identical_requests_in_one_batch_are_sent_once(fake_openai: Start, make_backend: MakeBackend) -> None:
    srv = fake_openai()
    answers = make_backend(srv).chat_many([ask("same")] * 5)
    assert srv.request_count == 1
    assert {a.text for a in answers} == {"echo: same"}


def test_rate_limits_errors_and_timeouts_are_retried(fake_openai: Start, make_backend: MakeBackend) -> None:
    cases = {
        "429": Reply(status=429, headers={"Retry-After": "0"}),
        "500": Reply(status=500),
        "slow": Reply(text="late", delay_s=1.0),
        "broken body": Reply(body='{"choices": [{"mess'),
        "empty": Reply(text=None),
    }
    for label, first in cases.items():
        srv = fake_openai(responder=flaky(first))
        answer = make_backend(srv, timeout_s=0.3).chat_many([ask(label)])[0]
        assert (answer.text, answer.retries) == (f"echo: {label}", 1), label


def test_retry_after_is_honoured_and_capped(fake_openai: Start, make_backend: MakeBackend) -> None:
    srv = fake_openai(responder=flaky(Reply(status=429, headers={"Retry-After": "0.3"})))
    start = time.perf_counter()
    assert make_backend(srv, backoff_max_s=1.0).chat_many([ask("wait")])[0].text == "echo: wait"
    assert time.perf_counter() - start >= 0.3

    srv = fake_openai(responder=flaky(Reply(status=429, headers={"Retry-After": "3600"})))
    start = time.perf_counter()
    assert make_backend(srv, backoff_max_s=0.1).chat_many([ask("capped")])[0].ok
    assert time.perf_counter() - start < 2


def test_permanent_failure_is_reported_not_raised_or_cached(fake_openai: Start, make_backend: MakeBackend) -> None:
    srv = fake_openai(responder=lambda body: Reply(status=503))
    cache = LLMCache.memory()
    backend = make_backend(srv, cache=cache, max_retries=2)
    answers = backend.chat_many([ask("a"), ask("b")])
    assert all(a.text is None for a in answers)
    assert answers[0].error == "llm_failed: HTTP 503 after 3 attempts"
    assert srv.request_count == 6 and len(cache) == 0
    assert backend.usage.failures == 2 and backend.usage.retries == 4

    backend.chat_many([ask("a")])
    assert srv.request_count == 9


def test_client_errors_fail_at_once(fake_openai: Start, make_backend: MakeBackend) -> None:
    srv = fake_openai(responder=lambda body: Reply(status=400))
    answer = make_backend(srv).chat_many([ask("bad")])[0]
    assert answer.error is not None and answer.error.startswith("llm_failed: HTTP 400")
    assert srv.request_count == 1


def test_empty_answers_give_up_early(fake_openai: Start, make_backend: MakeBackend) -> None:
    srv = fake_openai(responder=lambda body: Reply(text=""))
    answer = make_backend(srv).chat_many([ask("silence")])[0]
    assert answer.error == "llm_failed: empty answer after 3 attempts"
    assert srv.request_count == 3


def test_works_from_inside_a_running_event_loop(fake_openai: Start, make_backend: MakeBackend) -> None:
    backend = make_backend(fake_openai())

    async def caller() -> list[str | None]:
        return [a.text for a in backend.chat_many([ask("loop")])]

    assert asyncio.run(caller()) == ["echo: loop"]


def test_request_body_follows_the_config(fake_openai: Start, make_backend: MakeBackend) -> None:
    srv = fake_openai()
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    make_backend(srv).chat_many([ask("plain", json_schema=schema)])
    structured = make_backend(srv, structured_output=True, seed=7, top_p=0.5, extra_body={"top_k": 3})
    structured.chat_many([ask("shaped", json_schema=schema, max_tokens=9)])
    plain, shaped = srv.requests
    assert "response_format" not in plain and plain["max_tokens"] == 1024 and "seed" not in plain
    assert shaped["response_format"]["json_schema"]["schema"] == schema
    assert (shaped["seed"], shaped["top_p"], shaped["top_k"], shaped["max_tokens"]) == (7, 0.5, 3, 9)


def test_empty_batches_and_closing(fake_openai: Start, make_backend: MakeBackend) -> None:
    backend = make_backend(fake_openai())
    assert backend.chat_many([]) == []
    backend.close()
    backend.close()
    with pytest.raises(RuntimeError, match="closed"):
        backend.chat_many([ask("late")])
