"""Read back a folder a build wrote: its parquet tables as a Bench (for stats, a card
written again, or a stage that builds on an earlier build)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from builder.bench import Bench, canonical_positions


def read_beir(folder: Path) -> Bench:
    """Read a folder written by `write_beir` (the parquet copies keep every column)."""
    folder = Path(folder)
    return Bench.of(
        corpus=pl.read_parquet(folder / "corpus.parquet"),
        queries=canonical_positions(pl.read_parquet(folder / "queries.parquet")),
        qrels=pl.read_parquet(folder / "qrels.parquet"),
        drops=pl.read_parquet(folder / "drops.parquet"),
    )
