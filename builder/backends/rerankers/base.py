"""The one interface every reranker offers, and the plumbing they share."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

Pair = tuple[str, str]  # (query, text)


class Reranker(Protocol):
    """Scores (query, text) pairs; higher means more relevant.

    A score is NaN where the backend could not score a pair (an LLM judge that failed);
    callers count those as failures, never as a low score.
    """

    name: str
    normalized: bool  # scores lie in [0, 1]

    def fit(self, corpus_texts: Sequence[str]) -> None:
        """Learn corpus statistics (BM25's IDF); a no-op for neural models."""
        ...

    def score(self, query: str, texts: Sequence[str]) -> list[float]: ...

    def score_pairs(self, pairs: Sequence[Pair]) -> list[float]: ...

    def close(self) -> None:
        """Release the model (GPU memory, threads)."""
        ...


class RerankerBase:
    """`score` in terms of `score_pairs`; fit and close do nothing unless overridden."""

    name: str
    normalized: bool = False

    def fit(self, corpus_texts: Sequence[str]) -> None:
        return None

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        return self.score_pairs([(query, t) for t in texts])

    def score_pairs(self, pairs: Sequence[Pair]) -> list[float]:
        raise NotImplementedError

    def close(self) -> None:
        return None


def as_floats(values: object, expected: int) -> list[float]:
    """A model's output (list, array, tensor or a bare float for one pair) as floats."""
    if hasattr(values, "tolist"):
        values = values.tolist()  # type: ignore[union-attr]
    if not isinstance(values, list):
        values = [values]
    out = [float(v) for v in values]
    if len(out) != expected:
        raise RuntimeError(f"reranker returned {len(out)} scores for {expected} pairs")
    return out


def is_missing(score: float) -> bool:
    return math.isnan(score)
