"""The Hugging Face layout of a built folder: MTEB-style parquet configs.

Files are `<table>/<lang>/<domain>.parquet`. The three tables MTEB's retrieval loader
reads hold exactly its columns and nothing else (an extra column with nulls, or lists
of different lengths, breaks its batching): `corpus` (`_id, title, text`), `queries`
(`_id, text`) and `qrels` (`query-id, corpus-id, score`). Everything else a row carries
moves beside them, so nothing is lost: `positions` (`query-id` and every other query
field: spans, rel_pos, bins, tags, pos_*, ...) and `documents` (`corpus-id` and every
other document field: lang, domain, n_tokens, ...). A query and its qrels sit in their
own language and the domain of their positive document. Configs never copy data; each
lists the files it covers:

- one per table (and `default`, the qrels, as MTEB names it): everything;
- `<lang>-<table>` for each language, when there is more than one;
- `<domain>-<table>` for each domain, when there is more than one
  (prefixed `domain_` where a domain is named like a language or a base config).

Every config has one split, `test`. Tables with no rows get no config: the `datasets`
library cannot load an empty split.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from builder.bench import Bench
from builder.io.built_folder import HUB_TABLES, hub_partition
from builder.publish.beir import write_parquet

TABLES = HUB_TABLES
SPLIT = "test"
UNSAFE_IN_NAME = re.compile(r"[^A-Za-z0-9_.-]+")  # characters a config name may not hold


@dataclass
class HubLayout:
    configs: list[dict[str, Any]] = field(default_factory=list)
    dataset_info: list[dict[str, Any]] = field(default_factory=list)
    files: list[str] = field(default_factory=list)


def _safe(column: str, fallback: str) -> pl.Expr:
    """A partition name from a column: file-name safe, `fallback` where empty."""
    cleaned = pl.col(column).cast(pl.Utf8).str.replace_all(UNSAFE_IN_NAME.pattern, "_").str.strip_chars("._")
    return pl.when(cleaned.is_null() | (cleaned == "")).then(pl.lit(fallback)).otherwise(cleaned)


def _hub_tables(bench: Bench) -> dict[str, pl.DataFrame]:
    """Every table in MTEB column names, each with `_lang`/`_domain` partition keys."""
    keys = bench.corpus.select(
        "doc_id",
        _safe("lang", "und").alias("_lang"),
        _safe("domain", "general").alias("_domain"),
    )
    corpus = bench.corpus.join(keys, on="doc_id", how="left", maintain_order="left")
    queries = bench.queries.join(
        keys.select("doc_id", "_domain"), on="doc_id", how="left", maintain_order="left"
    ).with_columns(
        _safe("lang", "und").alias("_lang"),
        pl.col("_domain").fill_null("general"),
    )
    qrels = bench.qrels.join(
        queries.select("query_id", "_lang", "_domain"), on="query_id", how="left", maintain_order="left"
    ).with_columns(pl.col("_lang").fill_null("und"), pl.col("_domain").fill_null("general"))
    keys_only = ("_lang", "_domain")
    query_extra = [c for c in queries.columns if c not in ("query_id", "text", *keys_only)]
    doc_extra = [c for c in corpus.columns if c not in ("doc_id", "title", "text", *keys_only)]
    return {
        "corpus": corpus.select(pl.col("doc_id").alias("_id"), "title", "text", *keys_only),
        "queries": queries.select(pl.col("query_id").alias("_id"), "text", *keys_only),
        "qrels": qrels.select(
            pl.col("query_id").alias("query-id"), pl.col("doc_id").alias("corpus-id"), "score", *keys_only
        ),
        "positions": queries.select(pl.col("query_id").alias("query-id"), *query_extra, *keys_only)
        if query_extra
        else queries.clear().select(keys_only),
        "documents": corpus.select(pl.col("doc_id").alias("corpus-id"), *doc_extra, *keys_only)
        if doc_extra
        else corpus.clear().select(keys_only),
    }


def _clear(folder: Path) -> None:
    """Remove partitions of an earlier publish; `qrels/test.tsv` belongs to the BEIR files."""
    for table in TABLES:
        root = folder / table
        if not root.is_dir():
            continue
        for child in root.iterdir():
            if child.is_dir():
                shutil.rmtree(child)


def write_hub_layout(bench: Bench, folder: Path) -> HubLayout:
    """Write the parquet partitions into `folder` and describe the configs over them."""
    folder = Path(folder)
    _clear(folder)
    parts: list[tuple[str, str, str, str, int, int]] = []  # table, lang, domain, path, rows, bytes
    for table, frame in _hub_tables(bench).items():
        for (lang, domain), part in frame.partition_by(["_lang", "_domain"], as_dict=True).items():
            rel = hub_partition(table, lang, domain)
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            data = part.drop("_lang", "_domain")
            write_parquet(data, folder / rel)
            parts.append((table, lang, domain, rel, data.height, int(data.estimated_size())))
    parts.sort(key=lambda p: p[3])
    return _describe(folder, parts)


def _subsets(parts: list[tuple[str, str, str, str, int, int]]) -> list[tuple[str, int, str]]:
    """(config prefix, tuple index to match, value) for every language and domain subset."""
    langs = sorted({p[1] for p in parts})
    domains = sorted({p[2] for p in parts})
    out: list[tuple[str, int, str]] = []
    if len(langs) > 1:
        out += [(f"{lang}-", 1, lang) for lang in langs]
    if len(domains) > 1:
        taken = set(langs) | set(TABLES) | {"default"}
        out += [((f"domain_{d}" if d in taken else d) + "-", 2, d) for d in domains]
    return out


def _describe(folder: Path, parts: list[tuple[str, str, str, str, int, int]]) -> HubLayout:
    layout = HubLayout(files=[p[3] for p in parts])
    groups: list[tuple[str, str, list[tuple[str, str, str, str, int, int]]]] = []
    for table in TABLES:
        rows = [p for p in parts if p[0] == table]
        groups.append((table, table, rows))
        if table == "qrels":
            groups.insert(0, ("default", table, rows))
        for prefix, index, value in _subsets(parts):
            groups.append((f"{prefix}{table}", table, [p for p in rows if p[index] == value]))
    for name, _table, rows in groups:
        if sum(p[4] for p in rows) == 0:
            continue
        paths = [p[3] for p in rows]
        layout.configs.append(
            {
                "config_name": name,
                "data_files": [{"split": SPLIT, "path": paths[0] if len(paths) == 1 else paths}],
            }
        )
        layout.dataset_info.append(_info(folder, name, rows))
    return layout


def _info(folder: Path, name: str, rows: list[tuple[str, str, str, str, int, int]]) -> dict[str, Any]:
    import datasets
    import pyarrow.parquet as pq

    features = datasets.Features.from_arrow_schema(pq.read_schema(folder / rows[0][3]))
    n_rows = sum(p[4] for p in rows)
    n_bytes = sum(p[5] for p in rows)
    return {
        "config_name": name,
        "features": features._to_yaml_list(),
        "splits": [{"name": SPLIT, "num_bytes": n_bytes, "num_examples": n_rows}],
        "dataset_size": n_bytes,
    }
