"""First-stage retrieval, shared by quality control (`false_negatives`) and `build-bench eval`:
one BM25 (the reranker's lexicon, so CJK text is read character by character) and one
dense retriever (a bi_encoder's unit vectors, searched exhaustively).

Both take the corpus as blocks of texts, so a corpus read from a file in blocks is never
held whole: BM25 keeps only its score matrix (builder.backends.bm25_index), the dense
retriever only its vectors, in a memory-mapped file in a scratch folder.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from builder.backends.bm25_index import BM25Index, Hits
from builder.backends.ranking import top_k
from builder.backends.rerankers.base import Reranker
from builder.backends.rerankers.bm25 import BM25Scorer
from builder.backends.rerankers.factory import RerankerUnavailable

_QUERY_BLOCK = 256
_DOC_BLOCK = 16_384  # documents scored against a block of queries at once
BLOCK = 1024  # documents tokenized at once (and scored at once while the BM25 index is built)

__all__ = ["BLOCK", "DenseRetriever", "Hits", "Retriever", "blocks_of", "make_retriever", "top_k"]


class Retriever(Protocol):
    def search(self, queries: Sequence[str], k: int) -> list[Hits]:
        """(corpus row indices, scores) per query, best first."""
        ...

    def close(self) -> None:
        """Remove whatever the retriever keeps on disk."""
        ...


class DenseRetriever:
    """Exhaustive inner-product search over a bi-encoder's unit vectors, kept in a
    memory-mapped float32 file; ties are broken by corpus order, whatever the blocks."""

    def __init__(self, encoder: Any, text_blocks: Iterable[Sequence[str]], scratch: Path | None = None) -> None:
        self.encoder = encoder
        self._folder = tempfile.TemporaryDirectory(prefix="dense-", dir=scratch)
        path = Path(self._folder.name) / "vectors.f32"
        n, dim = 0, 0
        with path.open("wb") as out:
            for texts in text_blocks:
                vectors = np.ascontiguousarray(encoder.embed(list(texts)), dtype=np.float32)
                if vectors.size:
                    n, dim = n + vectors.shape[0], vectors.shape[1]
                    out.write(vectors.tobytes())
        self.vectors = np.memmap(path, np.float32, "r", shape=(n, dim)) if n else np.zeros((0, 0), np.float32)

    def search(self, queries: Sequence[str], k: int) -> list[Hits]:
        n = self.vectors.shape[0]
        k = min(k, n)
        if k == 0 or not queries:
            return [(np.zeros(0, np.int64), np.zeros(0))] * len(queries)
        qv = self.encoder.embed(queries, queries=True)
        out: list[Hits] = []
        for at in range(0, len(queries), _QUERY_BLOCK):
            block = qv[at : at + _QUERY_BLOCK]
            best = [(np.zeros(0, np.float32), np.zeros(0, np.int64))] * len(block)
            for first in range(0, n, _DOC_BLOCK):
                scores = block @ np.asarray(self.vectors[first : first + _DOC_BLOCK]).T
                rows = np.arange(first, first + scores.shape[1])
                best = [
                    top_k(np.concatenate([s, row]), np.concatenate([r, rows]), k) for (s, r), row in zip(best, scores)
                ]
            out += [(rows, scores.astype(np.float64)) for scores, rows in best]
        return out

    def close(self) -> None:
        self.vectors = np.zeros((0, 0), np.float32)  # drops the map before its file goes
        self._folder.cleanup()


def blocks_of(texts: Sequence[str], size: int = BLOCK) -> Iterable[Sequence[str]]:
    return (texts[at : at + size] for at in range(0, len(texts), size))


def make_retriever(
    scorer: Reranker, texts: Sequence[str] | Callable[[], Iterable[Sequence[str]]], scratch: Path | None = None
) -> Retriever:
    """A first-stage retriever from a bm25 or a bi_encoder scorer, over `texts` (a list, or
    a function that yields the corpus in blocks). A bm25 scorer already fitted on that
    list lends its term counts; otherwise the texts are tokenized block by block and the
    scorer itself stays unfitted. Scratch files go in a temporary folder under `scratch`."""
    blocks = texts if callable(texts) else lambda: blocks_of(texts)
    if isinstance(scorer, BM25Scorer):
        if scorer.lexicon is not None and not callable(texts) and scorer.fitted_on(texts):
            return BM25Index.from_lexicon(scorer.lexicon, BLOCK, scratch)
        return BM25Index.from_texts(scorer.config, blocks(), scratch)
    if hasattr(scorer, "embed"):
        return DenseRetriever(scorer, blocks(), scratch)
    raise RerankerUnavailable(f"{scorer.name!r} cannot retrieve: use a bm25 or bi_encoder entry")
