"""build-bench's OpenAI backend against a real llama-server with SmolLM2-135M-Instruct:
answers and usage, the prompt cache's `cached_tokens`, and JSON-schema structured output."""

from __future__ import annotations

import json
import urllib.request
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from builder.backends.llm import LLMCache, OpenAIBackend, OpenAIModelConfig
from builder.backends.llm.base import ChatRequest
from tests.support.llama_server import MODEL_ALIAS, LlamaServer

pytestmark = pytest.mark.real_llm


def _backend(server: LlamaServer, **settings: Any) -> OpenAIBackend:
    config = OpenAIModelConfig(model=MODEL_ALIAS, base_url=server.base_url, temperature=0.0, **settings)
    return OpenAIBackend("gen", config, LLMCache.memory())


def _post(server: LlamaServer, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{server.base_url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=120) as reply:
        return json.loads(reply.read())


def test_backend_gets_text_and_usage(llama):
    with _backend(llama, max_tokens=24) as backend:
        (answer,) = backend.chat_many([ChatRequest.of([{"role": "user", "content": "Name one colour."}])])
    print(f"\nanswer: {answer.text!r}; prompt {answer.prompt_tokens}, completion {answer.completion_tokens} tokens")
    assert answer.ok and answer.text.strip()
    assert answer.prompt_tokens > 5 and 0 < answer.completion_tokens <= 24
    assert answer.source == llama.base_url


def test_a_repeated_prompt_reports_cached_tokens(llama):
    """The server's prompt cache shows in `usage.prompt_tokens_details.cached_tokens`:
    the raw reply is read here, before any client code can reshape it."""
    article = " ".join(f"Paragraph {i} says that the river rose by {i} centimetres overnight." for i in range(40))
    body = {
        "model": MODEL_ALIAS,
        "max_tokens": 4,
        "temperature": 0.0,
        "messages": [{"role": "user", "content": f"{article}\nHow much did the river rise in paragraph 7?"}],
    }
    first, second = _post(llama, body), _post(llama, body)
    print(f"\nfirst usage: {first['usage']}\nsecond usage: {second['usage']}")
    prompt = first["usage"]["prompt_tokens"]
    assert prompt > 400 and second["usage"]["prompt_tokens"] == prompt
    # Only the chat template's opening, shared with any request the session's server already
    # answered, can come from the cache the first time.
    assert first["usage"]["prompt_tokens_details"]["cached_tokens"] < 40
    # All but the last prompt token come from the cache: the server evaluates that one again
    # to have logits to sample the answer from.
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] == prompt - 1


# Bounded strings keep a small model from writing until max_tokens inside one.
Name = Annotated[str, StringConstraints(min_length=1, max_length=40)]


class City(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    city: Name
    population: int = Field(ge=0)
    landmarks: list[Name] = Field(min_length=1, max_length=3)


def test_json_schema_response_format_yields_valid_json(llama):
    schema = City.model_json_schema()
    asks = ["Describe Paris as JSON.", "Describe a small fishing town as JSON.", "Tell me about Tokyo."]
    requests = [ChatRequest.of([{"role": "user", "content": ask}], json_schema=schema) for ask in asks]
    with _backend(llama, max_tokens=200, structured_output=True) as backend:
        answers = backend.chat_many(requests)
    for answer in answers:
        print(f"\nstructured answer: {answer.text!r}")
        assert answer.ok, answer.error
        City.model_validate_json(answer.text)
