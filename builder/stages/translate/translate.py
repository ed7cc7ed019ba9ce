"""Machine translation of corpus and queries into target languages (PosIR §2.4, C.4),
with every reference span tracked into the translated text by numbered markers.

Translated rows sit next to the source rows under `id@lang` ids (`source_doc_id` /
`source_query_id` give the shared id), and their qrels mirror the source qrels within
each language. Position fields are measured in the translated document; where the
markers did not survive, the source position is inherited (`span_inherited`) or the
query is dropped (`span_marker_lost`), as the recipe says.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import polars as pl
from pydantic import Field, model_validator

from builder.bench import SPAN_DTYPE
from builder.stages.base import Estimate, Flow, Stage, StageParams, register_stage
from builder.stages.contracts import DOCUMENTS, TRANSLATIONS
from builder.stages.position_columns import PositionOptions
from builder.stages.refs import ModelRef, PromptRef
from builder.stages.translate.documents import SourceDoc, translate_documents
from builder.stages.translate.markers import MarkerStyle, pick_style
from builder.stages.translate.rows import annotate_translated, corpus_rows, qrel_rows, query_rows
from builder.stages.translate.short_texts import translate_short
from builder.textutil.languages import check_code, display_name, normalise

if TYPE_CHECKING:
    from builder.bench import Bench
    from builder.stages.context import StageContext


class TranslateParams(StageParams):
    llm: ModelRef = Field(description="the model that translates")
    prompt: PromptRef = Field(default="translate", description="the translation prompt")
    languages: list[str] = Field(min_length=1, description="target languages, e.g. fra-Latn, cmn-Hans")
    source_lang: str = Field(default="eng-Latn", description="rows whose lang maps to this are translated")
    language_names: dict[str, str] = Field(
        default_factory=dict, description="English names of languages missing from the built-in table, for the prompt"
    )
    max_chunk_tokens: int = Field(default=1024, ge=8, description="longer documents go piece by piece")
    queries_per_call: int = Field(default=10, ge=1, description="queries and titles translated per call")
    on_marker_loss: Literal["inherit", "drop"] = Field(
        default="inherit", description="inherit the source position (flag span_inherited) or drop the query"
    )
    length_bucket_from: Literal["source", "target"] = Field(
        default="source", description="PosIR buckets translated queries by the source document's length"
    )
    positions: PositionOptions = Field(
        default=PositionOptions(), description=("how position fields are computed in the translated texts")
    )

    @model_validator(mode="after")
    def _languages(self) -> TranslateParams:
        for code in [self.source_lang, *self.languages]:
            check_code(code)
            display_name(code, self.language_names)
        if len(set(self.languages)) != len(self.languages):
            raise ValueError("languages lists a language twice")
        if self.source_lang in self.languages:
            raise ValueError(f"the source language {self.source_lang} is also a target")
        return self


@register_stage
class Translate(Stage):
    """Translate documents and queries into other languages, tracking spans with markers."""

    name = "translate"
    needs = frozenset({DOCUMENTS})
    provides = frozenset({TRANSLATIONS})
    Params = TranslateParams
    params: TranslateParams

    prompt_variables = frozenset(
        {"language", "source_language", "text", "items", "markers", "example_open", "example_close", "reminder"}
    )

    def run(self, bench: Bench, ctx: StageContext) -> Bench:
        p = self.params
        bench = _normalise_source(bench, p.source_lang)
        is_source = pl.col("lang") == p.source_lang
        docs = bench.corpus.filter(is_source)
        queries = _with_position_columns(bench.queries.filter(pl.col("doc_id").is_in(docs["doc_id"].implode())))
        sources, numbers = _source_docs(docs, queries)
        results = translate_documents(
            sources,
            p.languages,
            p.max_chunk_tokens,
            ctx.tokenizer.count_many,
            self._render_doc(ctx),
            ctx.llm(p.llm),
            ctx.progress,
        )
        short = self._short_texts(docs, queries, results, ctx)
        titles = {
            (d, lang): short.get(("title:" + d, lang), t) if t else t
            for d, t in docs.select("doc_id", "title").iter_rows()
            for lang in p.languages
        }
        corpus_t = corpus_rows(docs, p.languages, results, titles, ctx.tokenizer)
        texts = {(q, lang): short.get((q, lang)) for q in queries["query_id"] for lang in p.languages}
        queries_t, query_reasons = query_rows(
            queries, p.languages, results, texts, numbers, p.on_marker_loss, p.length_bucket_from
        )
        qrels_t = qrel_rows(bench.qrels, queries["query_id"], docs["doc_id"], p.languages)
        out = bench.replace(
            corpus=pl.concat([bench.corpus, corpus_t], how="diagonal_relaxed"),
            queries=pl.concat([bench.queries, queries_t], how="diagonal_relaxed"),
            qrels=pl.concat([bench.qrels, qrels_t]),
        )
        doc_reasons = {f"{d}@{lang}": r.reason for (d, lang), r in results.items() if r.reason}
        out = out.drop_docs(doc_reasons, ctx.label).drop_queries(query_reasons, ctx.label)
        translated = out.queries.filter(pl.col("source_query_id") != pl.col("query_id"))
        annotated = annotate_translated(translated, out.corpus, ctx.tokenizer, p.positions)
        rest = out.queries.filter(pl.col("source_query_id") == pl.col("query_id")).with_columns(
            pl.coalesce("source_rel_pos", "rel_pos").alias("source_rel_pos"),
            pl.coalesce("source_length_bucket", "length_bucket").alias("source_length_bucket"),
        )
        out = out.replace(queries=pl.concat([rest, annotated], how="diagonal_relaxed"))
        ctx.stats["translate"] = _stats(results, out, p.languages)
        return out

    def _render_doc(self, ctx: StageContext) -> Any:
        p = self.params

        def render(lang: str, text: str, reminder: str, style: MarkerStyle | None) -> Any:
            return ctx.render(
                p.prompt,
                language=display_name(lang, p.language_names),
                source_language=display_name(p.source_lang, p.language_names),
                text=text,
                items=[],
                markers=style is not None,
                example_open=style.tag(1) if style else "",
                reminder=reminder,
                example_close=style.tag(1, closing=True) if style else "",
            )

        return render

    def _short_texts(
        self, docs: pl.DataFrame, queries: pl.DataFrame, results: dict, ctx: StageContext
    ) -> dict[tuple[str, str], str | None]:
        """Queries and titles of the documents that did get translated."""
        p = self.params
        done = {key for key, r in results.items() if r.text is not None}
        items = [
            (q, lang, text)
            for lang in p.languages
            for q, d, text in queries.select("query_id", "doc_id", "text").iter_rows()
            if (d, lang) in done and text
        ]
        items += [
            ("title:" + d, lang, t)
            for lang in p.languages
            for d, t in docs.select("doc_id", "title").iter_rows()
            if (d, lang) in done and t
        ]

        def render(lang: str, numbered: list[dict[str, Any]]) -> Any:
            return ctx.render(
                p.prompt,
                language=display_name(lang, p.language_names),
                source_language=display_name(p.source_lang, p.language_names),
                text="",
                items=numbered,
                markers=False,
                example_open="",
                example_close="",
                reminder="",
            )

        calls = sum(-(-sum(1 for _, lang, _ in items if lang == x) // p.queries_per_call) for x in p.languages)
        with ctx.progress.task("translating queries and titles", calls) as bar:
            return translate_short(
                items, p.queries_per_call, render, ctx.llm(p.llm), ctx.work_dir / "unparseable.jsonl", bar.advance
            )

    def plan(self, flow: Flow) -> tuple[Flow, Estimate]:
        p = self.params
        n = len(p.languages)
        pieces = max(1.0, flow.doc_tokens / p.max_chunk_tokens)
        calls = int(flow.docs * n * pieces) + -(-flow.queries * n // p.queries_per_call)
        prompt = flow.docs * n * (flow.doc_tokens + 250 * pieces) + flow.queries * n * 40
        est = Estimate(
            calls=calls,
            prompt_tokens=int(prompt),
            completion_tokens=int(flow.docs * n * flow.doc_tokens * 1.5 + flow.queries * n * 30),
        )
        return Flow(flow.docs * (n + 1), flow.queries * (n + 1), flow.doc_tokens), est


def _normalise_source(bench: Bench, source_lang: str) -> Bench:
    """Source rows get the recipe's language name; every row not yet translated is its own source."""
    codes = set(bench.corpus["lang"].drop_nulls()) | set(bench.queries["lang"].drop_nulls())
    lang = pl.col("lang").replace({c: source_lang for c in codes if normalise(c) == source_lang})
    corpus = bench.corpus.with_columns(lang)
    queries = bench.queries.with_columns(lang)
    if "source_doc_id" not in corpus.columns:
        corpus = corpus.with_columns(pl.lit(None, dtype=pl.Utf8).alias("source_doc_id"))
    if "source_query_id" not in queries.columns:
        queries = queries.with_columns(pl.lit(None, dtype=pl.Utf8).alias("source_query_id"))
    return bench.replace(
        corpus=corpus.with_columns(pl.col("source_doc_id").fill_null(pl.col("doc_id"))),
        queries=queries.with_columns(pl.col("source_query_id").fill_null(pl.col("query_id"))),
    )


