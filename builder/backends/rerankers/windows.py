"""Scoring what a model can read: long texts as overlapping windows, best window wins.

A neural scorer reads at most `max_length` tokens of a (query, text) input and silently
drops the rest, so evidence past that point scores as if absent. A scorer with a window
offers `text_budget(query)` (tokens of text it reads beside that query) and
`token_ends(text)` (the character offset where each of its tokens ends); `score_windowed`
cuts each text into windows of that many tokens, each overlapping the next by a quarter
(a span up to a quarter of the window lies whole in some window), and takes the highest
score. Scorers without a window (bm25, llm_judge) score whole texts as before.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from builder.backends.rerankers.base import Pair


def budget_of(reranker: Any) -> Callable[[str], int | None] | None:
    """The scorer's `text_budget`, or None when it reads any length."""
    if getattr(reranker, "max_length", None) is None:
        return None
    return getattr(reranker, "text_budget", None)


def windows(text: str, ends: Sequence[int], budget: int) -> list[str]:
    """`text` cut into windows of `budget` tokens, each starting 3/4 of a window after the last."""
    n = len(ends)
    if n <= budget:
        return [text]
    stride = max(1, budget - budget // 4)
    out, i = [], 0
    while True:
        j = min(i + budget, n)
        out.append(text[ends[i - 1] if i else 0 : len(text) if j == n else ends[j - 1]])
        if j == n:
            return out
        i += stride


def reads_up_to(reranker: Any, query: str, text: str) -> int | None:
    """The character offset where the scorer stops reading `text` in one input; None: all of it."""
    budget = budget_of(reranker)
    if budget is None:
        return None
    b = budget(query)
    ends = reranker.token_ends(text)
    return None if b is None or len(ends) <= b else ends[b - 1]


# Most pairs scored per call when progress is reported; a scorer with batches smaller
# than this reports each batch, since on a CPU one batch may take many seconds.
PROGRESS_CHUNK = 256


def progress_step(reranker: Any) -> int:
    """Pairs per progress report: one of the reranker's batches, at most PROGRESS_CHUNK; a
    pool of workers gets PROGRESS_CHUNK, enough batches to keep every worker busy."""
    batch = getattr(getattr(reranker, "config", None), "batch_size", None)
    if getattr(reranker, "pool", None) is not None:
        return PROGRESS_CHUNK
    return min(PROGRESS_CHUNK, batch) if isinstance(batch, int) and batch > 0 else PROGRESS_CHUNK


def score_windowed(reranker: Any, pairs: Sequence[Pair], on_done: Callable[[int], None] | None = None) -> list[float]:
    """Per pair, the best score over the windows of its text (NaN if any window has none).
    `on_done(n)` is told each time n more pairs are scored (a batch at a time, see
    `progress_step`)."""
    scores: list[float] = []
    step = progress_step(reranker) if on_done is not None else max(1, len(pairs))
    for start in range(0, len(pairs), step):
        chunk = pairs[start : start + step]
        scores += _score_windowed(reranker, chunk)
        if on_done is not None:
            on_done(len(chunk))
    return scores


def _score_windowed(reranker: Any, pairs: Sequence[Pair]) -> list[float]:
    budget = budget_of(reranker)
    if budget is None:
        return list(reranker.score_pairs(pairs))
    ends: dict[str, list[int]] = {}
    flat: list[Pair] = []
    owner: list[int] = []
    for k, (query, text) in enumerate(pairs):
        b = budget(query)
        if b is None:
            parts = [text]
        else:
            if text not in ends:
                ends[text] = reranker.token_ends(text)
            parts = windows(text, ends[text], b)
        flat += [(query, p) for p in parts]
        owner += [k] * len(parts)
    best = [-math.inf] * len(pairs)
    for k, s in zip(owner, reranker.score_pairs(flat)):
        best[k] = math.nan if math.isnan(s) or math.isnan(best[k]) else max(best[k], s)
    return best
