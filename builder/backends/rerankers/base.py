"""The one interface every reranker offers, and the plumbing they share."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Protocol

Pair = tuple[str, str]  # (query, text)
_WORD = re.compile(r"\S+")


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
    """`score` in terms of `score_pairs`; fit and close do nothing unless overridden.

    A scorer that reads only part of a long input sets `max_length` and answers
    `text_budget` and `token_ends` (see windows.py); None means it reads any length.
    """

    name: str
    normalized: bool = False
    max_length: int | None = None

    def text_budget(self, query: str) -> int | None:
        """Tokens of text the model reads beside `query`; None: no limit."""
        return None

    def token_ends(self, text: str) -> list[int]:
        """Where each of the scorer's tokens ends in `text` (here: whitespace words)."""
        return [m.end() for m in _WORD.finditer(text)]

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


def length_batches(lengths: Sequence[int], size: int) -> list[list[int]]:
    """Indices in model batches of at most `size`, longest first (ties in input order).

    The batches are fixed here, not by the model library, because a batch's padding
    changes the last bits of a score: a scorer that runs its batches on Ray workers
    forms exactly the batches it forms in this process, and gets the same floats.
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return [order[at : at + size] for at in range(0, len(order), size)]


def is_missing(score: float) -> bool:
    return math.isnan(score)
