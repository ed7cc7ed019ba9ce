"""Build rerankers and first-stage retrievers from their recipe entries."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from builder.backends.llm import BackendUnavailable
from builder.backends.rerankers.base import Reranker
from builder.backends.rerankers.bm25 import BM25Retriever, BM25Scorer
from builder.backends.rerankers.config import (
    AnyRerankerConfig,
    BiEncoderConfig,
    BM25Config,
    CrossEncoderConfig,
    FlagConfig,
    LLMJudgeConfig,
    missing_extra,
)
from builder.backends.rerankers.llm_judge import LLMJudge

if TYPE_CHECKING:
    from builder.backends.llm import LLMBackend
    from builder.prompt_templates import PromptLibrary

_QUERY_BLOCK = 256


class RerankerUnavailable(BackendUnavailable):
    """The reranker is not declared, or its backend's libraries are not installed."""


def make_reranker(name: str, config: AnyRerankerConfig, llm_lookup: Callable[[str], LLMBackend],
                  prompts: PromptLibrary | None = None) -> Reranker:
    """The reranker for one `rerankers:` entry; models load on first use."""
    hint = missing_extra(config)
    if hint:
        raise RerankerUnavailable(f"reranker {name!r}: {hint}")
    if isinstance(config, BM25Config):
        return BM25Scorer(name, config)
    if isinstance(config, LLMJudgeConfig):
        from builder.prompt_templates import PromptLibrary

        prompt = (prompts or PromptLibrary()).get(config.prompt)
        return LLMJudge(name, config, llm_lookup, prompt.render)
    from builder.backends.rerankers.neural import BiEncoderScorer, CrossEncoderScorer, FlagScorer

    if isinstance(config, FlagConfig):
        return FlagScorer(name, config)
    if isinstance(config, CrossEncoderConfig):
        return CrossEncoderScorer(name, config)
    assert isinstance(config, BiEncoderConfig)
    return BiEncoderScorer(name, config)


class Retriever(Protocol):
    def search(self, queries: Sequence[str], k: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """(corpus row indices, scores) per query, best first."""
        ...


class DenseRetriever:
    """Exhaustive inner-product search over a bi-encoder's unit vectors."""

    def __init__(self, encoder: Any, texts: Sequence[str]) -> None:
        self.encoder = encoder
        self.vectors = encoder.embed(texts)

    def search(self, queries: Sequence[str], k: int) -> list[tuple[np.ndarray, np.ndarray]]:
        n = self.vectors.shape[0]
        k = min(k, n)
        out: list[tuple[np.ndarray, np.ndarray]] = []
        if k == 0 or not queries:
            return [(np.zeros(0, np.int64), np.zeros(0))] * len(queries)
        qv = self.encoder.embed(queries, queries=True)
        for at in range(0, len(queries), _QUERY_BLOCK):
            scores = qv[at: at + _QUERY_BLOCK] @ self.vectors.T
            top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
            for row, cols in zip(scores, top):
                order = cols[np.argsort(-row[cols], kind="stable")]
                out.append((order.astype(np.int64), row[order].astype(np.float64)))
        return out


def make_retriever(scorer: Reranker, texts: Sequence[str]) -> Retriever:
    """A first-stage retriever over `texts` from a fitted-on-`texts` bm25 or a bi_encoder scorer."""
    if isinstance(scorer, BM25Scorer):
        scorer.fit(texts)
        assert scorer.lexicon is not None
        return BM25Retriever(scorer.lexicon)
    if hasattr(scorer, "embed"):
        return DenseRetriever(scorer, texts)
    raise RerankerUnavailable(f"{scorer.name!r} cannot retrieve: use a bm25 or bi_encoder entry")
