"""Rerankers behind one interface, `score(query, texts) -> list[float]`.

Backends: `bm25` (built in, no model files), `flag` (FlagEmbedding), `cross_encoder`
(sentence-transformers), `bi_encoder` (cosine of embeddings) and `llm_judge` (0-4 LLM
grades). The neural ones need the `rerank` extra and load their model on first use.
"""

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
from builder.backends.rerankers.factory import (
    RerankerUnavailable,
    make_reranker,
)
from builder.backends.rerankers.llm_judge import Grade, SetAside, grade_pair_sets, grade_pairs, request_count

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
