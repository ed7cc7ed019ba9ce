"""First-stage retrieval, shared by quality control (`false_negatives`) and `build-bench eval`:
one BM25 (the reranker's lexicon, so CJK text is read character by character) and one
dense retriever (a bi_encoder's unit vectors, searched exhaustively)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from builder.backends.rerankers.base import Reranker
from builder.backends.rerankers.bm25 import BM25Retriever, BM25Scorer
from builder.backends.rerankers.factory import RerankerUnavailable

_QUERY_BLOCK = 256
Hits = tuple[np.ndarray, np.ndarray]  # corpus row indices and their scores, best first


class Retriever(Protocol):
    def search(self, queries: Sequence[str], k: int) -> list[Hits]:
        """(corpus row indices, scores) per query, best first."""
        ...


class DenseRetriever:
    """Exhaustive inner-product search over a bi-encoder's unit vectors."""

    def __init__(self, encoder: Any, texts: Sequence[str]) -> None:
        self.encoder = encoder
        self.vectors = encoder.embed(texts)

    def search(self, queries: Sequence[str], k: int) -> list[Hits]:
        n = self.vectors.shape[0]
        k = min(k, n)
        out: list[Hits] = []
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
    """A first-stage retriever over `texts` from a bm25 (fitted here on `texts`) or a bi_encoder scorer."""
    if isinstance(scorer, BM25Scorer):
        scorer.fit(texts)
        assert scorer.lexicon is not None
        return BM25Retriever(scorer.lexicon)
    if hasattr(scorer, "embed"):
        return DenseRetriever(scorer, texts)
    raise RerankerUnavailable(f"{scorer.name!r} cannot retrieve: use a bm25 or bi_encoder entry")
