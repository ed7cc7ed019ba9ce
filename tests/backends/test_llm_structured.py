"""Structured output by default, the fallback for servers that refuse it, and the prompt
tokens a server reports it served from its prompt cache."""

from __future__ import annotations

import json
from typing import Any

from builder.backends.llm import ChatRequest
from builder.backends.llm.json_answers import chat_json
from tests.support.openai_server import Reply

from .conftest import MakeBackend

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def ask(text: str) -> ChatRequest:
    return ChatRequest.of([{"role": "user", "content": text}], json_schema=SCHEMA)


def refuses_schemas(message: str) -> Any:
    def respond(body: dict[str, Any]) -> str | Reply:
        if "response_format" in body:
            return Reply(status=400, body=json.dumps({"error": {"message": message, "type": "invalid_request_error"}}))
        return '{"n": 1}'

    return respond


def test_requests_with_a_schema_carry_it_by_default(fake_openai: Any, make_backend: MakeBackend) -> None:
    srv = fake_openai(responder=lambda body: '{"n": 1}')
    backend = make_backend(srv)
    assert [a.value for a in chat_json(backend, [ask("q")], lambda v: v["n"])] == [1]
    assert srv.requests[0]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": SCHEMA},
    }
    assert backend.schema_refused is None


def test_a_server_that_refuses_schemas_is_asked_by_the_prompt_alone_from_then_on(
    fake_openai: Any, make_backend: MakeBackend
) -> None:
    srv = fake_openai(responder=refuses_schemas("response_format json_schema is not supported"))
    backend = make_backend(srv, max_concurrency=1)
    answers = chat_json(backend, [ask(f"q{i}") for i in range(4)], lambda v: v["n"])
    assert [a.value for a in answers] == [1, 1, 1, 1]
    # The first request is refused once and asked again plainly; the others go plain at once.
    assert ["response_format" in body for body in srv.requests] == [True, False, False, False, False]
    assert backend.schema_refused == "HTTP 400: Error code: 400 - response_format json_schema is not supported"
    assert backend.usage.calls == 4 and backend.usage.failures == 0


def test_a_400_that_a_plain_request_cures_is_a_refusal_even_unnamed(
    fake_openai: Any, make_backend: MakeBackend
) -> None:
    srv = fake_openai(responder=refuses_schemas("bad request"))
    backend = make_backend(srv)
    assert [a.value for a in chat_json(backend, [ask("q")], lambda v: v["n"])] == [1]
    assert backend.schema_refused == "HTTP 400: Error code: 400 - bad request"


def test_a_400_that_is_not_about_the_schema_does_not_switch_it_off(fake_openai: Any, make_backend: MakeBackend) -> None:
    too_long = Reply(status=400, body='{"error": {"message": "prompt is longer than the context"}}')
    srv = fake_openai(responder=lambda body: too_long)
    backend = make_backend(srv)
    (answer,) = chat_json(backend, [ask("q")], lambda v: v["n"])
    assert answer.error == "llm_failed: HTTP 400: Error code: 400 - prompt is longer than the context"
    assert backend.schema_refused is None
    assert len(srv.requests) == 2  # asked once more without the schema, which did not help


def test_cached_prompt_tokens_are_counted(fake_openai: Any, make_backend: MakeBackend) -> None:
    usage = {"prompt_tokens": 100, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 64}}
    srv = fake_openai(responder=lambda body: Reply(text='{"n": 1}', usage=usage))
    backend = make_backend(srv)
    (answer,) = backend.chat_many([ask("q"), ask("q2")])[:1]
    assert answer.cached_tokens == 64
    assert (backend.usage.prompt_tokens, backend.usage.cached_tokens) == (200, 128)


def test_servers_without_prompt_cache_details_count_none(fake_openai: Any, make_backend: MakeBackend) -> None:
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "prompt_tokens_details": None}
    srv = fake_openai(responder=lambda body: Reply(text='{"n": 1}', usage=usage))
    backend = make_backend(srv)
    backend.chat_many([ask("q")])
    assert (backend.usage.prompt_tokens, backend.usage.cached_tokens, backend.usage.failures) == (10, 0, 0)


def test_llama_cpp_timings_count_as_cached_tokens_when_usage_has_no_details(
    fake_openai: Any, make_backend: MakeBackend
) -> None:
    # llama-server reports its prompt cache's reuse as `timings.cache_n`, beside the usage.
    usage = {"prompt_tokens": 120, "completion_tokens": 5}
    timings = {"cache_n": 96, "prompt_n": 24, "prompt_ms": 3.5, "predicted_n": 5}
    srv = fake_openai(responder=lambda body: Reply(text='{"n": 1}', usage=usage, extra={"timings": timings}))
    backend = make_backend(srv)
    (answer,) = backend.chat_many([ask("q")])
    assert answer.cached_tokens == 96
    assert (backend.usage.prompt_tokens, backend.usage.cached_tokens) == (120, 96)


def test_the_servers_cached_tokens_win_over_llama_cpp_timings(fake_openai: Any, make_backend: MakeBackend) -> None:
    usage = {"prompt_tokens": 120, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 0}}
    srv = fake_openai(responder=lambda body: Reply(text='{"n": 1}', usage=usage, extra={"timings": {"cache_n": 96}}))
    (answer,) = make_backend(srv).chat_many([ask("q")])
    assert answer.cached_tokens == 0


def test_malformed_llama_cpp_timings_count_nothing(fake_openai: Any, make_backend: MakeBackend) -> None:
    usage = {"prompt_tokens": 120, "completion_tokens": 5}
    srv = fake_openai(
        responder=lambda body: Reply(text='{"n": 1}', usage=usage, extra={"timings": {"cache_n": "many"}})
    )
    (answer,) = make_backend(srv).chat_many([ask("q")])
    assert answer.ok and answer.cached_tokens == 0
