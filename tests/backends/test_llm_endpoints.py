"""Several servers for one model (`base_urls`), and answers cached the moment they arrive."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from builder.backends.llm import ChatRequest, ChatResponse, LLMCache, OpenAIBackend, OpenAIModelConfig
from builder.util.secrets import mask_mapping
from tests.support.openai_server import Reply

Start = Callable[..., Any]
QUICK = {"backoff_initial_s": 0.01, "backoff_max_s": 0.05}


def ask(text: str) -> ChatRequest:
    return ChatRequest.of([{"role": "user", "content": text}])


def _backend(cache: LLMCache, **config: Any) -> OpenAIBackend:
    return OpenAIBackend("gen", OpenAIModelConfig(model="m", **{**QUICK, **config}), cache)


def _texts(answers: list[ChatResponse]) -> list[str | None]:
    return [a.text for a in answers]


def _slow_when_asked(body: dict[str, Any]) -> str | Reply:
    question = body["messages"][-1]["content"]
    return Reply(text=f"echo: {question}", delay_s=1.5 if question == "slow" else 0.0)


def _rows(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("SELECT COUNT(*) FROM answers").fetchone()[0])


def test_answers_are_on_disk_while_the_batch_is_still_in_flight(fake_openai: Start, tmp_path: Path) -> None:
    srv = fake_openai(responder=_slow_when_asked)
    path = tmp_path / "cache.sqlite"
    requests = [ask("slow"), *(ask(f"q{i}") for i in range(8))]
    with _backend(LLMCache(path), base_url=srv.base_url) as backend:
        batch = threading.Thread(target=backend.chat_many, args=(requests,))
        batch.start()
        deadline = time.time() + 1.2
        while _rows(path) < 8 and time.time() < deadline:
            time.sleep(0.02)
        # Eight answers are committed while the ninth is still on its way: a run killed
        # now would ask again only for that one.
        assert _rows(path) == 8 and batch.is_alive()
        batch.join()
    sent = srv.request_count
    with _backend(LLMCache(path), base_url=srv.base_url) as again:
        assert _texts(again.chat_many(requests)) == ["echo: slow", *(f"echo: q{i}" for i in range(8))]
    assert srv.request_count == sent


def test_two_servers_share_the_work_and_answer_as_one(fake_openai: Start) -> None:
    one, two, alone = (fake_openai(latency_s=0.02) for _ in range(3))
    requests = [ask(f"q{i}") for i in range(40)]
    with _backend(LLMCache.memory(), base_urls=[one.base_url, two.base_url], max_concurrency=4) as both:
        answers = both.chat_many(requests)
    with _backend(LLMCache.memory(), base_url=alone.base_url, max_concurrency=4) as single:
        expected = single.chat_many(requests)
    assert _texts(answers) == _texts(expected) == [f"echo: q{i}" for i in range(40)]
    assert one.request_count > 5 and two.request_count > 5
    assert one.request_count + two.request_count == 40
    # max_concurrency is per server.
    assert max(one.max_in_flight, two.max_in_flight) <= 4 < one.max_in_flight + two.max_in_flight


def test_the_faster_server_takes_more_requests(fake_openai: Start) -> None:
    slow, fast = fake_openai(latency_s=0.3), fake_openai(latency_s=0.01)
    with _backend(LLMCache.memory(), base_urls=[slow.base_url, fast.base_url], max_concurrency=2) as backend:
        answers = backend.chat_many([ask(f"q{i}") for i in range(40)])
    assert all(a.ok for a in answers)
    assert fast.request_count > 3 * slow.request_count > 0


def test_ties_go_to_the_first_server_listed(fake_openai: Start) -> None:
    first, second = fake_openai(), fake_openai()
    with _backend(LLMCache.memory(), base_urls=[first.base_url, second.base_url]) as backend:
        for i in range(3):  # one at a time: nothing is ever in flight when the next is sent
            backend.chat_many([ask(f"q{i}")])
    assert (first.request_count, second.request_count) == (3, 0)


def test_a_retry_goes_to_another_server_when_one_is_down(fake_openai: Start) -> None:
    srv = fake_openai()
    dead = "http://127.0.0.1:1/v1"  # nothing listens on port 1
    with _backend(LLMCache.memory(), base_urls=[dead, srv.base_url], timeout_s=2.0) as backend:
        answers = backend.chat_many([ask(f"q{i}") for i in range(10)])
    assert _texts(answers) == [f"echo: q{i}" for i in range(10)]
    assert backend.usage.failures == 0 and backend.usage.retries > 0


def test_which_server_answered_is_not_part_of_the_cache_key(fake_openai: Start) -> None:
    one, two, three = fake_openai(), fake_openai(), fake_openai()
    cache = LLMCache.memory()
    requests = [ask(f"q{i}") for i in range(6)]
    with _backend(cache, base_url=one.base_url) as first:
        first.chat_many(requests)
    with _backend(cache, base_urls=[two.base_url, three.base_url]) as second:
        answers = second.chat_many(requests)
    assert all(a.cached for a in answers)
    assert two.request_count == three.request_count == 0


def test_server_lists_count_in_the_fingerprint_only_when_given() -> None:
    single = OpenAIModelConfig(model="m", base_url="http://a/v1").model_dump(mode="json")
    listed = OpenAIModelConfig(model="m", base_urls=["http://a/v1", "http://b/v1"]).model_dump(mode="json")
    assert "base_urls" not in single  # recipes without a list keep their fingerprints
    assert listed["base_urls"] == ["http://a/v1", "http://b/v1"] and listed["base_url"] is None


def test_credentials_in_listed_urls_are_masked_on_the_card() -> None:
    masked = mask_mapping({"base_urls": ["https://user:pw@a.example/v1", "https://b.example/v1?api_key=sk1"]})
    assert masked == {"base_urls": ["https://***@a.example/v1", "https://b.example/v1?api_key=***"]}
