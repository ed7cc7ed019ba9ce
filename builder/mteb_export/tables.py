"""A built folder's three retrieval tables as MTEB reads them: a document is its title and
text joined and stripped, a query its text."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from builder.io.built_folder import BuiltFolder


@dataclass(frozen=True)
class RetrievalTables:
    corpus: pl.DataFrame  # doc_id, text (title and text joined, as MTEB's loader joins them)
    queries: pl.DataFrame  # query_id, text
    qrels: pl.DataFrame  # query_id, doc_id, score


def read_tables(folder: Path) -> RetrievalTables:
    built = BuiltFolder.open(folder)
    corpus = built.read("corpus")
    title = pl.col("title").fill_null("") if "title" in corpus.columns else pl.lit("")
    corpus = corpus.select(
        "doc_id", pl.concat_str([title, pl.lit(" "), pl.col("text").fill_null("")]).str.strip_chars().alias("text")
    )
    queries = built.read("queries").select("query_id", pl.col("text").fill_null(""))
    qrels = built.read("qrels").select("query_id", "doc_id", "score")
    return RetrievalTables(corpus, queries, qrels)
