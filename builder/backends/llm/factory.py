"""Turn a recipe's model entry into a running backend."""

from __future__ import annotations

from builder.backends.llm.base import LLMBackend
from builder.backends.llm.cache import LLMCache
from builder.backends.llm.config import ModelConfig, OpenAIModelConfig


def make_llm(name: str, config: ModelConfig, cache: LLMCache) -> LLMBackend:
    """Build the backend `config` asks for; its client library is imported only then."""
    if isinstance(config, OpenAIModelConfig):
        from builder.backends.llm.openai_backend import OpenAIBackend

        return OpenAIBackend(name, config, cache)
    from builder.backends.llm.vllm_backend import VLLMBackend

    return VLLMBackend(name, config, cache)
