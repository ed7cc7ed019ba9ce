"""A depth grid's cells as tables: names, the documents and queries of each cell, what
chance scores in one, and the figures stats.json reports about them."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from builder.bench import SPAN_DTYPE, Bench
from builder.stages.grid.evidence import Evidence
from builder.stages.grid.padding import Piece
from builder.stages.grid.placement import Placed

if TYPE_CHECKING:
    from builder.backends.tokenizers import TokenCounter


def cell_name(depth: float, length: int) -> str:
    """`depth50_len1024`: a setting, folder and config name."""
    return f"{depth_label(depth)}_len{length}"


def depth_label(depth: float) -> str:
    """`depth50`: the depth part of a cell's name (MTEB's subset of that depth)."""
    return f"depth{round(depth * 100, 3):g}"


def chance(documents: int) -> dict[str, float]:
    """nDCG@10 and Recall@100 of a random ranking of `documents`, one of them relevant:
    the relevant one is at each rank with chance 1/documents."""
    if documents < 1:
        return {"ndcg@10": 0.0, "recall@100": 0.0}
    gains = sum(1 / math.log2(rank + 1) for rank in range(1, min(10, documents) + 1))
    return {"ndcg@10": round(gains / documents, 4), "recall@100": round(min(100, documents) / documents, 4)}


@dataclass
class GridQuery:
    query_id: str
    text: str
    doc_id: str
    lang: str | None
    evidence: Evidence
    tokens: int
    span: dict[str, Any]


# A query's document in one cell: (query, length, depth, where its evidence went, its padding).
Row = tuple[GridQuery, int, float, Placed, list[Piece]]


def tables(
    rows: list[Row],
    distractors: dict[int, list[tuple[str, list[Piece]]]],
    depths: list[float],
    bench: Bench,
    tokenizer: TokenCounter,
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """The grid's corpus, queries and qrels: each query's document in every cell, and each
    cell's distractors (none where no query is left: a cell without one is no task)."""
    domains = dict(zip(bench.corpus["doc_id"].to_list(), bench.corpus["domain"].to_list()))
    docs, queries = [], []
    for q, length, depth, placed, _ in rows:
        cell = cell_name(depth, length)
        query_id = f"{q.query_id}@{cell}"
        doc_id = f"{query_id}-doc"
        start = placed.evidence_start
        docs.append(
            {
                "doc_id": doc_id,
                "title": "",
                "text": placed.text,
                "lang": q.lang,
                "domain": cell,
                "setting": cell,
                "grid_depth": depth,
                "grid_length": length,
                "grid_depth_actual": placed.depth,
                "source_doc_id": q.doc_id,
                "source_domain": domains.get(q.doc_id),
            }
        )
        queries.append(
            {
                "query_id": query_id,
                "text": q.text,
                "doc_id": doc_id,
                "lang": q.lang,
                "setting": cell,
                "grid_depth": depth,
                "grid_length": length,
                "source_query_id": q.query_id,
                "evidence_start": start,
                "evidence_end": start + len(q.evidence.text),
                "spans": [
                    {
                        "start": start + q.evidence.span_start,
                        "end": start + q.evidence.span_end,
                        "method": q.span.get("method"),
                        "score": q.span.get("score"),
                    }
                ],
            }
        )
    lang = next((q.lang for q, *_ in rows), None)
    if rows:
        for length, made in distractors.items():
            for depth in depths:
                cell = cell_name(depth, length)
                docs += [
                    {
                        "doc_id": f"distractor{k}@{cell}",
                        "title": "",
                        "text": text,
                        "lang": lang,
                        "domain": cell,
                        "setting": cell,
                        "grid_depth": depth,
                        "grid_length": length,
                        "grid_depth_actual": None,
                        "source_doc_id": None,
                        "source_domain": None,
                    }
                    for k, (text, _) in enumerate(made)
                ]
    corpus = pl.DataFrame(
        docs,
        schema={
            "doc_id": pl.Utf8,
            "title": pl.Utf8,
            "text": pl.Utf8,
            "lang": pl.Utf8,
            "domain": pl.Utf8,
            "setting": pl.Utf8,
            "grid_depth": pl.Float64,
            "grid_length": pl.Int64,
            "grid_depth_actual": pl.Float64,
            "source_doc_id": pl.Utf8,
            "source_domain": pl.Utf8,
        },
    )
    corpus = corpus.with_columns(pl.Series("n_tokens", tokenizer.count_many(corpus["text"].to_list()), dtype=pl.Int64))
    grid_queries = pl.DataFrame(
        queries,
        schema={
            "query_id": pl.Utf8,
            "text": pl.Utf8,
            "doc_id": pl.Utf8,
            "lang": pl.Utf8,
            "setting": pl.Utf8,
            "grid_depth": pl.Float64,
            "grid_length": pl.Int64,
            "source_query_id": pl.Utf8,
            "evidence_start": pl.Int64,
            "evidence_end": pl.Int64,
            "spans": SPAN_DTYPE,
        },
    )
    qrels = grid_queries.select("query_id", "doc_id", pl.lit(1, dtype=pl.Int64).alias("score"))
    return corpus, grid_queries, qrels


def span_text(q: GridQuery) -> str:
    return q.evidence.text[q.evidence.span_start : q.evidence.span_end]


def shares(pieces: list[Piece], domains: dict[str, str | None]) -> dict[str, float]:
    """The share of the grid's padding tokens from each domain of the padding corpus."""
    by_domain: Counter[str] = Counter()
    for piece in pieces:
        by_domain[str(domains.get(piece.doc_id))] += piece.tokens
    total = sum(by_domain.values())
    return {d: round(n / total, 4) for d, n in sorted(by_domain.items())} if total else {}


def errors(corpus: pl.DataFrame) -> dict[str, Any]:
    """How far the documents are from the lengths and depths asked for."""
    if corpus.is_empty():
        return {"largest_length_gap_tokens": None, "largest_depth_gap": None}
    length_gap = (corpus["n_tokens"] - corpus["grid_length"]).abs().max()
    depth_gap = (corpus["grid_depth_actual"] - corpus["grid_depth"]).abs().max()
    return {"largest_length_gap_tokens": int(length_gap), "largest_depth_gap": round(float(depth_gap), 4)}
