"""MS MARCO FarRelevant (paper 001, appendix B.2): build one document per query whose
single relevant passage starts far from the beginning (input: `from_beir`)."""

from __future__ import annotations

import statistics
from bisect import bisect_left
from collections import Counter
from typing import TYPE_CHECKING, Any

import polars as pl
from pydantic import Field, model_validator

from builder.bench import SPAN_DTYPE
from builder.stages.base import Stage, StageParams, register_stage
from builder.stages.contracts import DOCUMENTS, QUERIES, SPANS
from builder.stages.far_relevant.assembly import Assembly, Limits, Passage, assemble

if TYPE_CHECKING:
    from builder.bench import Bench
    from builder.stages.context import StageContext


class FarRelevantParams(StageParams):
    min_start: int = Field(
        default=512, ge=0, description=("distractors before the relevant passage total more than this many tokens")
    )
    max_length: int = Field(default=1431, ge=2, description="document length cap in tokens")
    separator: str = Field(default=" ", description="put between passages")
    max_draws: int = Field(default=1000, ge=1, description="rejected random draws allowed per distractor")
    doc_id_prefix: str = Field(default="far-", description="assembled document id = prefix + query id")

    @model_validator(mode="after")
    def _room(self) -> FarRelevantParams:
        if self.max_length <= self.min_start + 1:
            raise ValueError("max_length must leave room after min_start for the relevant passage")
        return self


@register_stage
class FarRelevant(Stage):
    """Assemble one document per query: its relevant passage after token `min_start`,
    among random non-relevant passages of the corpus, at most `max_length` tokens."""

    name = "far_relevant"
    needs = frozenset({DOCUMENTS, QUERIES})
    provides = frozenset({DOCUMENTS, SPANS})
    Params = FarRelevantParams
    params: FarRelevantParams
    rebuilds = frozenset({"corpus"})

    def run(self, bench: Bench, ctx: StageContext) -> Bench:
        p = self.params
        passages = _passages(bench.corpus, ctx)
        by_id = {x.doc_id: x for x in passages}
        relevant = _relevant_ids(bench.qrels)
        limits = Limits(p.min_start, p.max_length, p.max_draws)
        docs: list[dict[str, Any]] = []
        found: list[dict[str, Any]] = []
        drops: dict[str, str] = {}
        rows = bench.queries.select("query_id", "doc_id").iter_rows()
        with ctx.progress.task("assembling documents", bench.queries.height) as bar:
            for qid, positive in rows:
                bar.advance()
                banned = relevant.get(qid, set())
                gold = by_id.get(positive) if positive in banned else None
                if gold is None:  # no positive judgment, or its passage is missing
                    drops[qid] = "no_relevant_passage"
                    continue
                texts = {by_id[d].text for d in banned if d in by_id and d != positive}
                built = assemble(
                    gold, passages, banned_ids=banned, banned_texts=texts, limits=limits, rng=ctx.item_rng(qid)
                )
                outcome = built if isinstance(built, str) else self._document(qid, built, texts, ctx)
                if isinstance(outcome, str):
                    drops[qid] = outcome
                    continue
                doc, span = outcome
                docs.append(doc)
                found.append(span)
        return self._rebuild(bench, ctx, docs, found, drops)

    def _document(
        self, qid: str, built: Assembly, other_relevant: set[str], ctx: StageContext
    ) -> tuple[dict[str, Any], dict[str, Any]] | str:
        """Join the passages and check every FarRelevant invariant on the result."""
        p = self.params
        text, start, end = built.text_and_span(p.separator)
        gold = built.passages[built.gold_index]
        starts = [s for s, _ in ctx.tokenizer.offsets(text)]
        tok_start, tok_end = bisect_left(starts, start), bisect_left(starts, end)
        if text.count(gold.text) != 1 or any(t in text for t in other_relevant):
            return "relevant_not_unique"
        if tok_start < p.min_start:
            return "relevant_starts_too_early"
        if len(starts) > p.max_length:
            return "document_too_long"
        doc_id = f"{p.doc_id_prefix}{qid}"
        doc = {
            "doc_id": doc_id,
            "title": "",
            "text": text,
            "n_tokens": len(starts),
            "passage_ids": [x.doc_id for x in built.passages],
            "target_tokens": built.target,
        }
        span = {
            "query_id": qid,
            "doc_id": doc_id,
            "gold_passage": gold.doc_id,
            "spans": [{"start": start, "end": end, "method": "assembled", "score": 100.0}],
            "span_token_start": tok_start,
            "span_token_end": tok_end,
        }
        return doc, span

    def _rebuild(
        self,
        bench: Bench,
        ctx: StageContext,
        docs: list[dict[str, Any]],
        found: list[dict[str, Any]],
        drops: dict[str, str],
    ) -> Bench:
        bench = bench.drop_queries(drops, ctx.label)
        where = pl.DataFrame(
            found,
            schema={
                "query_id": pl.Utf8,
                "doc_id": pl.Utf8,
                "gold_passage": pl.Utf8,
                "spans": SPAN_DTYPE,
                "span_token_start": pl.Int64,
                "span_token_end": pl.Int64,
            },
        )
        meta = bench.corpus.select(pl.col("doc_id").alias("gold_passage"), "lang", "domain")
        corpus = pl.DataFrame(
            docs,
            schema={
                "doc_id": pl.Utf8,
                "title": pl.Utf8,
                "text": pl.Utf8,
                "n_tokens": pl.Int64,
                "passage_ids": pl.List(pl.Utf8),
                "target_tokens": pl.Int64,
            },
        )
        corpus = corpus.with_columns(pl.Series("gold_passage", where["gold_passage"]))
        corpus = corpus.join(meta, on="gold_passage", how="left", maintain_order="left").drop("gold_passage")
        replaced = [c for c in where.columns if c != "query_id"]
        queries = bench.queries.drop([c for c in replaced if c in bench.queries.columns]).join(
            where, on="query_id", how="left", maintain_order="left"
        )
        qrels = where.select("query_id", "doc_id", pl.lit(1, pl.Int64).alias("score"))
        _report(ctx, where["span_token_start"].to_list(), corpus["n_tokens"].to_list())
        return bench.replace(corpus=corpus, queries=queries, qrels=qrels)


