"""Write a Bench as a BEIR folder (jsonl + qrels tsv) with parquet copies and stats."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import polars as pl

from builder.bench import Bench, replace_dir


def write_beir(bench: Bench, out_dir: Path, stats: dict[str, Any] | None = None) -> Path:
    """The folder appears whole or not at all: it is built beside the target, then renamed."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        _write_tables(bench, tmp)
        summary = {"counts": bench.counts(), **(stats or {})}
        (tmp / "stats.json").write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
        replace_dir(tmp, out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


def _write_tables(bench: Bench, folder: Path) -> None:
    corpus = bench.corpus.select(pl.col("doc_id").alias("_id"), "title", "text")
    corpus.write_ndjson(folder / "corpus.jsonl")
    queries = bench.queries.rename({"query_id": "_id"})
    queries.write_ndjson(folder / "queries.jsonl")
    (folder / "qrels").mkdir()
    bench.qrels.select(
        pl.col("query_id").alias("query-id"), pl.col("doc_id").alias("corpus-id"), "score"
    ).write_csv(folder / "qrels" / "test.tsv", separator="\t")
    bench.corpus.write_parquet(folder / "corpus.parquet")
    bench.queries.write_parquet(folder / "queries.parquet")
    bench.qrels.write_parquet(folder / "qrels.parquet")
    bench.drops.write_parquet(folder / "drops.parquet")


def read_beir(folder: Path) -> Bench:
    """Read a folder written by `write_beir` (the parquet copies keep every column)."""
    folder = Path(folder)
    return Bench.of(
        corpus=pl.read_parquet(folder / "corpus.parquet"),
        queries=pl.read_parquet(folder / "queries.parquet"),
        qrels=pl.read_parquet(folder / "qrels.parquet"),
        drops=pl.read_parquet(folder / "drops.parquet"),
    )
