"""Multilingual outputs: one BEIR folder per language, PosIR's parquet layout, and
cross-lingual sets (queries in one language, the source-language corpus).

Inside the Bench a translated row is `id@lang`; here every language gets the shared
source ids back (`source_doc_id` / `source_query_id`), so a document or query has the
same id in every language folder and the qrels read the same everywhere. Cleanup can
remove an item in one language only, so the id sets of two languages may differ.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import polars as pl

from builder.bench import Bench
from builder.io.built_folder import (
    BEIR_FILES,
    CARD_FILE,
    CROSS_DIR,
    MANIFEST_FILE,
    PLOTS_DIR,
    POSIR_DIR,
    POSIR_FILES,
    SETTINGS_DIR,
    STATS_FILE,
    TABLE_FILES,
)
from builder.publish.beir import write_beir, write_parquet
from builder.publish.paths import safe_component
from builder.recipe.sections import MultilingualOutput
from builder.textutil.languages import posir_name
from builder.util.atomic import replace_dir, temp_dir_beside

_INTERNAL = ("source_doc_id", "source_query_id", "piece_starts")
_TRANSLATED_ID = r"@[a-z]{3}-[A-Z][a-z]{3}$"
# What a build writes at the top of its folder; a language folder must not take these names.
TOP_LEVEL = frozenset(
    {
        "corpus",  # the Hub layout's table folders
        "queries",
        "qrels",
        PLOTS_DIR,
        POSIR_DIR,
        CROSS_DIR,
        SETTINGS_DIR,
        BEIR_FILES["corpus"],
        BEIR_FILES["queries"],
        *TABLE_FILES.values(),
        STATS_FILE,
        CARD_FILE,
        MANIFEST_FILE,
    }
)


def write_multilingual(
    bench: Bench, out_dir: Path, options: MultilingualOutput, stats: dict[str, Any] | None = None
) -> list[Path]:
    """Write the folders `options` asks for under `out_dir`; returns the folders written."""
    out_dir = Path(out_dir)
    views = language_views(bench)
    written: list[Path] = []
    if options.per_language:
        for lang, view in views.items():
            folder = out_dir / safe_component(lang, "und", TOP_LEVEL)
            written.append(write_beir(view, folder, stats={"language": lang, **(stats or {})}))
    if options.posir_layout:
        written.append(_write_posir(views, out_dir / POSIR_DIR))
    if options.cross_lingual:
        for target, source in _source_language_of(bench).items():
            if target in views and source in views:
                view, excluded = cross_view(views[target], views[source])
                pair = f"{safe_component(target, 'und')}-{safe_component(source, 'und')}"
                folder = out_dir / CROSS_DIR / pair
                info = {"queries_language": target, "corpus_language": source, "excluded_queries": excluded}
                written.append(write_beir(view, folder, stats={**info, **(stats or {})}))
    return written


def _shared(table: pl.DataFrame, key: str, source_key: str) -> pl.Expr:
    return pl.coalesce(source_key, key) if source_key in table.columns else pl.col(key)


def language_views(bench: Bench) -> dict[str, Bench]:
    """The Bench split by document language, under shared ids."""
    corpus, queries = bench.corpus, bench.queries
    doc_lang = corpus.select("doc_id", pl.col("lang").alias("_doc_lang"))
    queries = queries.join(doc_lang, on="doc_id", how="left")
    doc_ids = corpus.select("doc_id", _shared(corpus, "doc_id", "source_doc_id").alias("_shared"))
    query_ids = queries.select("query_id", _shared(queries, "query_id", "source_query_id").alias("_shared"))
    qrels = (
        bench.qrels.join(query_ids, on="query_id")
        .rename({"_shared": "_q"})
        .join(doc_ids, on="doc_id")
        .rename({"_shared": "_d"})
    )
    views = {}
    translated = set(_source_language_of(bench))
    for lang in corpus["lang"].unique(maintain_order=True).to_list():
        c = corpus.filter(pl.col("lang") == lang)
        q = queries.filter(pl.col("_doc_lang") == lang)
        r = qrels.filter(
            pl.col("doc_id").is_in(c["doc_id"].implode()) & pl.col("query_id").is_in(q["query_id"].implode())
        )
        views[lang] = Bench.of(
            corpus=c.with_columns(_shared(c, "doc_id", "source_doc_id").alias("doc_id")).drop(_present(c)),
            queries=q.with_columns(
                _shared(q, "query_id", "source_query_id").alias("query_id"),
                pl.col("doc_id").replace_strict(doc_ids["doc_id"], doc_ids["_shared"]),
            ).drop("_doc_lang", *_present(q)),
            qrels=r.select(pl.col("_q").alias("query_id"), pl.col("_d").alias("doc_id"), "score"),
            drops=_drops_of(bench.drops, lang, translated),
        )
    return views


def _present(table: pl.DataFrame) -> list[str]:
    return [c for c in _INTERNAL if c in table.columns]


def _drops_of(drops: pl.DataFrame, lang: str, translated: set[str]) -> pl.DataFrame:
    """Drops of translated rows carry `@lang`; those without a language suffix belong to the
    untranslated languages (to each of them, as the id alone does not say which)."""
    if lang in translated:
        suffix = f"@{lang}"
        return drops.filter(pl.col("id").str.ends_with(suffix)).with_columns(pl.col("id").str.strip_suffix(suffix))
    return drops.filter(~pl.col("id").str.contains(_TRANSLATED_ID))


def _source_language_of(bench: Bench) -> dict[str, str]:
    """Translated language -> the language its documents were translated from."""
    corpus = bench.corpus
    if "source_doc_id" not in corpus.columns:
        return {}
    src = corpus.select(pl.col("doc_id").alias("source_doc_id"), pl.col("lang").alias("_src_lang"))
    pairs = (
        corpus.filter(pl.col("doc_id") != pl.col("source_doc_id"))
        .join(src, on="source_doc_id")
        .select("lang", "_src_lang")
        .unique(maintain_order=True)
    )
    return dict(pairs.iter_rows())


def cross_view(target: Bench, source: Bench) -> tuple[Bench, int]:
    """Queries of `target` against the corpus of `source` (shared ids make qrels line up).
    Queries whose relevant documents are all missing from the source corpus are left
    out; their number is returned."""
    qrels = target.qrels.filter(pl.col("doc_id").is_in(source.corpus["doc_id"].implode()))
    queries = target.queries.filter(pl.col("query_id").is_in(qrels["query_id"].implode()))
    return Bench.of(corpus=source.corpus, queries=queries, qrels=qrels), target.queries.height - queries.height


def _write_posir(views: dict[str, Bench], folder: Path) -> Path:
    tmp = temp_dir_beside(folder)
    try:
        for lang, view in views.items():
            domain = pl.col("domain").fill_null("unknown")
            corpus = view.corpus.with_columns(domain)
            queries = view.queries.join(corpus.select("doc_id", pl.col("domain").alias("_domain")), on="doc_id")
            for (name,), part in corpus.group_by("domain", maintain_order=True):
                q = queries.filter(pl.col("_domain") == name).drop("_domain")
                r = view.qrels.filter(pl.col("query_id").is_in(q["query_id"].implode()))
                part_dir = tmp / safe_component(posir_name(lang), "und") / safe_component(name, "unknown")
                _write_posir_part(part_dir, part, q, r)
        replace_dir(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def _write_posir_part(folder: Path, corpus: pl.DataFrame, queries: pl.DataFrame, qrels: pl.DataFrame) -> None:
    (folder / POSIR_FILES["qrels"]).parent.mkdir(parents=True)
    write_parquet(corpus.select(pl.col("doc_id").alias("_id"), "title", "text"), folder / POSIR_FILES["corpus"])
    write_parquet(
        queries.rename({"query_id": "_id"}).with_columns(_posir_span(queries)), folder / POSIR_FILES["queries"]
    )
    write_parquet(
        qrels.select(pl.col("query_id").alias("query-id"), pl.col("doc_id").alias("corpus-id"), "score"),
        folder / POSIR_FILES["qrels"],
    )


def _posir_span(queries: pl.DataFrame) -> list[pl.Expr]:
    """PosIR's scripts read `pos_char_span` as one `[start, end]` pair (they take
    `sum(pos_char_span) / 2`): the first span's pair here; every span stays in `spans`."""
    dtype = queries.schema.get("pos_char_span")
    if not (isinstance(dtype, pl.List) and isinstance(dtype.inner, pl.List)):
        return []
    return [pl.col("pos_char_span").list.first().alias("pos_char_span")]
