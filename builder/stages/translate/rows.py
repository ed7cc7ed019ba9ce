"""Translated rows: one corpus/query row per (source row, language) under `id@lang`, and
their position fields measured in the translated text."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import polars as pl

from builder.backends.tokenizers import TokenCounter
from builder.bench import SPAN_DTYPE
from builder.stages.position_columns import PositionOptions, annotate_positions
from builder.stages.translate.documents import DocResult
from builder.textutil.positions import REGION_OF_NAME, length_bucket, position_bin, third_of

Basis = Literal["source", "target"]
_SOURCE_OFFSETS = ("chunk_start", "chunk_end")


def tagged(ids: pl.Expr, lang: pl.Expr) -> pl.Expr:
    return ids + pl.lit("@") + lang


def by_language(source: pl.DataFrame, langs: Sequence[str]) -> pl.DataFrame:
    """Every source row once per language (language-major order), in column `_lang`."""
    return pl.DataFrame({"_lang": list(langs)}).join(source, how="cross")


def corpus_rows(
    source: pl.DataFrame,
    langs: Sequence[str],
    results: Mapping[tuple[str, str], DocResult],
    titles: Mapping[tuple[str, str], str | None],
    tokenizer: TokenCounter,
) -> pl.DataFrame:
    base = by_language(source, langs)
    keys = list(zip(base["doc_id"].to_list(), base["_lang"].to_list()))
    texts = [results[k].text for k in keys]
    counts = iter(tokenizer.count_many([t for t in texts if t is not None]))
    return base.with_columns(
        tagged(pl.col("doc_id"), pl.col("_lang")).alias("doc_id"),
        pl.col("doc_id").alias("source_doc_id"),
        pl.col("_lang").alias("lang"),
        pl.Series("text", texts, dtype=pl.Utf8),
        pl.Series("title", [titles.get(k) for k in keys], dtype=pl.Utf8),
        pl.Series("n_tokens", [next(counts) if t is not None else None for t in texts], dtype=pl.Int64),
        pl.Series("piece_starts", [results[k].piece_starts or None for k in keys], dtype=pl.List(pl.Int64)),
    ).select(*source.columns, *[c for c in ("source_doc_id", "piece_starts") if c not in source.columns])


def query_rows(
    source: pl.DataFrame,
    langs: Sequence[str],
    results: Mapping[tuple[str, str], DocResult],
    texts: Mapping[tuple[str, str], str | None],
    numbers: Mapping[str, list[int]],
    on_loss: Literal["inherit", "drop"],
    basis: Basis,
) -> tuple[pl.DataFrame, dict[str, str]]:
    """Translated queries with spans from the markers, and why some of them must go."""
    base = by_language(source, langs)
    spans, inherited, reasons = [], [], {}
    for qid, doc_id, lang, old in base.select("query_id", "doc_id", "_lang", "spans").iter_rows():
        result, wanted = results[(doc_id, lang)], numbers.get(qid, [])
        ok = result.text is not None and all(n in result.spans for n in wanted)
        spans.append(
            [
                {"start": result.spans[n][0], "end": result.spans[n][1], "method": "marker", "score": s["score"]}
                for n, s in zip(wanted, old or [])
            ]
            if wanted and ok
            else None
        )
        inherited.append(bool(wanted) and not ok and result.text is not None)
        new_id = f"{qid}@{lang}"
        if result.text is not None and texts.get((qid, lang)) is None:
            reasons[new_id] = "query_translation_failed"
        elif inherited[-1] and on_loss == "drop":
            reasons[new_id] = "span_marker_lost"
    keys = zip(base["query_id"].to_list(), base["_lang"].to_list())
    out = base.with_columns(
        tagged(pl.col("query_id"), pl.col("_lang")).alias("query_id"),
        pl.col("query_id").alias("source_query_id"),
        tagged(pl.col("doc_id"), pl.col("_lang")).alias("doc_id"),
        pl.col("_lang").alias("lang"),
        pl.Series("text", [texts.get(k) for k in keys], dtype=pl.Utf8),
        pl.Series("spans", spans, dtype=SPAN_DTYPE),
        pl.Series("span_inherited", inherited, dtype=pl.Boolean),
        pl.col("rel_pos").alias("source_rel_pos"),
        pl.col("length_bucket").alias("source_length_bucket"),
        pl.lit(basis).alias("length_bucket_basis"),
        # Offsets into the source text mean nothing in a translation.
        *[pl.lit(None, dtype=pl.Int64).alias(c) for c in _SOURCE_OFFSETS if c in base.columns],
    ).drop("_lang")
    return out, reasons


def qrel_rows(qrels: pl.DataFrame, query_ids: pl.Series, doc_ids: pl.Series, langs: Sequence[str]) -> pl.DataFrame:
    """Each source qrel once per language, pointing from translated query to translated doc."""
    shared = qrels.filter(pl.col("query_id").is_in(query_ids.implode()) & pl.col("doc_id").is_in(doc_ids.implode()))
    base = by_language(shared, langs)
    return base.select(
        tagged(pl.col("query_id"), pl.col("_lang")).alias("query_id"),
        tagged(pl.col("doc_id"), pl.col("_lang")).alias("doc_id"),
        "score",
    )


def annotate_translated(
    queries: pl.DataFrame, corpus: pl.DataFrame, tokenizer: TokenCounter, options: PositionOptions
) -> pl.DataFrame:
    """Position fields of translated queries, measured in the translated document.

    A query whose markers were lost (`span_inherited`) gets the source's relative
    position and the bin and third derived from it. `length_bucket` follows the
    row's `length_bucket_basis`: the source document's length (PosIR) or its own.
    `reference_texts` become the marked passages of the translation, and `on_target`
    (when present) is judged again on the translated position.
    """
    out = annotate_positions(queries, corpus, tokenizer, options)
    docs = {d: (t, n) for d, t, n in corpus.select("doc_id", "text", "n_tokens").iter_rows()}
    rel, bins, tags, buckets, refs = [], [], [], [], []
    for row in out.select(
        "doc_id",
        "spans",
        "rel_pos",
        "position_bin",
        "position_tag",
        "span_inherited",
        "source_rel_pos",
        "source_length_bucket",
        "length_bucket_basis",
    ).iter_rows(named=True):
        r, b, t = row["rel_pos"], row["position_bin"], row["position_tag"]
        if row["span_inherited"] and row["source_rel_pos"] is not None:
            r = row["source_rel_pos"]
            b, t = position_bin(r, options.n_bins), third_of(r)
        text, n = docs.get(row["doc_id"], (None, None))
        refs.append([text[s["start"] : s["end"]] for s in row["spans"]] if row["spans"] and text else None)
        own = length_bucket(n, options.length_edges) if n is not None else None
        buckets.append(row["source_length_bucket"] if row["length_bucket_basis"] == "source" else own)
        rel.append(r)
        bins.append(b)
        tags.append(t)
    out = out.with_columns(
        pl.Series("rel_pos", rel, dtype=pl.Float64),
        pl.Series("position_bin", bins, dtype=pl.Int64),
        pl.Series("position_tag", tags, dtype=pl.Utf8),
        pl.Series("length_bucket", buckets, dtype=pl.Utf8),
        pl.Series("reference_texts", refs, dtype=pl.List(pl.Utf8)),
    )
    if "on_target" in out.columns and "requested_position" in out.columns:
        region = pl.col("requested_position").replace_strict(REGION_OF_NAME, default=None)
        out = out.with_columns((region == pl.col("position_tag")).alias("on_target"))
    return out