def _with_position_columns(queries: pl.DataFrame) -> pl.DataFrame:
    wanted = {"spans": SPAN_DTYPE, "rel_pos": pl.Float64, "length_bucket": pl.Utf8}
    return queries.with_columns([pl.lit(None, dtype=t).alias(c) for c, t in wanted.items() if c not in queries.columns])


def _source_docs(docs: pl.DataFrame, queries: pl.DataFrame) -> tuple[list[SourceDoc], dict[str, list[int]]]:
    """One marker number per distinct span of a document, shared by the queries that cite it."""
    spans_of: dict[str, list[tuple[str, list[dict]]]] = {}
    for qid, doc_id, spans in queries.select("query_id", "doc_id", "spans").iter_rows():
        spans_of.setdefault(doc_id, []).append((qid, spans or []))
    out, numbers = [], {}
    for doc_id, text in docs.select("doc_id", "text").iter_rows():
        cited = spans_of.get(doc_id, [])
        distinct = sorted({(s["start"], s["end"]) for _, spans in cited for s in spans if s["end"] > s["start"]})
        number = {span: n for n, span in enumerate(distinct, start=1)}
        for qid, spans in cited:
            numbers[qid] = [number.get((s["start"], s["end"]), 0) for s in spans]
        style = pick_style(text) if distinct else None
        out.append(SourceDoc(doc_id, text, {n: span for span, n in number.items()}, style))
    return out, numbers


def _stats(results: dict, out: Bench, langs: list[str]) -> dict[str, Any]:
    """Per language: documents translated, why others failed, pieces re-asked, spans inherited."""
    stats: dict[str, Any] = {}
    for lang in langs:
        mine = [r for (_, x), r in results.items() if x == lang]
        failures: dict[str, int] = {}
        for r in mine:
            if r.reason:
                failures[r.reason] = failures.get(r.reason, 0) + 1
        q = out.queries.filter(pl.col("lang") == lang)
        stats[lang] = {
            "docs": sum(r.text is not None for r in mine),
            "doc_failures": failures,
            "pieces_reasked": sum(r.reasked for r in mine),
            "queries": q.height,
            "spans_inherited": int(q["span_inherited"].sum() or 0) if q.height else 0,
        }
    return stats
