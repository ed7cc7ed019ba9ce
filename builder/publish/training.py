"""A split build's train and dev data (the `split_documents` and `training_pairs` stages).

The test split is the benchmark: it is written where a build without splits writes
everything, and every other writer sees only it. Each other split gets a BEIR folder of its
own, `train/` and `dev/` (`corpus.jsonl`, `queries.jsonl`, `qrels/<split>.tsv`, with
parquet copies), which BEIR's loader reads with `split="train"` or `"dev"`. Each train set
is written as `train/pairs/<set>.parquet` in sentence-transformers' column layout
(`anchor`, `positive`, `negative_1` ... `negative_k`, nothing else, since every other
column would be read as a model input), and `train/pair_ids/<set>.parquet` names the query,
the documents and the position third behind each row. Every table gets a config whose
split is its own (`train-corpus`, `pairs-<set>`, ...).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from builder.bench import Bench
from builder.io.built_folder import BEIR_FILES, SPLIT_DIRS, TABLE_FILES, beir_qrels_file
from builder.publish.beir import write_parquet
from builder.publish.paths import safe_component

SPLIT_FOLDERS = SPLIT_DIRS
_TRAINING_COLUMNS = ("positive_passage", "negatives", "train_sets")


def split_off(bench: Bench) -> tuple[Bench, dict[str, Bench]]:
    """(the test split, {split: its bench} for the others); a bench without splits is all test."""
    if "split" not in bench.corpus.columns:
        return bench, {}
    parts = {}
    for split in ("test", *SPLIT_FOLDERS):
        corpus = bench.corpus.filter(pl.col("split") == split).drop("split")
        queries = bench.queries.filter(pl.col("split") == split).drop("split")
        if split == "test":
            queries = queries.drop([c for c in _TRAINING_COLUMNS if c in queries.columns])
        qrels = bench.qrels.filter(pl.col("query_id").is_in(queries["query_id"].implode()))
        if corpus.height:
            parts[split] = Bench.of(corpus, queries, qrels, bench.drops if split == "test" else None)
    test = parts.pop("test", None)
    if test is None:
        raise ValueError("the split build has no test split")
    return test, parts


def write_splits(parts: dict[str, Bench], folder: Path) -> None:
    """BEIR folders for the train and dev splits, and the train sets' pairs."""
    for split, bench in parts.items():
        sub = Path(folder) / split
        (sub / beir_qrels_file(split)).parent.mkdir(parents=True, exist_ok=True)
        queries = bench.queries.drop([c for c in ("positive_passage", "negatives") if c in bench.queries.columns])
        bench.corpus.select(pl.col("doc_id").alias("_id"), "title", "text").write_ndjson(sub / BEIR_FILES["corpus"])
        queries.rename({"query_id": "_id"}).write_ndjson(sub / BEIR_FILES["queries"])
        qrels = bench.qrels.select(pl.col("query_id").alias("query-id"), pl.col("doc_id").alias("corpus-id"), "score")
        qrels.write_csv(sub / beir_qrels_file(split), separator="\t")
        write_parquet(bench.corpus, sub / TABLE_FILES["corpus"])
        write_parquet(queries, sub / TABLE_FILES["queries"])
        write_parquet(bench.qrels, sub / TABLE_FILES["qrels"])
        if "train_sets" in bench.queries.columns:
            _write_pairs(bench, sub)


def _write_pairs(bench: Bench, sub: Path) -> None:
    rows = bench.queries.filter(pl.col("train_sets").is_not_null())
    names = sorted({n for sets in rows["train_sets"] for n in sets})
    for name in names:
        chosen = rows.filter(pl.col("train_sets").list.contains(name))
        k = max((len(n) for n in chosen["negatives"]), default=0)
        negatives = [
            pl.col("negatives").list.get(i).struct.field("passage").alias(f"negative_{i + 1}") for i in range(k)
        ]
        (sub / "pairs").mkdir(exist_ok=True)
        (sub / "pair_ids").mkdir(exist_ok=True)
        file = f"{safe_component(name)}.parquet"
        write_parquet(
            chosen.select(pl.col("text").alias("anchor"), pl.col("positive_passage").alias("positive"), *negatives),
            sub / "pairs" / file,
        )
        write_parquet(
            chosen.select(
                pl.col("query_id").alias("query-id"),
                pl.col("doc_id").alias("corpus-id"),
                pl.col("negatives").list.eval(pl.element().struct.field("doc_id")).alias("negative-corpus-ids"),
                *[c for c in ("position_tag", "length_bucket") if c in chosen.columns],
            ),
            sub / "pair_ids" / file,
        )


def training_configs(folder: Path) -> list[dict[str, Any]]:
    """`<split>-corpus|queries|qrels` per split folder and `pairs-<set>` / `pair_ids-<set>` per
    train set, each with its own split name."""
    configs = []
    for split in SPLIT_FOLDERS:
        sub = Path(folder) / split
        for table in ("corpus", "queries", "qrels"):
            if _nonempty(sub / TABLE_FILES[table]):
                configs.append(_config(f"{split}-{table}", split, f"{split}/{TABLE_FILES[table]}"))
        for kind in ("pairs", "pair_ids"):
            for path in sorted((sub / kind).glob("*.parquet")) if (sub / kind).is_dir() else []:
                configs.append(_config(f"{kind}-{path.stem}", split, path.relative_to(folder).as_posix()))
    return configs


def _nonempty(path: Path) -> bool:
    import pyarrow.parquet as pq

    return path.is_file() and pq.read_metadata(path).num_rows > 0


def _config(name: str, split: str, path: str) -> dict[str, Any]:
    return {"config_name": name, "data_files": [{"split": split, "path": path}]}
