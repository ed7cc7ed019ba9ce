"""LLM access for the build stages: configs, backends, caching and JSON answers.

The backends are imported on first use: `openai` alone takes longer to import than a
rerun with nothing to do needs in all.
"""

from typing import TYPE_CHECKING, Any

from builder.backends.llm.base import (
    BackendUnavailable,
    ChatRequest,
    ChatResponse,
    LLMBackend,
    LLMUsage,
    Message,
)
from builder.backends.llm.cache import CachedAnswer, LLMCache, key_for
from builder.backends.llm.config import ModelConfig, OpenAIModelConfig, VLLMModelConfig
from builder.backends.llm.factory import make_llm
from builder.backends.llm.json_answers import JSONAnswer, chat_json, parse_json_lenient

if TYPE_CHECKING:
    from builder.backends.llm.openai_backend import OpenAIBackend
    from builder.backends.llm.ray_vllm import RayVLLMBackend
    from builder.backends.llm.vllm_backend import VLLMBackend

__all__ = [
    "BackendUnavailable",
    "CachedAnswer",
    "ChatRequest",
    "ChatResponse",
    "JSONAnswer",
    "LLMBackend",
    "LLMCache",
    "LLMUsage",
    "Message",
    "ModelConfig",
    "OpenAIBackend",
    "OpenAIModelConfig",
    "RayVLLMBackend",
    "VLLMBackend",
    "VLLMModelConfig",
    "chat_json",
    "key_for",
    "make_llm",
    "parse_json_lenient",
]


def __getattr__(name: str) -> Any:
    if name == "OpenAIBackend":
        from builder.backends.llm.openai_backend import OpenAIBackend

        return OpenAIBackend
    if name == "RayVLLMBackend":
        from builder.backends.llm.ray_vllm import RayVLLMBackend

        return RayVLLMBackend
    if name == "VLLMBackend":
        from builder.backends.llm.vllm_backend import VLLMBackend

        return VLLMBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
