"""Write a Bench as a BEIR folder (jsonl + qrels tsv) with parquet copies and stats."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import polars as pl

from builder.bench import Bench
from builder.io.built_folder import BEIR_FILES, SETTINGS_DIR, STATS_FILE, TABLE_FILES
from builder.publish.paths import safe_component
from builder.util.atomic import replace_dir, temp_dir_beside


def write_beir(bench: Bench, out_dir: Path, stats: dict[str, Any] | None = None) -> Path:
    """The folder appears whole or not at all: it is built beside the target, then renamed."""
    out_dir = Path(out_dir)
    tmp = temp_dir_beside(out_dir)
    try:
        _write_tables(bench, tmp)
        _write_settings(bench, tmp)
        summary = {"counts": bench.counts(), **(stats or {})}
        (tmp / STATS_FILE).write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
        replace_dir(tmp, out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


def _write_beir_files(bench: Bench, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    bench.corpus.select(pl.col("doc_id").alias("_id"), "title", "text").write_ndjson(folder / BEIR_FILES["corpus"])
    bench.queries.rename({"query_id": "_id"}).write_ndjson(folder / BEIR_FILES["queries"])
    (folder / BEIR_FILES["qrels"]).parent.mkdir(exist_ok=True)
    bench.qrels.select(pl.col("query_id").alias("query-id"), pl.col("doc_id").alias("corpus-id"), "score").write_csv(
        folder / BEIR_FILES["qrels"], separator="\t"
    )


def _write_settings(bench: Bench, folder: Path) -> None:
    """Controlled-probe builds (a `setting` column) also get one BEIR folder per setting
    under settings/ (with parquet copies, which the Hub configs point at), and their
    document pairs as pairs.parquet."""
    if "setting" not in bench.queries.columns:
        return
    for setting in sorted(bench.queries["setting"].drop_nulls().unique().to_list()):
        queries = bench.queries.filter(pl.col("setting") == setting)
        qrels = bench.qrels.filter(pl.col("query_id").is_in(queries["query_id"].implode()))
        # Judged documents too: settings share documents, each written once under one setting.
        in_setting = pl.col("doc_id").is_in(qrels["doc_id"].implode())
        if "setting" in bench.corpus.columns:
            in_setting = in_setting | (pl.col("setting") == setting)
        corpus = bench.corpus.filter(in_setting)
        _write_tables(Bench.of(corpus, queries, qrels), folder / SETTINGS_DIR / safe_component(setting))
    if "pairs" in bench.queries.columns:
        pairs = bench.queries.select("query_id", "setting", "pairs").explode("pairs").drop_nulls("pairs")
        write_parquet(pairs.unnest("pairs"), folder / TABLE_FILES["pairs"])


def _write_tables(bench: Bench, folder: Path) -> None:
    _write_beir_files(bench, folder)
    for table in ("corpus", "queries", "qrels", "drops"):
        write_parquet(getattr(bench, table), folder / TABLE_FILES[table])


def write_parquet(data: pl.DataFrame, path: Path) -> None:
    """Parquet with plain string and list types where polars would write 64-bit-offset
    ones (`large_string`, `large_list`): `datasets` 2.x can neither read `large_list` in a
    card nor cast such a column to a list feature."""
    import pyarrow.parquet as pq

    table = data.to_arrow()
    pq.write_table(table.cast(_plain_types(table.schema)), path)


def _plain_types(schema: Any) -> Any:
    """The schema with every 64-bit-offset string and list type in its plain form."""
    import pyarrow as pa

    def plain(t: Any) -> Any:
        if pa.types.is_large_string(t) or getattr(pa.types, "is_string_view", lambda _: False)(t):
            return pa.string()
        if pa.types.is_large_list(t) or pa.types.is_list(t):
            return pa.list_(plain(t.value_type))
        if pa.types.is_struct(t):
            return pa.struct([pa.field(f.name, plain(f.type), f.nullable) for f in t])
        return t

    return pa.schema([pa.field(f.name, plain(f.type), f.nullable) for f in schema])
