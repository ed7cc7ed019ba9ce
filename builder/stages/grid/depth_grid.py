"""The depth x length grid (LLM-free): every query's evidence at each depth of padding of
each length, one BEIR set per (depth, length) cell.

Per query, the padding is one walk through the other documents' paragraphs (documents in
a seeded order, paragraphs and sentences in their own): a paragraph that repeats the
evidence (`near_duplicate_of_evidence`) or that BM25 scores at least `max_score_ratio` of
the evidence's score for the query (`answers_query`) is skipped, and counted. A length
takes the sentences of that walk while they fit beside the evidence, so a shorter
length's padding is the start of a longer one's, and every depth of one length holds the
same padding: only the evidence moves. Depth is the share of padding tokens (the
recipe's tokenizer) before the evidence, which sits between two sentences as a paragraph
of its own, so it is within one sentence of the depth asked for.

Each cell is a `setting` (written to settings/<cell>/ as a BEIR folder) and a `domain`
(a `<cell>-corpus|queries|qrels` config in MTEB's columns); the source domain is kept in
`source_domain`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import polars as pl
from pydantic import Field, field_validator

from builder.bench import SPAN_DTYPE, Bench
from builder.stages.base import (Estimate, Flow, Stage, StageParamError, StageParams, Verdicts,
                                 register_stage)
from builder.stages.contracts import DOCUMENTS, QUERIES, SPANS
from builder.stages.grid.evidence import Evidence, widen
from builder.stages.grid.padding import Passage, fill, near_duplicate, passages_of, shingles
from builder.stages.grid.placement import place
from builder.stages.seeding import derive_seed

if TYPE_CHECKING:
    from builder.stages.context import StageContext

GRID_COLUMNS = ("grid_depth", "grid_length")


def cell_name(depth: float, length: int) -> str:
    """`depth50_len1024`: a setting, folder and config name."""
    return f"depth{round(depth * 100, 3):g}_len{length}"


class GridParams(StageParams):
    depths: list[float] = Field(default=[0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0], min_length=1, description=(
        "where the evidence goes: the share of padding tokens before it, 0 (first) to 1 (last)"))
    lengths: list[int] = Field(default=[512, 1024, 2048, 4096, 8192], min_length=1, description=(
        "document lengths in the recipe's tokenizer's tokens, evidence included"))
    judge: Literal["bm25"] = Field(default="bm25", description="what checks that padding does not answer")
    max_score_ratio: float = Field(default=0.5, gt=0, le=1, description=(
        "padding that BM25 scores at least this share of the evidence's score for the query is left out"))
    near_duplicate: float = Field(default=0.5, gt=0, le=1, description=(
        "padding holding this share of the evidence's word trigrams (or the evidence itself) is left out"))
    max_queries: int | None = Field(default=None, ge=1, description="a seeded sample of this many queries")

    @field_validator("depths")
    @classmethod
    def _depths(cls, depths: list[float]) -> list[float]:
        bad = [d for d in depths if not 0 <= d <= 1]
        if bad:
            raise ValueError(f"depths are shares of the document from 0 to 1; got {bad[0]:g}")
        if len(set(depths)) != len(depths):
            raise ValueError("each depth may be listed once")
        return sorted(depths)

    @field_validator("lengths")
    @classmethod
    def _lengths(cls, lengths: list[int]) -> list[int]:
        bad = [n for n in lengths if n < 1]
        if bad:
            raise ValueError(f"lengths are token counts of at least 1; got {bad[0]}")
        if len(set(lengths)) != len(lengths):
            raise ValueError("each length may be listed once")
        return sorted(lengths)


@dataclass
class _Query:
    query_id: str
    text: str
    doc_id: str
    lang: str | None
    evidence: Evidence
    tokens: int
    span: dict[str, Any]


@register_stage
class DepthGrid(Stage):
    """Place each query's evidence at chosen depths in padding of chosen lengths (one BEIR set per cell)."""

    name = "depth_grid"
    needs = frozenset({DOCUMENTS, QUERIES, SPANS})
    provides = frozenset({DOCUMENTS, QUERIES, SPANS})
    rebuilds = frozenset({"corpus", "queries"})
    removes_by_design = True
    chosen_reasons = frozenset({"not_sampled"})
    Params = GridParams
    params: GridParams

    def run(self, bench: Bench, ctx: StageContext) -> Bench:
        p = self.params
        verdicts = Verdicts()
        chosen = self._sample(bench.queries, ctx, verdicts)
        texts = dict(zip(bench.corpus["doc_id"].to_list(), bench.corpus["text"].to_list()))
        domains = dict(zip(bench.corpus["doc_id"].to_list(), bench.corpus["domain"].to_list()))
        passages = {doc: passages_of(doc, text or "") for doc, text in texts.items()}
        queries = self._evidence(chosen, texts, ctx, verdicts)
        sentences = sorted({s for ps in passages.values() for x in ps for s in x.sentences})
        tokens = dict(zip(sentences, ctx.tokenizer.count_many(sentences)))
        shortest = min(p.lengths)
        if queries and all(q.tokens > shortest for q in queries):
            raise StageParamError("lengths", f"length {shortest} is below the evidence of every query "
                                             f"(the shortest holds {min(q.tokens for q in queries)} tokens): "
                                             "ask for longer lengths")
        scorer = self._judge([x.text for ps in passages.values() for x in ps])
        excluded: Counter[str] = Counter()
        rows: list[tuple[_Query, int, float, Any]] = []
        for q in queries:
            if q.tokens > shortest:
                verdicts.drop(q.query_id, "evidence_longer_than_length")
                continue
            usable = self._padding(q, passages, tokens, scorer, ctx, excluded)
            if usable is None:
                verdicts.drop(q.query_id, "padding_exhausted")
                continue
            placed = [(length, depth, place(fill(usable, tokens, length - q.tokens) or [], q.evidence.text, depth))
                      for length in p.lengths for depth in p.depths]
            if any(x.text.count(q.evidence.text) != 1 for _, _, x in placed):
                verdicts.drop(q.query_id, "evidence_not_unique")
                continue
            rows += [(q, length, depth, x) for length, depth, x in placed]
        kept = verdicts.apply(bench, ctx.label)
        corpus, grid_queries, qrels = self._tables(rows, domains, ctx)
        ctx.stats["grid"] = {"depths": p.depths, "lengths": p.lengths, "cells": len(p.depths) * len(p.lengths),
                             "queries": len({q.query_id for q, *_ in rows}), "judge": p.judge,
                             "padding_excluded": dict(sorted(excluded.items())),
                             **_errors(corpus)}
        return Bench.of(corpus=corpus, queries=grid_queries, qrels=qrels, drops=kept.drops)

    def plan(self, flow: Flow) -> tuple[Flow, Estimate]:
        """Every query (at most max_queries) once per cell; queries whose padding runs out go."""
        p = self.params
        n = flow.queries if p.max_queries is None else min(flow.queries, p.max_queries)
        cells = len(p.depths) * len(p.lengths)
        note = (f"{cells} cells ({len(p.depths)} depths x {len(p.lengths)} lengths): at most {n * cells:,} "
                "documents and queries")
        return Flow(docs=n * cells, queries=n * cells, doc_tokens=sum(p.lengths) / len(p.lengths)), Estimate(notes=[note])

    def _sample(self, queries: pl.DataFrame, ctx: StageContext, verdicts: Verdicts) -> pl.DataFrame:
        n = self.params.max_queries
        if n is None or queries.height <= n:
            return queries
        ranked = queries.with_columns(pl.col("query_id").hash(derive_seed(ctx.seed, ctx.label)).alias("_rank"))
        chosen = ranked.sort("_rank", "query_id").head(n).drop("_rank")
        picked = set(chosen["query_id"].to_list())
        verdicts.drop_all([q for q in queries["query_id"].to_list() if q not in picked], "not_sampled")
        return queries.filter(pl.col("query_id").is_in(list(picked)))

    def _evidence(self, queries: pl.DataFrame, texts: dict[str, str], ctx: StageContext,
                  verdicts: Verdicts) -> list[_Query]:
        found: list[_Query] = []
        pending: list[tuple[str, str, str, str | None, Evidence, dict[str, Any]]] = []
        for qid, text, doc, lang, spans in queries.select("query_id", "text", "doc_id", "lang", "spans").iter_rows():
            spans = [s for s in (spans or []) if s and s.get("start") is not None]
            if not spans or doc not in texts:
                verdicts.drop(qid, "no_span")
                continue
            span = min(spans, key=lambda s: s["start"])
            evidence = widen(texts[doc] or "", span["start"], span["end"])
            if isinstance(evidence, str):
                verdicts.drop(qid, evidence)
                continue
            pending.append((qid, text, doc, lang, evidence, span))
        counts = ctx.tokenizer.count_many([e.text for *_, e, _ in pending])
        for (qid, text, doc, lang, evidence, span), n in zip(pending, counts):
            found.append(_Query(qid, text, doc, lang, evidence, n, span))
        return found

    def _judge(self, corpus: list[str]) -> Any:
        from builder.backends.rerankers import BM25Config
        from builder.backends.rerankers.bm25 import BM25Scorer

        scorer = BM25Scorer("grid_padding", BM25Config())
        scorer.fit(corpus)
        return scorer

    def _padding(self, q: _Query, passages: dict[str, list[Passage]], tokens: dict[str, int], scorer: Any,
                 ctx: StageContext, excluded: Counter[str]) -> list[Passage] | None:
        """The passages the longest length needs, in walk order; None if they run out."""
        p = self.params
        others = sorted(d for d in passages if d != q.doc_id)
        ctx.item_rng(q.query_id).shuffle(others)
        pool = [x for d in others for x in passages[d]]
        scores = scorer.score_pairs([(q.text, q.evidence.text)] + [(q.text, x.text) for x in pool])
        bar = p.max_score_ratio * scores[0]
        trigrams = shingles(q.evidence.text)
        need = max(p.lengths) - q.tokens
        usable: list[Passage] = []
        have = 0
        for passage, score in zip(pool, scores[1:]):
            if have > need:
                return usable
            if near_duplicate(q.evidence.text, trigrams, passage.text, p.near_duplicate):
                excluded["near_duplicate_of_evidence"] += 1
            elif score > 0 and score >= bar:
                excluded["answers_query"] += 1
            else:
                usable.append(passage)
                have += sum(tokens[s] for s in passage.sentences)
        return usable if have > need else None

    def _tables(self, rows: list[tuple[_Query, int, float, Any]], domains: dict[str, str],
                ctx: StageContext) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
        docs, queries = [], []
        for q, length, depth, placed in rows:
            cell = cell_name(depth, length)
            query_id = f"{q.query_id}@{cell}"
            doc_id = f"{query_id}-doc"
            start = placed.evidence_start
            docs.append({"doc_id": doc_id, "title": "", "text": placed.text, "lang": q.lang, "domain": cell,
                         "setting": cell, "grid_depth": depth, "grid_length": length,
                         "grid_depth_actual": placed.depth, "source_doc_id": q.doc_id,
                         "source_domain": domains.get(q.doc_id)})
            queries.append({"query_id": query_id, "text": q.text, "doc_id": doc_id, "lang": q.lang,
                            "setting": cell, "grid_depth": depth, "grid_length": length,
                            "source_query_id": q.query_id,
                            "evidence_start": start, "evidence_end": start + len(q.evidence.text),
                            "spans": [{"start": start + q.evidence.span_start, "end": start + q.evidence.span_end,
                                       "method": q.span.get("method"), "score": q.span.get("score")}]})
        corpus = pl.DataFrame(docs, schema={
            "doc_id": pl.Utf8, "title": pl.Utf8, "text": pl.Utf8, "lang": pl.Utf8, "domain": pl.Utf8,
            "setting": pl.Utf8, "grid_depth": pl.Float64, "grid_length": pl.Int64,
            "grid_depth_actual": pl.Float64, "source_doc_id": pl.Utf8, "source_domain": pl.Utf8})
        corpus = corpus.with_columns(pl.Series("n_tokens", ctx.tokenizer.count_many(corpus["text"].to_list()),
                                               dtype=pl.Int64))
        grid_queries = pl.DataFrame(queries, schema={
            "query_id": pl.Utf8, "text": pl.Utf8, "doc_id": pl.Utf8, "lang": pl.Utf8, "setting": pl.Utf8,
            "grid_depth": pl.Float64, "grid_length": pl.Int64, "source_query_id": pl.Utf8,
            "evidence_start": pl.Int64, "evidence_end": pl.Int64, "spans": SPAN_DTYPE})
        qrels = grid_queries.select("query_id", "doc_id", pl.lit(1, dtype=pl.Int64).alias("score"))
        return corpus, grid_queries, qrels


def _errors(corpus: pl.DataFrame) -> dict[str, Any]:
    """How far the documents are from the lengths and depths asked for."""
    if corpus.is_empty():
        return {"largest_length_gap_tokens": None, "largest_depth_gap": None}
    length_gap = (corpus["n_tokens"] - corpus["grid_length"]).abs().max()
    depth_gap = (corpus["grid_depth_actual"] - corpus["grid_depth"]).abs().max()
    return {"largest_length_gap_tokens": int(length_gap), "largest_depth_gap": round(float(depth_gap), 4)}
