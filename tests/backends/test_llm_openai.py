"""OpenAIBackend over real HTTP against the local fake server."""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from builder.backends.llm import ChatRequest, LLMCache
from tests.support.openai_server import Reply

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
        "list body": Reply(body="[1, 2]"),
        "deep body": Reply(body="[" * 5000),
        "huge usage": Reply(text="x", usage={"prompt_tokens": 10**30, "completion_tokens": 1}),
        "negative usage": Reply(text="x", usage={"prompt_tokens": -1, "completion_tokens": 1}),
        "choices not a list": Reply(body='{"choices": "x"}'),
        "content not text": Reply(body='{"choices": [{"message": {"content": 5}}]}'),
    }
    for label, first in cases.items():
        srv = fake_openai(responder=flaky(first))
        answer = make_backend(srv, timeout_s=0.3).chat_many([ask(label)])[0]
        assert (answer.text, answer.retries) == (f"echo: {label}", 1), label


def _waits(backend: Any, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The pauses the backend takes between attempts, as it computes them (and still takes)."""
    waits: list[float] = []
    delay = backend._delay

    def recorded(attempt: int, retry_after: float | None) -> float:
        waits.append(delay(attempt, retry_after))
        return waits[-1]

    monkeypatch.setattr(backend, "_delay", recorded)
    return waits


def test_retry_after_is_honoured_and_capped(
    fake_openai: Start, make_backend: MakeBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    srv = fake_openai(responder=flaky(Reply(status=429, headers={"Retry-After": "0.3"})))
    backend = make_backend(srv, backoff_max_s=1.0)
    waits = _waits(backend, monkeypatch)
    assert backend.chat_many([ask("wait")])[0].text == "echo: wait"
    assert waits == [0.3]

    srv = fake_openai(responder=flaky(Reply(status=429, headers={"Retry-After": "3600"})))
    backend = make_backend(srv, backoff_max_s=0.1)
    waits = _waits(backend, monkeypatch)
    assert backend.chat_many([ask("capped")])[0].ok
    assert waits == [0.1]


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


@pytest.mark.parametrize(
    ("reply", "cause"),
    [
        (Reply(body="[]"), "the body is not a JSON object"),
        (Reply(text="x", usage={"prompt_tokens": 10**30, "completion_tokens": 1}), f"usage.prompt_tokens is {10**30}"),
    ],
    ids=["list body", "huge usage"],
)
def test_malformed_replies_fail_with_a_reason(
    fake_openai: Start, make_backend: MakeBackend, tmp_path: Path, reply: Reply, cause: str
) -> None:
    srv = fake_openai(responder=lambda body: reply)
    cache = LLMCache(tmp_path / "cache.sqlite")
    backend = make_backend(srv, cache=cache, max_retries=2)
    answer = backend.chat_many([ask("a")])[0]
    assert answer.error == f"llm_failed: reply not in the expected shape: {cause} after 3 attempts"
    assert srv.request_count == 3 and len(cache) == 0
    assert backend.usage.failures == 1


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
    make_backend(srv, structured_output=False).chat_many([ask("plain", json_schema=schema)])
    structured = make_backend(srv, seed=7, top_p=0.5, extra_body={"top_k": 3})
    structured.chat_many([ask("shaped", json_schema=schema, max_tokens=9)])
    plain, shaped = srv.requests
    assert "response_format" not in plain and plain["max_tokens"] == 1024 and "seed" not in plain
    assert shaped["response_format"]["json_schema"]["schema"] == schema
    assert (shaped["seed"], shaped["top_p"], shaped["top_k"], shaped["max_tokens"]) == (7, 0.5, 3, 9)


def test_requests_carry_the_sdk_headers_and_the_attempt_number(
    fake_openai: Start, make_backend: MakeBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BENCH_TEST_KEY", "sk-test-123")
    srv = fake_openai(responder=flaky(Reply(status=500)))
    backend = make_backend(srv, api_key_env="BENCH_TEST_KEY")
    assert [a.text for a in backend.chat_many([ask("q")])] == ["echo: q"]
    first, second = srv.headers
    assert first["authorization"] == "Bearer sk-test-123"
    assert first["user-agent"].startswith("AsyncOpenAI/Python")
    assert first["x-stainless-async"] == "async:asyncio"
    assert first["content-type"] == "application/json"
    assert (first["x-stainless-retry-count"], second["x-stainless-retry-count"]) == ("0", "1")
    assert int(first["content-length"]) == len(
        json.dumps(srv.requests[0], ensure_ascii=False, separators=(",", ":")).encode()
    )


def test_a_body_no_server_could_read_fails_without_being_sent(fake_openai: Start, make_backend: MakeBackend) -> None:
    srv = fake_openai()
    answer = make_backend(srv, extra_body={"min_p": float("nan")}).chat_many([ask("q")])[0]
    assert not answer.ok and answer.error is not None and "unsendable request" in answer.error
    assert srv.request_count == 0


def test_empty_batches_and_closing(fake_openai: Start, make_backend: MakeBackend) -> None:
    backend = make_backend(fake_openai())
    assert backend.chat_many([]) == []
    backend.close()
    backend.close()
    with pytest.raises(RuntimeError, match="closed"):
        backend.chat_many([ask("late")])


def cut_below(budget: int) -> Callable[[dict[str, Any]], str | Reply]:
    """An answer cut off at max_tokens unless the request allows at least `budget` tokens."""
    return lambda body: (
        "whole answer" if body["max_tokens"] >= budget else Reply(text="half an", finish_reason="length")
    )


def test_a_truncated_answer_is_asked_again_with_twice_the_budget(fake_openai: Start, make_backend: MakeBackend) -> None:
    srv = fake_openai(responder=cut_below(200))
    cache = LLMCache.memory()
    answer = make_backend(srv, cache=cache, max_tokens=100).chat_many([ask("q")])[0]
    assert (answer.text, answer.retries, answer.completion_tokens) == ("whole answer", 1, 4)
    assert [r["max_tokens"] for r in srv.requests] == [100, 200]

    again = make_backend(srv, cache=cache, max_tokens=100).chat_many([ask("q")])[0]
    assert (again.text, again.cached, srv.request_count) == ("whole answer", True, 2)


def test_an_answer_truncated_twice_fails_as_truncated_and_is_not_cached(
    fake_openai: Start, make_backend: MakeBackend
) -> None:
    srv = fake_openai(responder=cut_below(10**6))
    cache = LLMCache.memory()
    backend = make_backend(srv, cache=cache)
    answer = backend.chat_many([ask("q", max_tokens=50)])[0]
    assert (answer.text, answer.error, answer.reason) == (
        None,
        "llm_truncated: answer cut off at max_tokens 100",
        "llm_truncated",
    )
    assert [r["max_tokens"] for r in srv.requests] == [50, 100]
    assert len(cache) == 0
    assert (backend.usage.failures, backend.usage.transport_failures) == (1, 0)

    backend.chat_many([ask("q", max_tokens=50)])
    assert srv.request_count == 4


def test_the_reasoning_channel_is_kept_and_cached(fake_openai: Start, make_backend: MakeBackend) -> None:
    srv = fake_openai(responder=lambda body: Reply(text="final", reasoning="First, {weigh} the [options]."))
    cache = LLMCache.memory()
    answer = make_backend(srv, cache=cache).chat_many([ask("q")])[0]
    assert (answer.text, answer.reasoning) == ("final", "First, {weigh} the [options].")
    again = make_backend(srv, cache=cache).chat_many([ask("q")])[0]
    assert (again.cached, again.text, again.reasoning) == (True, "final", "First, {weigh} the [options].")
    assert make_backend(fake_openai()).chat_many([ask("plain")])[0].reasoning is None


def test_transport_failures_are_told_apart_from_bad_answers(fake_openai: Start, make_backend: MakeBackend) -> None:
    down = fake_openai()
    down.stop()  # nothing listens on its port any more
    backend = make_backend(down, max_retries=2)
    before = backend.usage.copy()
    refused = backend.chat_many([ask("a"), ask("b")])
    assert all(a.transport and a.reason == "llm_failed" for a in refused)
    assert refused[0].error == "llm_failed: connection refused after 3 attempts"
    share = backend.usage - before
    assert (share.failures, share.transport_failures) == (2, 2)
    assert share.last_transport_error == f"llm_failed: connection refused after 3 attempts ({down.base_url})"

    for status in (503, 429, 401):
        srv = fake_openai(responder=lambda body, status=status: Reply(status=status, headers={"Retry-After": "0"}))
        busy = make_backend(srv, max_retries=1)
        answer = busy.chat_many([ask("c")])[0]
        assert answer.transport and busy.usage.transport_failures == 1, status
        assert busy.usage.last_transport_error is not None and f"HTTP {status}" in busy.usage.last_transport_error

    content = {
        "rejected": Reply(status=400),
        "empty": Reply(text=""),
        "malformed": Reply(body="[]"),
        "cut": Reply(text="x", finish_reason="length"),
    }
    for label, reply in content.items():
        srv = fake_openai(responder=lambda body, reply=reply: reply)
        picky = make_backend(srv, max_retries=1)
        answer = picky.chat_many([ask(label)])[0]
        assert not answer.ok and not answer.transport, label
        assert (picky.usage.failures, picky.usage.transport_failures, picky.usage.last_transport_error) == (
            1,
            0,
            None,
        ), label
    assert (backend.usage - backend.usage).last_transport_error is None


def test_a_timeout_is_a_transport_failure(fake_openai: Start, make_backend: MakeBackend) -> None:
    srv = fake_openai(responder=lambda body: Reply(text="late", delay_s=1.0))
    backend = make_backend(srv, timeout_s=0.2, max_retries=1)
    answer = backend.chat_many([ask("slow")])[0]
    assert answer.transport and re.fullmatch(
        r"llm_failed: timeout: no whole reply within timeout_s=0\.2 s "
        r"\(the attempt waited \d+\.\d s\) after 2 attempts",
        answer.error or "",
    ), answer.error
    assert backend.usage.transport_failures == 1


def test_every_client_of_the_process_shares_one_ssl_context(fake_openai: Start, make_backend: MakeBackend) -> None:
    srv = fake_openai()
    first, second = make_backend(srv), make_backend(srv, max_concurrency=3)
    # The SDK's HTTP client keeps the transport it built from `verify=`.
    contexts = [b._endpoints.all[0].client._client._transport.ssl_context for b in (first, second)]
    assert contexts[0] is contexts[1]
    assert contexts[0].verify_mode.name == "CERT_REQUIRED" and contexts[0].check_hostname
    assert [a.text for a in first.chat_many([ask("q")]) + second.chat_many([ask("r")])] == ["echo: q", "echo: r"]
