"""Numbered batches and their id-keyed answers, and the one pool all of a call's requests share."""

from __future__ import annotations

import json
from typing import Any

import pytest

from builder.backends.llm import ChatRequest, ChatResponse, LLMCache
from builder.backends.llm.json_answers import chat_json
from builder.backends.llm.json_batches import IdList, ask_numbered, number_batches, per_item
from tests.support.openai_server import Reply

from .conftest import MakeBackend


def _read(entry: Any) -> str | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("v"), str):
        raise ValueError('each entry needs "id" and a "v" string')
    return entry["v"] or None


VALUES = IdList(read=_read, wrappers=("values",), entry="value", item="thing", fields={"v": {"type": "string"}})


def test_id_keyed_answers_are_read_in_id_order() -> None:
    assert VALUES.values([{"id": 2, "v": "b"}, {"id": "1", "v": "a"}], 2) == ["a", "b"]
    assert VALUES.values({"values": [{"id": 1, "v": "a"}]}, 1) == ["a"]
    assert VALUES.values({"id": 1, "v": "a"}, 1) == ["a"]  # one entry, not in a list


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ("a", "expected a JSON list with one value per thing"),
        ({"values": 3}, "expected a JSON list with one value per thing"),
        ([{"id": 1, "v": "a"}], "no value for thing ids [2]"),
        ([{"id": 1, "v": "a"}, {"id": 2, "v": ""}], "no value for thing ids [2]"),
        ([{"id": "x", "v": "a"}, {"id": 2, "v": "b"}], 'every entry needs its numeric "id"'),
        ([{"v": "a"}], 'every entry needs its numeric "id"'),
        ([1, 2], 'each entry needs "id" and a "v" string'),
    ],
)
def test_malformed_answers_say_what_is_wrong(answer: Any, problem: str) -> None:
    with pytest.raises(ValueError) as error:
        VALUES.values(answer, 2)
    assert str(error.value) == problem


def test_items_are_numbered_per_group_in_batches_of_per_call() -> None:
    seen = []

    def request_for(group: str, at: int, keys: list[str], numbered: list[dict[str, Any]]) -> ChatRequest:
        seen.append((group, at, keys, numbered))
        return ChatRequest.of([{"role": "user", "content": f"{group}@{at}"}])

    items = [("d1", "a", "A"), ("d2", "x", "X"), ("d1", "b", "B"), ("d1", "c", "C")]
    batches = number_batches(items, 2, request_for)
    assert [b.keys for b in batches] == [("a", "b"), ("c",), ("x",)]
    assert seen == [
        ("d1", 0, ["a", "b"], [{"id": 1, "text": "A"}, {"id": 2, "text": "B"}]),
        ("d1", 2, ["c"], [{"id": 1, "text": "C"}]),
        ("d2", 0, ["x"], [{"id": 1, "text": "X"}]),
    ]


def _echo_ids(body: dict[str, Any]) -> str:
    """Answers every numbered line `N. text` with {"id": N, "v": text}; a re-ask gets the same."""
    lines = body["messages"][0]["content"].splitlines()
    return json.dumps([{"id": int(n), "v": t} for n, _, t in (line.partition(". ") for line in lines)])


def _numbered(group: str, at: int, keys: list[str], numbered: list[dict[str, Any]]) -> ChatRequest:
    return ChatRequest.of(
        [{"role": "user", "content": "\n".join(f"{q['id']}. {q['text']}" for q in numbered)}], item_id=f"{group}@{at}"
    )


def test_batches_of_every_size_are_answered_per_item(fake_openai: Any, make_backend: MakeBackend) -> None:
    srv = fake_openai(responder=_echo_ids)
    batches = number_batches([("g", k, k.upper()) for k in "abcde"] + [("h", "z", "")], 2, _numbered)
    answers = ask_numbered(make_backend(srv), batches, VALUES.validator, VALUES.schema)
    # Each request carries the schema for its own number of items.
    sizes = [
        body["response_format"]["json_schema"]["schema"]["properties"]["values"]["maxItems"]
        for body in srv.requests[:4]
    ]
    assert sorted(sizes) == [1, 1, 2, 2]
    assert list(per_item(batches, answers)) == [
        ("a", "A", None),
        ("b", "B", None),
        ("c", "C", None),
        ("d", "D", None),
        ("e", "E", None),
        ("z", None, "llm_unparseable"),  # an empty value is a missing one, however often re-asked
    ]


