"""The descriptive statistics file an MTEB task ships, in the shape of MTEB's
`RetrievalDescriptiveStatistics` (one entry per eval split), computed without MTEB. A task
of several subsets has, per split, the figures over all its subsets (ids prefixed with
split and subset, as MTEB pools them) and each subset's under `hf_subset_descriptive_stats`."""

from __future__ import annotations

from typing import Any

import polars as pl

from builder.mteb_export.shape import Part, TaskShape
from builder.mteb_export.tables import RetrievalTables


def text_statistics(texts: list[str]) -> dict[str, Any]:
    lengths = [len(t) for t in texts]
    return {
        "total_text_length": sum(lengths),
        "min_text_length": min(lengths),
        "average_text_length": sum(lengths) / len(lengths),
        "max_text_length": max(lengths),
        "unique_texts": len(set(texts)),
    }


def relevant_docs_statistics(tables: RetrievalTables) -> dict[str, Any]:
    per_query = tables.qrels.group_by("query_id", maintain_order=True).agg(
        (pl.col("score") != 0).sum().alias("n"), pl.col("doc_id")
    )
    counts = per_query["n"].to_list()
    qrel_docs = set(tables.qrels["doc_id"].to_list())
    return {
        "num_relevant_docs": sum(counts),
        "min_relevant_docs_per_query": min(counts),
        "average_relevant_docs_per_query": sum(counts) / len(counts),
        "max_relevant_docs_per_query": max(counts),
        "unique_relevant_docs": len(qrel_docs),
        "num_missing_query_ids": len(set(per_query["query_id"].to_list()) - set(tables.queries["query_id"].to_list())),
        "num_missing_corpus_ids": len(qrel_docs - set(tables.corpus["doc_id"].to_list())),
        "queries_with_all_gold_black_or_white": 0,
    }


def top_ranked_statistics(ranked: dict[str, list[str]] | None, n_queries: int) -> dict[str, Any] | None:
    if not ranked or not n_queries:
        return None
    sizes = [len(docs) for docs in ranked.values()]
    return {
        "num_top_ranked": sum(sizes),
        "min_top_ranked_per_query": min(sizes),
        "average_top_ranked_per_query": sum(sizes) / n_queries,
        "max_top_ranked_per_query": max(sizes),
    }


def split_statistics(tables: RetrievalTables, ranked: dict[str, list[str]] | None = None) -> dict[str, Any]:
    docs = text_statistics(tables.corpus["text"].to_list())
    queries = text_statistics(tables.queries["text"].to_list())
    return {
        "num_samples": tables.corpus.height + tables.queries.height,
        "num_queries": tables.queries.height,
        "num_documents": tables.corpus.height,
        "number_of_characters": docs["total_text_length"] + queries["total_text_length"],
        "documents_text_statistics": docs,
        "documents_image_statistics": None,
        "documents_audio_statistics": None,
        "documents_video_statistics": None,
        "queries_text_statistics": queries,
        "queries_image_statistics": None,
        "queries_audio_statistics": None,
        "queries_video_statistics": None,
        "relevant_docs_statistics": relevant_docs_statistics(tables),
        "top_ranked_statistics": top_ranked_statistics(ranked, tables.queries.height),
    }


def _pooled(parts: list[Part]) -> tuple[RetrievalTables, dict[str, list[str]] | None]:
    """Every part's tables in one, each id prefixed `<split>_<subset>_`."""

    def tag(part: Part, column: str) -> pl.Expr:
        return (pl.lit(f"{part.split}_{part.subset}_") + pl.col(column)).alias(column)

    corpus = pl.concat([p.tables.corpus.with_columns(tag(p, "doc_id")) for p in parts])
    queries = pl.concat([p.tables.queries.with_columns(tag(p, "query_id")) for p in parts])
    qrels = pl.concat([p.tables.qrels.with_columns(tag(p, "query_id"), tag(p, "doc_id")) for p in parts])
    ranked = {
        f"{p.split}_{p.subset}_{q}": [f"{p.split}_{p.subset}_{d}" for d in docs]
        for p in parts
        for q, docs in (p.top_ranked or {}).items()
    }
    return RetrievalTables(corpus, queries, qrels), ranked or None


def descriptive_statistics(shape: TaskShape) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for split in shape.splits:
        parts = [p for p in shape.parts if p.split == split]
        if shape.single:
            out[split] = split_statistics(parts[0].tables, parts[0].top_ranked)
            continue
        out[split] = {
            **split_statistics(*_pooled(parts)),
            "hf_subset_descriptive_stats": {p.subset: split_statistics(p.tables, p.top_ranked) for p in parts},
        }
    return out
