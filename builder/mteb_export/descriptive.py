"""The descriptive statistics file an MTEB task ships, in the shape of MTEB's
`RetrievalDescriptiveStatistics` (one entry per eval split), computed without MTEB."""

from __future__ import annotations

from typing import Any

import polars as pl

from builder.mteb_export.tables import RetrievalTables


def text_statistics(texts: list[str]) -> dict[str, Any]:
    lengths = [len(t) for t in texts]
    return {"total_text_length": sum(lengths), "min_text_length": min(lengths),
            "average_text_length": sum(lengths) / len(lengths), "max_text_length": max(lengths),
            "unique_texts": len(set(texts))}


def relevant_docs_statistics(tables: RetrievalTables) -> dict[str, Any]:
    per_query = (tables.qrels.group_by("query_id", maintain_order=True)
                 .agg((pl.col("score") != 0).sum().alias("n"), pl.col("doc_id")))
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


def split_statistics(tables: RetrievalTables) -> dict[str, Any]:
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
        "top_ranked_statistics": None,
    }


def descriptive_statistics(tables: RetrievalTables, split: str = "test") -> dict[str, Any]:
    return {split: split_statistics(tables)}
