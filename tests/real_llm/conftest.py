"""One llama-server with the packaged SmolLM2 for the whole session, started on first use.

Tests never build the binary (that takes minutes; `.ci/run` does it): without it, or
without the model package, they skip with the command that installs what is missing.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.llama_server import LlamaServer, missing


@pytest.fixture(scope="session")
def llama() -> Iterator[LlamaServer]:
    if (reason := missing()) is not None:
        pytest.skip(reason)
    with LlamaServer() as server:
        print(f"\nllama-server ready in {server.started_in_s:.1f} s at {server.base_url}")
        yield server
