"""The depth x length grid (LLM-free): every query's evidence at each depth of padding of
each length, one BEIR set per (depth, length) cell.

Per query, the padding is one walk through the other documents' paragraphs (documents in
a seeded order, paragraphs and sentences in their own): a paragraph that repeats the
evidence (`near_duplicate_of_evidence`) or that the judge says could answer the query
(`answers_query:<judge>`, see judges.py) is skipped, and counted by reason. A length
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
from pydantic import Field, field_validator, model_validator

from builder.backends.rerankers.config import GRADE_VARIABLES
from builder.bench import SPAN_DTYPE, Bench
from builder.stages.base import (Estimate, Flow, Stage, StageParamError, StageParams, Verdicts,
                                 register_stage)
from builder.stages.contracts import DOCUMENTS, QUERIES, SPANS
from builder.stages.grid.evidence import Evidence, widen
from builder.stages.grid.judges import BM25Judge, LLMJudge, PaddingJudge, RerankerJudge
from builder.stages.grid.padding import Passage, fill, passages_of
from builder.stages.grid.walk import Walk, walk_all
from builder.stages.grid.placement import place
from builder.stages.refs import ModelRef, PromptRef, RerankerRef
from builder.stages.seeding import derive_seed

if TYPE_CHECKING:
    from builder.stages.context import StageContext

GRID_COLUMNS = ("grid_depth", "grid_length")
# The plan's guess at a padding paragraph, for the LLM judge's calls: the CPython reference's
# mean is 26 words; prose runs longer, so this errs towards more calls.
_PARAGRAPH_TOKENS = 25


def cell_name(depth: float, length: int) -> str:
    """`depth50_len1024`: a setting, folder and config name."""
    return f"depth{round(depth * 100, 3):g}_len{length}"


class GridParams(StageParams):
    depths: list[float] = Field(default=[0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0], min_length=1, description=(
        "where the evidence goes: the share of padding tokens before it, 0 (first) to 1 (last)"))
    lengths: list[int] = Field(default=[512, 1024, 2048, 4096, 8192], min_length=1, description=(
        "document lengths in the recipe's tokenizer's tokens, evidence included"))
    judge: Literal["bm25", "reranker", "llm"] = Field(default="bm25", description=(
        "what checks that padding does not answer the query: BM25 (max_score_ratio, rank_margin), "
        "the `reranker` named, or the `llm` judge"))
    max_score_ratio: float | None = Field(default=0.5, gt=0, le=1, description=(
        "bm25: padding that BM25 scores at least this share of the evidence's score for the query is "
        "left out; null: no score check"))
    rank_margin: int | None = Field(default=None, ge=0, description=(
        "bm25: rank the query's padding pool by BM25 score; padding ranked at or above the evidence, "
        "or among the rank_margin passages just below it, is left out (0: only those at or above)"))
    reranker: RerankerRef | None = Field(default=None, description=(
        "judge reranker: a rerankers: entry (or bm25) scoring the query against each passage"))
    reranker_margin: float = Field(default=0.0, ge=0, description=(
        "judge reranker: padding must score more than this below the evidence, in the reranker's units"))
    llm: ModelRef | None = Field(default=None, description="judge llm: the model that grades each passage 0-4")
    prompt: PromptRef = Field(default="relevance_grade", description=(
        "judge llm: the grading prompt, 0-4"))
    max_grade: int = Field(default=1, ge=0, le=3, description=(
        "judge llm: padding graded above this (0-4) against the query is left out"))
    judge_batch: int = Field(default=16, ge=1, description=(
        "judge reranker or llm: passages judged per query per round; the walk stops judging a query "
        "once its padding is full"))
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

    @model_validator(mode="after")
    def _judge_needs(self) -> GridParams:
        if self.judge == "bm25" and self.max_score_ratio is None and self.rank_margin is None:
            raise ValueError("judge bm25 needs max_score_ratio or rank_margin")
        if self.judge == "reranker" and self.reranker is None:
            raise ValueError("judge reranker needs `reranker:` naming a rerankers: entry")
        if self.judge == "llm" and self.llm is None:
            raise ValueError("judge llm needs `llm:` naming a models: entry")
        return self


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

    prompt_variables = GRADE_VARIABLES

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
        judge = self._judge([x.text for ps in passages.values() for x in ps], ctx)
        excluded: Counter[str] = Counter()
        fits = [q for q in queries if q.tokens <= shortest]
        verdicts.drop_all([q.query_id for q in queries if q.tokens > shortest], "evidence_longer_than_length")
        walks = [self._walk(q, passages, ctx) for q in fits]
        walk_all(walks, judge, tokens, p.near_duplicate, excluded)
        rows: list[tuple[_Query, int, float, Any]] = []
        for q, walk in zip(fits, walks):
            if not walk.full:
                verdicts.drop(q.query_id, "padding_exhausted")
                continue
            placed = [(length, depth, place(fill(walk.usable, tokens, length - q.tokens) or [], q.evidence.text, depth))
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
        flow = Flow(docs=n * cells, queries=n * cells, doc_tokens=sum(p.lengths) / len(p.lengths))
        if p.judge != "llm":
            return flow, Estimate(notes=[note])
        paragraphs = -(-max(p.lengths) // _PARAGRAPH_TOKENS)
        calls = n * -(-paragraphs // p.judge_batch) * p.judge_batch
        judged = (f"llm judge: about one call per padding paragraph (taken as {_PARAGRAPH_TOKENS} tokens), "
                  f"in rounds of {p.judge_batch} per query")
        return flow, Estimate(calls=calls, prompt_tokens=calls * (_PARAGRAPH_TOKENS + 250), completion_tokens=calls * 2,
                              notes=[note, judged])

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

    def _judge(self, corpus: list[str], ctx: StageContext) -> PaddingJudge:
        p = self.params
        if p.judge == "reranker":
            assert p.reranker is not None  # the params check
            return RerankerJudge(p.reranker, ctx.reranker(p.reranker), corpus, p.reranker_margin, p.judge_batch)
        if p.judge == "llm":
            assert p.llm is not None
            return LLMJudge(ctx, p.llm, p.prompt, p.max_grade, p.judge_batch)
        return BM25Judge(corpus, p.max_score_ratio, p.rank_margin)

    def _walk(self, q: _Query, passages: dict[str, list[Passage]], ctx: StageContext) -> Walk:
        """The other documents in a seeded order, their paragraphs in their own."""
        others = sorted(d for d in passages if d != q.doc_id)
        ctx.item_rng(q.query_id).shuffle(others)
        return Walk(q.text, q.evidence.text, [x for d in others for x in passages[d]], max(self.params.lengths) - q.tokens)

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
