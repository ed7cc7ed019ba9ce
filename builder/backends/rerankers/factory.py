"""Build rerankers from their recipe entries (retrievers over them: builder.backends.retrievers)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from builder.backends.llm import BackendUnavailable
from builder.backends.rerankers.base import Reranker
from builder.backends.rerankers.config import (
    AnyRerankerConfig,
    BiEncoderConfig,
    BM25Config,
    CrossEncoderConfig,
    FlagConfig,
    LLMJudgeConfig,
    missing_extra,
)

if TYPE_CHECKING:
    from builder.backends.llm import LLMBackend
    from builder.backends.llm.prompt_templates import PromptLibrary
    from builder.backends.rerankers.neural import BatchPool


class RerankerUnavailable(BackendUnavailable):
    """The reranker is not declared, or its backend's libraries are not installed."""


def make_reranker(
    name: str,
    config: AnyRerankerConfig,
    llm_lookup: Callable[[str], LLMBackend],
    prompts: PromptLibrary | None = None,
    pool: BatchPool | None = None,
) -> Reranker:
    """The reranker for one `rerankers:` entry; models load on first use. With a `pool`,
    a neural model scores on the pool's workers (see pooled.py); others ignore it."""
    hint = missing_extra(config)
    if hint:
        raise RerankerUnavailable(f"reranker {name!r}: {hint}")
    # Each backend is imported only when a recipe uses it (bm25 needs numpy and scipy).
    if isinstance(config, BM25Config):
        from builder.backends.rerankers.bm25 import BM25Scorer

        return BM25Scorer(name, config)
    if isinstance(config, LLMJudgeConfig):
        from builder.backends.llm.prompt_templates import PromptLibrary
        from builder.backends.rerankers.llm_judge import LLMJudge

        prompt = (prompts or PromptLibrary()).get(config.prompt)
        return LLMJudge(name, config, llm_lookup, prompt.render)
    from builder.backends.rerankers.neural import BiEncoderScorer, CrossEncoderScorer, FlagScorer

    if isinstance(config, FlagConfig):
        return FlagScorer(name, config, pool)
    if isinstance(config, CrossEncoderConfig):
        return CrossEncoderScorer(name, config, pool)
    assert isinstance(config, BiEncoderConfig)
    return BiEncoderScorer(name, config, pool)
