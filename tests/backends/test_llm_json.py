"""Lenient JSON parsing and chat_json's re-asks, over real HTTP."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from builder.backends.llm import ChatRequest, LLMCache, chat_json, key_for, parse_json_lenient
from tests.support.openai_server import FaultPlan, Reply, json_echo_responder

from .conftest import MakeBackend

Start = Callable[..., Any]


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")
    label: str
    score: int


def ask(text: str, item_id: str = "") -> ChatRequest:
    return ChatRequest.of([{"role": "user", "content": text}], item_id=item_id)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ("```\n[1, 2]\n```", [1, 2]),
        ('Sure! Here it is: {"a": {"b": [1]}} Anything else?', {"a": {"b": [1]}}),
        ('{"a": [1, 2,], "b": "x,]",}', {"a": [1, 2], "b": "x,]"}),
        ('<think>maybe {"a": 0}?</think>\n{"a": 1}', {"a": 1}),
        ('thinking without an opening tag</think>{"a": 1}', {"a": 1}),
        ('Note [see below]: ["real"]', ["real"]),
        ('{"quote": "she said \\"hi,\\" }"}', {"quote": 'she said "hi," }'}),
        ('First I thought {"a": 0}, then I checked again.\nFinal answer:\n{"a": 1}', {"a": 1}),
        ('An [unclosed aside, then {"a": 1}', {"a": 1}),
        ('[Note: {"a": 1}]', {"a": 1}),
        ("3", 3),
    ],
)
def test_lenient_parsing_accepts(text: str, expected: Any) -> None:
    assert parse_json_lenient(text) == expected


def test_the_expected_kind_wins_over_a_later_value() -> None:
    text = '{"a": 1}\nSee [1] for details.'
    assert parse_json_lenient(text, dict) == {"a": 1}
    assert parse_json_lenient(text, list) == [1]
    assert parse_json_lenient('{"a": 1}', list) == {"a": 1}


@pytest.mark.parametrize("text", ["", "no json here", '{"a": "trunc', "```json\n{oops}\n```"])
def test_lenient_parsing_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_json_lenient(text)


HOSTILE = {
    "deep list": "[" * 3000,
    "100 KB of braces": "{" * 100_000,
    "200 KB of braces": "{" * 200_000,
    "200 KB of brackets": "[" * 200_000,
    "deep but closed": "[" * 3000 + "]" * 3000,
    "nested objects": '{"a": ' * 30_000,
    "open fences": "```" * 70_000,
    "open think tags": "<think>" * 30_000,
    "escaped quotes": '"\\"' * 60_000 + "[",
    "prose brackets": "x [" * 70_000,
    "many tiny failures": "[x] " * 50_000,
}


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_answers_are_rejected_quickly(text: str) -> None:
    # CPU time, generously bounded: quadratic scanning of these answers takes minutes, and a
    # busy machine must not fail a linear one.
    start = time.process_time()
    with pytest.raises(ValueError):
        parse_json_lenient(text)
    assert time.process_time() - start < 3.0


def test_nesting_is_bounded() -> None:
    assert parse_json_lenient("[" * 100 + "]" * 100) == eval("[" * 100 + "]" * 100)
    with pytest.raises(ValueError, match="deeply"):
        parse_json_lenient("[" * 101 + "]" * 101)
    assert parse_json_lenient("note: " + "[" * 500 + "]" * 500 + ' then {"a": 1}') == {"a": 1}


def test_an_unparseable_cached_answer_is_reasked(fake_openai: Start, make_backend: MakeBackend) -> None:
    srv = fake_openai(responder=lambda body: '{"label": "ok", "score": 1}')
    cache = LLMCache.memory()
    backend = make_backend(srv, cache=cache)
    question = ask("q")
    key = key_for("openai", "test-model", backend.config.sampling(), question.messages, None)
    cache.put(key, "[" * 3000, 1, 1)
    answer = chat_json(backend, [question], Verdict.model_validate)[0]
    assert (answer.value, answer.attempts) == (Verdict(label="ok", score=1), 2)
    assert srv.request_count == 1 and srv.requests[0]["messages"][1]["content"] == "[" * 3000
    again = chat_json(make_backend(srv, cache=cache), [question], Verdict.model_validate)[0]
    assert again == answer and srv.request_count == 1


def test_wrapped_answers_parse_without_reasks(fake_openai: Start, make_backend: MakeBackend) -> None:
    wrapped = {
        "fenced": '```json\n{"label": "a", "score": 1}\n```',
        "chatty": 'Here you go!\n{"label": "b", "score": 2}\nCheers.',
        "comma": '{"label": "c", "score": 3,}',
    }
    srv = fake_openai(responder=lambda body: wrapped[body["messages"][0]["content"]])
    answers = chat_json(make_backend(srv), [ask(k) for k in wrapped], Verdict.model_validate)
    assert [(a.value.label, a.attempts) for a in answers if a.value] == [("a", 1), ("b", 1), ("c", 1)]
    assert srv.request_count == 3


def garbage_first(body: dict[str, Any]) -> str:
    """Garbage to the first question; a valid answer once re-asked."""
    if len(body["messages"]) == 1:
        return '{"label": "x", "sco'
    return '{"label": "fixed", "score": 5}'


def test_garbage_is_reasked_and_reasks_are_cached(fake_openai: Start, make_backend: MakeBackend) -> None:
    srv = fake_openai(responder=garbage_first)
    cache = LLMCache.memory()
    answer = chat_json(make_backend(srv, cache=cache), [ask("q")], Verdict.model_validate)[0]
    assert (answer.value, answer.error, answer.attempts) == (Verdict(label="fixed", score=5), None, 2)
    reask = srv.requests[1]["messages"]
    assert reask[1] == {"role": "assistant", "content": '{"label": "x", "sco'}
    assert reask[2]["role"] == "user" and "JSON" in reask[2]["content"]

    again = chat_json(make_backend(srv, cache=cache), [ask("q")], Verdict.model_validate)[0]
    assert again == answer and srv.request_count == 2


def test_wrong_shape_is_reasked_with_the_reason(fake_openai: Start, make_backend: MakeBackend) -> None:
    shapes = iter(['{"label": "x"}', '{"label": "x", "score": 1}'])
    srv = fake_openai(responder=lambda body: next(shapes))
    answer = chat_json(make_backend(srv), [ask("q")], Verdict.model_validate)[0]
    assert answer.value == Verdict(label="x", score=1)
    assert "score" in srv.requests[1]["messages"][-1]["content"]


def test_hopeless_answers_are_logged(fake_openai: Start, make_backend: MakeBackend, tmp_path: Path) -> None:
    srv = fake_openai(responder=lambda body: "I would rather not.")
    log = tmp_path / "logs" / "raw.jsonl"
    backend = make_backend(srv, max_reasks=2)
    answers = chat_json(backend, [ask("q1", "item-1"), ask("q2", "item-2")], Verdict.model_validate, raw_log=log)
    assert [(a.error, a.raw, a.attempts) for a in answers] == [("llm_unparseable", "I would rather not.", 3)] * 2
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(r["item_id"], r["error"], r["raw"]) for r in records] == [
        ("item-1", "llm_unparseable", "I would rather not."),
        ("item-2", "llm_unparseable", "I would rather not."),
    ]
    assert srv.request_count == 6


def test_transport_failures_are_not_reasked(fake_openai: Start, make_backend: MakeBackend) -> None:
    srv = fake_openai(responder=lambda body: Reply(status=401))
    answer = chat_json(make_backend(srv), [ask("q")], Verdict.model_validate)[0]
    assert (answer.value, answer.error, answer.attempts) == (
        None,
        "llm_failed: HTTP 401: Error code: 401 - injected HTTP 401",
        1,
    )
    assert srv.request_count == 1


def test_faulty_server_gives_the_same_answers(fake_openai: Start, make_backend: MakeBackend) -> None:
    questions = [ask(f"question {i}", f"item-{i}") for i in range(200)]

    def echo(value: Any) -> str:
        return str(value["echo"])

    clean = chat_json(make_backend(fake_openai(responder=json_echo_responder)), questions, echo)
    # A slow fault takes five times the deadline, and the deadline is far beyond what an
    # answer takes even on a loaded machine: a request times out only when it is a fault.
    faults = FaultPlan(rate=0.2, seed=1, slow_s=5.0)
    srv = fake_openai(responder=json_echo_responder, faults=faults)
    noisy = chat_json(make_backend(srv, timeout_s=1.0, max_concurrency=32), questions, echo)
    assert all(a.error is None for a in noisy)
    assert [a.value for a in noisy] == [a.value for a in clean] == [f"question {i}" for i in range(200)]
    assert srv.request_count > 220


REASONED = {
    "think tags": '<think>Maybe {"label": "no", "score": 0}? No.</think>\n{"label": "yes", "score": 2}',
    "prose first": (
        'Let me think. A first draft: {"label": "no", "score": 0}. On reflection the passage '
        'answers it [see line 2].\nFinal answer:\n{"label": "yes", "score": 2}'
    ),
    "prose then a fence": 'Draft: {"label": "no", "score": 0}\n```json\n{"label": "yes", "score": 2}\n```',
}


@pytest.mark.parametrize("text", REASONED.values(), ids=REASONED.keys())
def test_the_json_after_the_reasoning_is_taken(fake_openai: Start, make_backend: MakeBackend, text: str) -> None:
    srv = fake_openai(responder=lambda body: text)
    answer = chat_json(make_backend(srv), [ask("q")], Verdict.model_validate)[0]
    assert (answer.value, answer.attempts, answer.raw) == (Verdict(label="yes", score=2), 1, text)
    assert srv.request_count == 1


def test_a_reasoning_channel_comes_with_the_json_answer(fake_openai: Start, make_backend: MakeBackend) -> None:
    reply = Reply(text='{"label": "yes", "score": 2}', reasoning='I compare {"label": "no"} with [the text].')
    srv = fake_openai(responder=lambda body: reply)
    cache = LLMCache.memory()
    answer = chat_json(make_backend(srv, cache=cache), [ask("q")], Verdict.model_validate)[0]
    assert (answer.value, answer.reasoning) == (Verdict(label="yes", score=2), reply.reasoning)
    again = chat_json(make_backend(srv, cache=cache), [ask("q")], Verdict.model_validate)[0]
    assert again == answer and srv.request_count == 1


def test_a_truncated_json_answer_is_reported_as_truncated(fake_openai: Start, make_backend: MakeBackend) -> None:
    srv = fake_openai(responder=lambda body: Reply(text='{"label": "ye', finish_reason="length"))
    answer = chat_json(make_backend(srv), [ask("q")], Verdict.model_validate)[0]
    assert (answer.value, answer.error, answer.attempts) == (None, "llm_truncated", 1)
    assert srv.request_count == 2


def test_new_fault_kinds_give_the_same_answers(fake_openai: Start, make_backend: MakeBackend) -> None:
    questions = [ask(f"question {i}", f"item-{i}") for i in range(60)]
    faults = FaultPlan(rate=0.3, seed=2, kinds=("listbody", "truncated", "garbage"))
    srv = fake_openai(responder=json_echo_responder, faults=faults)
    answers = chat_json(make_backend(srv), questions, lambda value: str(value["echo"]))
    # An answer cut off twice in a row is a truncated answer, by design; all others come through.
    assert {a.error for a in answers} == {None, "llm_truncated"}
    assert all(a.value == f"question {i}" for i, a in enumerate(answers) if a.error is None)
    assert sum(a.error is None for a in answers) >= 55