def _ask(i: int) -> ChatRequest:
    return ChatRequest.of([{"role": "user", "content": f"question {i}"}], item_id=str(i))


def _bad_first(body: dict[str, Any]) -> str:
    """Garbage to the first ask of question 0, a number otherwise."""
    if body["messages"][0]["content"] == "question 0" and len(body["messages"]) == 1:
        return "not json"
    return "7"


def test_a_reask_is_sent_while_first_asks_are_still_in_flight(fake_openai: Any, make_backend: MakeBackend) -> None:
    srv = fake_openai(responder=_bad_first, latency_s=0.25)
    backend = make_backend(srv, max_concurrency=4)
    answers = chat_json(backend, [_ask(i) for i in range(6)], int)
    assert [(a.value, a.attempts) for a in answers] == [(7, 2)] + [(7, 1)] * 5
    reask = next(at for body, at in zip(srv.requests, srv.arrived) if len(body["messages"]) > 1)
    # In rounds, the re-ask would wait for all six first answers; in one pool it goes out
    # beside questions 4 and 5, the moment the first wave is answered.
    assert sum(t < reask for t in srv.answered) < 6
    assert srv.max_in_flight == 4 and srv.request_count == 7
    assert (backend.usage.calls, backend.usage.cache_hits) == (7, 0)


def test_identical_requests_in_flight_are_sent_once_and_cached(fake_openai: Any, make_backend: MakeBackend) -> None:
    srv = fake_openai(responder=lambda body: "3", latency_s=0.05)
    cache = LLMCache.memory()
    backend = make_backend(srv, cache=cache)
    requests = [_ask(0), _ask(1), _ask(0)]
    assert [a.value for a in chat_json(backend, requests, int)] == [3, 3, 3]
    assert srv.request_count == 2 and (backend.usage.calls, backend.usage.cache_hits) == (2, 1)
    again = make_backend(srv, cache=cache)
    assert [a.value for a in chat_json(again, requests, int)] == [3, 3, 3]
    assert srv.request_count == 2 and (again.usage.calls, again.usage.cache_hits) == (0, 3)


class RoundsOnly:
    """A backend with chat_many and no pool (as vLLM is), over the real HTTP one."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.config, self.batches = inner, inner.config, []

    def chat_many(self, requests: list[ChatRequest], on_done: Any = None) -> list[ChatResponse]:
        self.batches.append(len(requests))
        return self.inner.chat_many(requests, on_done)


def test_backends_without_a_pool_answer_in_rounds(fake_openai: Any, make_backend: MakeBackend) -> None:
    srv = fake_openai(responder=_bad_first)
    backend = RoundsOnly(make_backend(srv))
    done: list[int] = []
    answers = chat_json(backend, [_ask(i) for i in range(3)], int, on_done=done.append)
    assert [(a.value, a.attempts) for a in answers] == [(7, 2), (7, 1), (7, 1)]
    assert backend.batches == [3, 1] and sum(done) == 3


def test_a_failing_caller_cancels_what_is_in_flight_and_keeps_what_came(
    fake_openai: Any, make_backend: MakeBackend
) -> None:
    def reply(body: dict[str, Any]) -> Reply:
        quick = body["messages"][0]["content"] == "question 0"
        return Reply(text="0" if quick else "1", delay_s=0.0 if quick else 2.0)

    def validate(value: Any) -> int:
        if value == 0:
            raise RuntimeError("the caller broke")
        return value

    srv = fake_openai(responder=reply)
    cache = LLMCache.memory()
    backend = make_backend(srv, cache=cache)
    with pytest.raises(RuntimeError, match="caller broke"):
        chat_json(backend, [_ask(i) for i in range(3)], validate)
    # The answer that came back is kept; the slow ones were not waited for (they would be
    # cached too: "1" is a valid answer).
    assert len(cache) == 1


def test_an_answer_shaped_by_the_schema_is_read() -> None:
    schema = VALUES.schema(2)
    entry = schema["properties"]["values"]["items"]
    assert schema["required"] == ["values"] and entry["required"] == ["id", "v"]
    assert entry["properties"]["id"] == {"type": "integer", "minimum": 1, "maximum": 2}
    assert VALUES.values({"values": [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]}, 2) == ["a", "b"]
