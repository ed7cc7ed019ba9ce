"""Fixtures for the LLM backend tests: a real local server and a backend factory."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from builder.backends.llm import LLMCache, OpenAIBackend, OpenAIModelConfig
from tests.support.openai_server import FakeOpenAIServer, openai_server_fixture

fake_openai = openai_server_fixture()

MakeBackend = Callable[..., OpenAIBackend]


@pytest.fixture
def make_backend() -> Iterator[MakeBackend]:
    """Backends pointed at a fake server, with test-sized backoff; closed at teardown."""
    made: list[OpenAIBackend] = []

    def make(server: FakeOpenAIServer, cache: LLMCache | None = None, **overrides: Any) -> OpenAIBackend:
        settings: dict[str, Any] = {"backoff_initial_s": 0.01, "backoff_max_s": 0.05, **overrides}
        config = OpenAIModelConfig(model="test-model", base_url=server.base_url, **settings)
        backend = OpenAIBackend("gen", config, cache if cache is not None else LLMCache.memory())
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()