def _passages(corpus: pl.DataFrame, ctx: StageContext) -> list[Passage]:
    """Every corpus text (stripped), with token counts, in doc_id order for determinism."""
    corpus = corpus.select("doc_id", pl.col("text").str.strip_chars(), "n_tokens").sort("doc_id")
    missing = corpus["n_tokens"].is_null()
    if missing.any():
        counts = ctx.tokenizer.count_many(corpus["text"].to_list())
        corpus = corpus.with_columns(pl.Series("n_tokens", counts, pl.Int64))
    return [Passage(d, t, n) for d, t, n in corpus.iter_rows()]


def _relevant_ids(qrels: pl.DataFrame) -> dict[str, set[str]]:
    grouped = qrels.filter(pl.col("score") > 0).group_by("query_id").agg("doc_id")
    return {q: set(ds) for q, ds in grouped.iter_rows()}


def _report(ctx: StageContext, starts: list[int], lengths: list[int], width: int = 128) -> None:
    """Where the relevant passages start (tokens), in bins of `width`, and document lengths."""
    if not starts:
        return
    bins = Counter(s // width * width for s in starts)
    ctx.stats["relevant_start_tokens"] = {
        "min": min(starts),
        "median": statistics.median(starts),
        "max": max(starts),
        "histogram": {f"[{b}, {b + width})": bins[b] for b in sorted(bins)},
    }
    ctx.stats["document_tokens"] = {
        "min": min(lengths),
        "mean": round(statistics.fmean(lengths), 1),
        "max": max(lengths),
    }
