"""LLM access for the build stages: configs, backends, caching and JSON answers.

Every name is imported from its module on first use: `openai` alone takes longer to import
than a rerun with nothing to do needs in all, and the answer pool (asyncio), the cache
(sqlite3) and the JSON helpers are needed only once a stage asks a model.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    from builder.backends.llm.openai_backend import OpenAIBackend
    from builder.backends.llm.ray_vllm import RayVLLMBackend
    from builder.backends.llm.vllm_backend import VLLMBackend

# Each public name -> the module (under this package) that defines it.
_HOMES = {
    "BackendUnavailable": "base",
    "ChatRequest": "base",
    "ChatResponse": "base",
    "LLMBackend": "base",
    "LLMUsage": "base",
    "Message": "base",
    "CachedAnswer": "cache",
    "LLMCache": "cache",
    "key_for": "cache",
    "ModelConfig": "config",
    "OpenAIModelConfig": "config",
    "VLLMModelConfig": "config",
    "make_llm": "factory",
    "JSONAnswer": "json_answers",
    "chat_json": "json_answers",
    "parse_json_lenient": "json_answers",
    "OpenAIBackend": "openai_backend",
    "RayVLLMBackend": "ray_vllm",
    "VLLMBackend": "vllm_backend",
}

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
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
