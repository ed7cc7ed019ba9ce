"""The checks MTEB's own dataset tests run on a retrieval task, run before anything is
exported, so a pull request does not fail there. Each failure is one line naming its rows."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import polars as pl

from builder.mteb_export.shape import Part, TaskShape, languages
from builder.mteb_export.tables import RetrievalTables
from builder.textutil.languages import CODE_SHAPE

MIN_TEXT_CHARS = 4  # MTEB rejects texts of 3 characters or fewer
MAX_DUPLICATE_SHARE = 0.01
SHOWN = 5


def name_rows(ids: Iterable[str]) -> str:
    ids = list(ids)
    shown = ", ".join(ids[:SHOWN])
    return shown + (f" and {len(ids) - SHOWN} more" if len(ids) > SHOWN else "")


def table_failures(tables: RetrievalTables) -> list[str]:
    failures: list[str] = []
    for name, frame, key in (
        ("corpus", tables.corpus, "doc_id"),
        ("queries", tables.queries, "query_id"),
        ("qrels", tables.qrels, "query_id"),
    ):
        if frame.height == 0:
            failures.append(f"{name}: the test split is empty")
            continue
        if name == "qrels":
            continue
        short = frame.filter(pl.col("text").str.len_chars() < MIN_TEXT_CHARS)[key].to_list()
        if short:
            failures.append(f"{name}: {len(short)} texts of 3 characters or fewer: {name_rows(short)}")
        repeated = frame.filter(pl.col("text").is_duplicated())
        extra = frame.height - frame["text"].n_unique()
        if extra / frame.height >= MAX_DUPLICATE_SHARE:
            failures.append(
                f"{name}: {extra} duplicate texts ({extra / frame.height:.1%}, MTEB allows under 1 %): "
                f"{name_rows(repeated.sort('text')[key].to_list())}"
            )
    corpus_ids = set(tables.corpus["doc_id"].to_list())
    query_ids = set(tables.queries["query_id"].to_list())
    orphans = tables.qrels.filter(~pl.col("doc_id").is_in(list(corpus_ids)))
    if orphans.height:
        failures.append(
            f"qrels: {orphans.height} qrels name documents not in the corpus: "
            f"{name_rows(f'{q}->{d}' for q, d in orphans.select('query_id', 'doc_id').iter_rows())}"
        )
    unknown = tables.qrels.filter(~pl.col("query_id").is_in(list(query_ids)))["query_id"].unique(maintain_order=True)
    if unknown.len():
        failures.append(f"qrels: {unknown.len()} qrel query ids not in the queries: {name_rows(unknown.to_list())}")
    answered = set(tables.qrels.filter(pl.col("score") > 0)["query_id"].to_list())
    lonely = [q for q in tables.queries["query_id"].to_list() if q not in answered]
    if lonely:
        failures.append(f"queries: {len(lonely)} queries without a relevant document: {name_rows(lonely)}")
    return failures


def top_ranked_failures(part: Part) -> list[str]:
    """A reranking part: every query has candidates, every candidate is in the corpus."""
    ranked = part.top_ranked or {}
    corpus_ids = set(part.tables.corpus["doc_id"].to_list())
    outside = [f"{q}->{d}" for q, docs in ranked.items() for d in docs if d not in corpus_ids]
    failures = [f"top_ranked: {len(outside)} candidates not in the corpus: {name_rows(outside)}"] if outside else []
    bare = [q for q in part.tables.queries["query_id"].to_list() if not ranked.get(q)]
    if bare:
        failures.append(f"top_ranked: {len(bare)} queries without candidates: {name_rows(bare)}")
    return failures


def shape_failures(shape: TaskShape) -> list[str]:
    """The table checks per (subset, split), each line naming its part where there are several."""
    failures = []
    for part in shape.parts:
        found = table_failures(part.tables) + (top_ranked_failures(part) if shape.type == "Reranking" else [])
        failures += found if shape.single else [f"{part.subset}/{part.split}: {line}" for line in found]
    return failures


def config_failures(shape: TaskShape, configs: frozenset[str], position_groups: bool) -> list[str]:
    """The Hub configs the task module loads, which the folder's card must list."""
    wanted = []
    for part in shape.parts:
        wanted += (
            ["corpus", "queries", "default"]
            if part.config is None
            else [f"{part.config}-{table}" for table in ("corpus", "queries", "qrels")]
        )
    wanted += [*shape.configs] + ["positions"] * position_groups
    missing = [name for name in dict.fromkeys(wanted) if name not in configs]
    if not missing:
        return []
    return [
        f"card: no Hub config {name_rows(missing)} in README.md, which the task loads "
        "(build-bench stats OUT writes the configs again)"
    ]


def metadata_failures(fields: Mapping[str, Any]) -> list[str]:
    failures: list[str] = []
    empty = [name for name, value in fields.items() if value is None and name != "adapted_from"]
    if empty:
        failures.append(f"metadata: fields not filled: {', '.join(empty)}")
    bad = [code for code in languages(fields.get("eval_langs") or []) if not CODE_SHAPE.match(code)]
    if bad:
        failures.append(f"metadata: language codes not ISO 639-3 + script (like eng-Latn): {', '.join(bad)}")
    return failures
