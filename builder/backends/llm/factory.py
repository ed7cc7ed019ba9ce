"""Turn a recipe's model entry into a running backend."""

from __future__ import annotations

from builder.backends.llm.base import LLMBackend
from builder.backends.llm.cache import LLMCache
from builder.backends.llm.config import ModelConfig, OpenAIModelConfig
from builder.backends.llm.openai_backend import OpenAIBackend
from builder.backends.llm.vllm_backend import VLLMBackend


def make_llm(name: str, config: ModelConfig, cache: LLMCache) -> LLMBackend:
    """Build the backend `config` asks for (vLLM itself is imported only when chosen)."""
    if isinstance(config, OpenAIModelConfig):
        return OpenAIBackend(name, config, cache)
    return VLLMBackend(name, config, cache)
