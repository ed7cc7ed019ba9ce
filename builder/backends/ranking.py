"""The k best of scored corpus rows in one order for every retriever and numpy release:
score descending, then corpus row ascending."""

from __future__ import annotations

import numpy as np


def top_k(scores: np.ndarray, rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k best (score, row) pairs, by score descending then row ascending: one order for
    any split of the corpus into blocks, so a running top-k merges block by block."""
    if len(scores) > k:
        kth = np.partition(scores, len(scores) - k)[len(scores) - k]
        above = scores > kth
        tied = np.flatnonzero(scores == kth)
        tied = tied[np.argsort(rows[tied], kind="stable")][: k - int(above.sum())]
        keep = np.concatenate([np.flatnonzero(above), tied])
        scores, rows = scores[keep], rows[keep]
    order = np.lexsort((rows, -scores))
    return scores[order], rows[order]
