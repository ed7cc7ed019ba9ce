"""What the cache records beside an answer (model, stage, server, failure) and `reask_failed`."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from builder.backends.llm import ChatRequest, LLMCache, chat_json

from .conftest import MakeBackend

Start = Callable[..., Any]


class Verdict(BaseModel):
    label: str


def ask(text: str) -> ChatRequest:
    return ChatRequest.of([{"role": "user", "content": text}], item_id=text)


def rows(path: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as db:
        found = db.execute("SELECT text, model, stage, base_url, failure FROM answers ORDER BY created_at, text")
        return [tuple(r) for r in found]


def test_an_old_cache_opens_and_gains_the_new_columns(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE answers (key TEXT PRIMARY KEY, text TEXT NOT NULL, prompt_tokens INTEGER NOT NULL,"
            " completion_tokens INTEGER NOT NULL, created_at REAL NOT NULL) WITHOUT ROWID"
        )
        db.execute("INSERT INTO answers VALUES ('a', 'kept', 1, 2, 0.0)")
    db.close()
    cache = LLMCache(path)
    assert cache.get("a") is not None and cache.get("a").text == "kept"  # type: ignore[union-attr]
    cache.close()
    assert rows(path) == [("kept", None, None, None, None)]
    LLMCache(path).close()  # a second opening finds the columns there


def test_each_answer_records_its_model_stage_and_server(
    fake_openai: Start, make_backend: MakeBackend, tmp_path: Path
) -> None:
    srv = fake_openai(responder=lambda body: "an answer")
    cache = LLMCache(tmp_path / "c.sqlite")
    cache.stage = "02_generate_queries"
    make_backend(srv, cache=cache).chat_many([ask("one")])
    pool = make_backend(srv, cache=cache).open_pool()
    pool.submit([ask("two")])[0].result()
    pool.close()
    assert rows(tmp_path / "c.sqlite") == [("an answer", "test-model", "02_generate_queries", srv.base_url, None)] * 2


def garbage_then_good(state: dict[str, bool]) -> Callable[[dict[str, Any]], str]:
    return lambda body: '{"label": "good"}' if state["working"] else "no JSON here"


def test_unparseable_answers_are_marked_and_asked_again_on_request(
    fake_openai: Start, make_backend: MakeBackend, tmp_path: Path
) -> None:
    state = {"working": False}
    srv = fake_openai(responder=garbage_then_good(state))
    path = tmp_path / "c.sqlite"
    first = chat_json(make_backend(srv, cache=LLMCache(path), max_reasks=1), [ask("q")], Verdict.model_validate)
    assert first[0].error == "llm_unparseable" and srv.request_count == 2
    # The first answer and the re-ask's answer are both marked.
    assert [r[4] for r in rows(path)] == ["llm_unparseable", "llm_unparseable"]

    state["working"] = True
    reused = chat_json(make_backend(srv, cache=LLMCache(path), max_reasks=1), [ask("q")], Verdict.model_validate)
    assert reused[0].error == "llm_unparseable" and srv.request_count == 2  # without asking: the cache answers

    fixed = chat_json(
        make_backend(srv, cache=LLMCache(path, reask_failed=True), max_reasks=1), [ask("q")], Verdict.model_validate
    )
    assert fixed[0].value == Verdict(label="good") and srv.request_count == 3
    # The first question's answer is replaced; the old re-ask's stays, marked, under its own key.
    assert sorted((r[0], r[4]) for r in rows(path)) == [
        ("no JSON here", "llm_unparseable"),
        ('{"label": "good"}', None),
    ]
    again = chat_json(make_backend(srv, cache=LLMCache(path)), [ask("q")], Verdict.model_validate)
    assert again[0].value == Verdict(label="good") and srv.request_count == 3


def test_a_good_answer_is_not_asked_again(fake_openai: Start, make_backend: MakeBackend, tmp_path: Path) -> None:
    srv = fake_openai(responder=lambda body: '{"label": "fine"}')
    path = tmp_path / "c.sqlite"
    chat_json(make_backend(srv, cache=LLMCache(path)), [ask("q")], Verdict.model_validate)
    chat_json(make_backend(srv, cache=LLMCache(path, reask_failed=True)), [ask("q")], Verdict.model_validate)
    assert srv.request_count == 1


def test_a_vllm_engine_records_and_marks_its_answers_too(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from builder.backends.llm import VLLMModelConfig, make_llm

    from .test_llm_vllm import install_fake_vllm

    install_fake_vllm(monkeypatch)
    path = tmp_path / "c.sqlite"
    config = VLLMModelConfig(backend="vllm", model="m", max_reasks=0)
    cache = LLMCache(path)
    cache.stage = "03_localize_spans"
    assert chat_json(make_llm("local", config, cache), [ask("q")], Verdict.model_validate)[0].error == "llm_unparseable"
    assert rows(path) == [("gen: q", "m", "03_localize_spans", None, "llm_unparseable")]
    again = make_llm("local", config, LLMCache(path, reask_failed=True))
    chat_json(again, [ask("q")], Verdict.model_validate)
    assert len(again._llm.calls) == 1  # type: ignore[attr-defined]
