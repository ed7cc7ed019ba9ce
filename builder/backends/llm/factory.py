"""Turn a recipe's model entry into a running backend."""

from __future__ import annotations

from builder.backends.llm.base import LLMBackend
from builder.backends.llm.cache import LLMCache
from builder.backends.llm.config import ModelConfig, OpenAIModelConfig


def make_llm(name: str, config: ModelConfig, cache: LLMCache, on_ray: bool = False) -> LLMBackend:
    """Build the backend `config` asks for; its client library is imported only then.

    `on_ray` (the recipe's executor is Ray) runs a vLLM model as Ray Data vLLM engines on
    the cluster's GPUs. An OpenAI-compatible model stays in this process either way: one
    process's async HTTP keeps every endpoint full.
    """
    if isinstance(config, OpenAIModelConfig):
        from builder.backends.llm.openai_backend import OpenAIBackend

        return OpenAIBackend(name, config, cache)
    if on_ray:
        from builder.backends.llm.ray_vllm import RayVLLMBackend

        return RayVLLMBackend(name, config, cache)
    from builder.backends.llm.vllm_backend import VLLMBackend

    return VLLMBackend(name, config, cache)
