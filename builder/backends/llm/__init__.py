"""LLM access for the build stages: configs, backends, caching and JSON answers."""

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
    "VLLMBackend",
    "VLLMModelConfig",
    "chat_json",
    "key_for",
    "make_llm",
    "parse_json_lenient",
]
