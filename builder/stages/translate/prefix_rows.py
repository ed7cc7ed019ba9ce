"""Applying stripped lead-ins to the Bench: new texts, token counts, piece starts, and the
spans of the affected queries moved so they still cover the same words."""

from __future__ import annotations

import polars as pl

from builder.backends.tokenizers import TokenCounter
from builder.bench import SPAN_DTYPE, Bench
from builder.stages.position_columns import PositionOptions
from builder.stages.translate.cleanup import Cut, shift
from builder.stages.translate.rows import annotate_translated


def apply_prefix_cuts(
    bench: Bench,
    docs: dict[str, tuple[str, list[Cut]]],
    queries: dict[str, str],
    tokenizer: TokenCounter,
    options: PositionOptions,
    stage: str,
) -> Bench:
    """`docs`: doc id -> (text without lead-ins, the cuts made); `queries`: query id -> new text.

    A query whose span began or ended inside a removed lead-in is dropped (`span_in_prefix`).
    """
    if not docs and not queries:
        return bench
    corpus = _corpus(bench.corpus, docs, tokenizer)
    q = bench.queries
    if queries:
        q = q.with_columns(
            pl.Series("text", [queries.get(i, t) for i, t in q.select("query_id", "text").iter_rows()], dtype=pl.Utf8)
        )
    moved, broken = _moved_spans(q, docs)
    q = q.with_columns(pl.Series("spans", moved, dtype=SPAN_DTYPE))
    touched = pl.col("doc_id").is_in(list(docs)) & (pl.col("source_query_id") != pl.col("query_id"))
    refreshed = annotate_translated(q.filter(touched), corpus, tokenizer, options)
    q = pl.concat([q.filter(~touched), refreshed], how="diagonal_relaxed")
    return bench.replace(corpus=corpus, queries=q).drop_queries(dict.fromkeys(broken, "span_in_prefix"), stage)


def _corpus(corpus: pl.DataFrame, docs: dict[str, tuple[str, list[Cut]]], tokenizer: TokenCounter) -> pl.DataFrame:
    if not docs:
        return corpus
    ids = corpus["doc_id"].to_list()
    texts = [docs[d][0] if d in docs else t for d, t in zip(ids, corpus["text"].to_list())]
    changed = [i for i, d in enumerate(ids) if d in docs]
    counts = dict(zip(changed, tokenizer.count_many([texts[i] for i in changed])))
    tokens = [counts.get(i, n) for i, n in enumerate(corpus["n_tokens"].to_list())]
    cols = [pl.Series("text", texts, dtype=pl.Utf8), pl.Series("n_tokens", tokens, dtype=pl.Int64)]
    if "piece_starts" in corpus.columns:
        starts = [
            [shift(s, docs[d][1]) for s in old] if d in docs and old is not None else old
            for d, old in zip(ids, corpus["piece_starts"].to_list())
        ]
        cols.append(pl.Series("piece_starts", starts, dtype=pl.List(pl.Int64)))
    return corpus.with_columns(cols)


def _moved_spans(queries: pl.DataFrame, docs: dict[str, tuple[str, list[Cut]]]) -> tuple[list, list[str]]:
    moved, broken = [], []
    for qid, doc_id, spans in queries.select("query_id", "doc_id", "spans").iter_rows():
        if doc_id not in docs or not spans:
            moved.append(spans)
            continue
        cuts = docs[doc_id][1]
        new = [{**s, "start": shift(s["start"], cuts), "end": shift(s["end"], cuts)} for s in spans]
        if any(s["start"] is None or s["end"] is None or s["end"] <= s["start"] for s in new):
            broken.append(qid)
            moved.append(spans)
        else:
            moved.append(new)
    return moved, broken
