"""Rerankers behind one interface, `score(query, texts) -> list[float]`.

Backends: `bm25` (built in, no model files), `flag` (FlagEmbedding), `cross_encoder`
(sentence-transformers), `bi_encoder` (cosine of embeddings) and `llm_judge` (0-4 LLM
grades). The neural ones need the `rerank` extra and load their model on first use.

Every name is imported from its module on first use, so a command that only reads a
reranker's config does not load the LLM judge's answer pool (asyncio) or bm25's scipy.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from builder.backends.rerankers.base import Pair, Reranker, is_missing
    from builder.backends.rerankers.config import (
        AnyRerankerConfig,
        BiEncoderConfig,
        BM25Config,
        CrossEncoderConfig,
        FlagConfig,
        LLMJudgeConfig,
        RerankerConfig,
        missing_extra,
        reranker_configs,
        reranker_fingerprint,
    )
    from builder.backends.rerankers.factory import RerankerUnavailable, make_reranker
    from builder.backends.rerankers.llm_judge import Grade, SetAside, grade_pair_sets, grade_pairs, request_count

# Each public name -> the module (under this package) that defines it.
_HOMES = {
    "Pair": "base",
    "Reranker": "base",
    "is_missing": "base",
    "AnyRerankerConfig": "config",
    "BiEncoderConfig": "config",
    "BM25Config": "config",
    "CrossEncoderConfig": "config",
    "FlagConfig": "config",
    "LLMJudgeConfig": "config",
    "RerankerConfig": "config",
    "missing_extra": "config",
    "reranker_configs": "config",
    "reranker_fingerprint": "config",
    "RerankerUnavailable": "factory",
    "make_reranker": "factory",
    "Grade": "llm_judge",
    "SetAside": "llm_judge",
    "grade_pair_sets": "llm_judge",
    "grade_pairs": "llm_judge",
    "request_count": "llm_judge",
}

__all__ = [
    "AnyRerankerConfig",
    "BM25Config",
    "BiEncoderConfig",
    "CrossEncoderConfig",
    "FlagConfig",
    "Grade",
    "LLMJudgeConfig",
    "Pair",
    "Reranker",
    "RerankerConfig",
    "RerankerUnavailable",
    "SetAside",
    "grade_pair_sets",
    "grade_pairs",
    "is_missing",
    "make_reranker",
    "missing_extra",
    "request_count",
    "reranker_configs",
    "reranker_fingerprint",
]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
