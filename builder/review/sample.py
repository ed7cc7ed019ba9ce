"""The items people review: a sample stratified by position group and language, each
group sized so that its label precision is known to a target interval width."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import polars as pl

from builder.io.built_folder import BuiltFolder
from builder.util.atomic import write_text_atomic

Z95 = 1.959964


def group_size(population: int, width: float) -> int:
    """Items for a 95 % interval of `width` around a proportion, in the worst case (p = 0.5),
    with the finite-population correction: a small group is reviewed whole."""
    n0 = Z95**2 * 0.25 / (width / 2) ** 2
    return min(population, math.ceil(n0 / (1 + (n0 - 1) / population)))


def draw_sample(folder: Path, width: float, seed: int) -> list[dict[str, Any]]:
    built = BuiltFolder.open(folder)
    queries, corpus = built.read("queries"), built.read("corpus")
    source = [pl.col("source_path")] if "evidence_location" in queries.columns else []
    corpus = corpus.select("doc_id", pl.col("text").alias("document"), *source)
    tag = pl.col("position_tag").fill_null("unplaced") if "position_tag" in queries.columns else pl.lit("unplaced")
    lang = pl.col("lang").fill_null("und") if "lang" in queries.columns else pl.lit("und")
    spans = pl.col("spans") if "spans" in queries.columns else pl.lit(None)
    # The LLM judge's 0-4 grade (llm_relevance), for the report's reviewer-LLM agreement.
    grade = pl.col("llm_grade") if "llm_grade" in queries.columns else pl.lit(None, dtype=pl.Int64)
    rows = queries.select(
        "query_id",
        "text",
        "doc_id",
        tag.alias("group"),
        lang.alias("lang"),
        spans.alias("spans"),
        grade.alias("llm_grade"),
        *_located(queries),
    ).join(corpus, on="doc_id", how="inner")
    items: list[dict[str, Any]] = []
    for (group, language), members in sorted(rows.group_by("group", "lang"), key=lambda g: g[0]):
        n = group_size(members.height, width)
        for row in members.sample(n=n, seed=seed, shuffle=True).iter_rows(named=True):
            row["spans"] = [[s["start"], s["end"]] for s in row["spans"] or []]
            if "evidence_location" in row:
                path, where = row.pop("source_path"), row.pop("evidence_location")
                row["where"] = f"{path}, {where}" if path and where else None
            row["group"] = group if rows["lang"].n_unique() == 1 else f"{group}/{language}"
            items.append(row)
    return items


def _located(queries: pl.DataFrame) -> list[pl.Expr]:
    """The evidence's page (heading, paragraph), for builds whose documents came from files."""
    return [pl.col("evidence_location")] if "evidence_location" in queries.columns else []


def load_or_draw(folder: Path, width: float, seed: int) -> list[dict[str, Any]]:
    """The sample drawn on the first review, so every reviewer and every session sees the same items."""
    path = folder / "review" / "sample.jsonl"
    if path.is_file():
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    items = draw_sample(folder, width, seed)
    write_text_atomic(path, "".join(json.dumps(item, ensure_ascii=False) + "\n" for item in items))
    return items
