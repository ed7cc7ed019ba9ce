"""Turn a recipe's model entry into a running backend."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from builder.backends.llm.base import LLMBackend
from builder.backends.llm.batch_book import BatchBook
from builder.backends.llm.budget import SpendGate
from builder.backends.llm.cache import LLMCache
from builder.backends.llm.config import ModelConfig, OpenAIModelConfig


def make_llm(
    name: str,
    config: ModelConfig,
    cache: LLMCache,
    on_ray: bool = False,
    gate: SpendGate | None = None,
    batches: BatchBook | None = None,
) -> LLMBackend:
    """Build the backend `config` asks for; its client library is imported only then.

    `on_ray` (the recipe's executor is Ray) runs a vLLM model as Ray Data vLLM engines on
    the cluster's GPUs. An OpenAI-compatible model stays in this process either way: one
    process's async HTTP keeps every endpoint full. `gate`, a run's budget, meters the
    OpenAI-compatible models: they are the ones that bill per request. `batches`, the run
    folder's batch record, is where such a model with `batch: true` keeps its provider batches.
    """
    if isinstance(config, OpenAIModelConfig):
        from builder.backends.llm.openai_backend import OpenAIBackend

        return OpenAIBackend(name, config, cache, gate, batches)
    if on_ray:
        from builder.backends.llm.ray_vllm import RayVLLMBackend

        return RayVLLMBackend(name, config, cache)
    from builder.backends.llm.vllm_backend import VLLMBackend

    return VLLMBackend(name, config, cache)


def start_warm_up(configs: Iterable[ModelConfig]) -> threading.Thread | None:
    """Load, on a daemon thread, what the first OpenAI-compatible client of the process needs
    (the `openai` SDK takes most of a second to import); None when no config needs it.

    Started while the data loads, it keeps that cost out of the first LLM stage; joining
    the thread before `make_llm` keeps two threads from building the same things.
    """
    if not any(isinstance(c, OpenAIModelConfig) for c in configs):
        return None
    thread = threading.Thread(target=_warm_openai, name="llm-warm-up", daemon=True)
    thread.start()
    return thread


def _warm_openai() -> None:
    try:
        from builder.backends.llm.openai_backend import warm_up

        warm_up()
    except Exception:  # only a head start: make_llm repeats the work and reports what fails
        return
