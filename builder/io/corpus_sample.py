"""A seeded sample of the documents a recipe's sources yield, read without holding them all."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import polars as pl

from builder.io.corpus_loader import CORPUS_IN, Doc, iter_documents
from builder.io.sources import _SourceBase


def sample_documents(
    specs: Sequence[_SourceBase], base_dir: Path | None, limit: int | None, size: int, seed: int = 0
) -> tuple[int, pl.DataFrame]:
    """(documents the sources yield, the sample): all of them when there are at most `size`,
    else the rows `DataFrame.sample(size, seed=seed)` of the whole corpus would pick, found
    by counting in a first pass and collecting those rows in a second."""
    kept: list[Doc] | None = []
    n = 0
    for item in iter_documents(specs, base_dir, limit):
        if isinstance(item, Doc):
            n += 1
            if kept is not None:
                kept.append(item)
                if len(kept) > size:
                    kept = None  # too many to keep: the second pass picks the sample
    if kept is not None:
        return n, pl.DataFrame(kept, schema=CORPUS_IN, orient="row")
    picks = pl.int_range(n, eager=True).sample(size, seed=seed)
    slot = {row: i for i, row in enumerate(picks.to_list())}
    chosen: list[Doc | None] = [None] * size
    row = 0
    for item in iter_documents(specs, base_dir, limit):
        if isinstance(item, Doc):
            if row in slot:
                chosen[slot[row]] = item
            row += 1
    return n, pl.DataFrame(chosen, schema=CORPUS_IN, orient="row")
