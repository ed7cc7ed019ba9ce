"""The depth x length grid (LLM-free): every query's evidence at each depth of padding of
each length, one BEIR set per (depth, length) cell, beside distractor documents.

Every query sits in every cell, so a cell is a valid retrieval task only if no document of
it but a query's own holds or answers that query. The padding pool is therefore the
padding corpus (the bench's documents, or the corpus `padding` names) less the source
document of every query, and a passage pads anything only when it repeats no query's
evidence or span (`near_duplicate_of_evidence`) and the judge finds it answers none of
the queries (`answers_query:<judge>`, see judges.py); each left out once, counted by
reason. Per query, the padding is one walk through that pool (documents in a seeded
order, paragraphs and sentences in their own); a length takes the sentences of that walk
while they fit beside the evidence (a sentence too long for what is left is skipped with
the rest of its paragraph), so every depth of one length holds the same padding and only
the evidence moves. A paragraph cut short, and the two halves the evidence makes of one,
are judged as they stand. Depth is the share of padding tokens (the recipe's tokenizer)
before the evidence, which sits between two sentences as a paragraph of its own; a query
that cannot come within `max_depth_error` of a depth goes (`depth_beyond_tolerance`).

Each cell also holds `distractors` documents of its length made the same way from the
same pool, with no evidence: the same ones at every depth of a length.

Each cell is a `setting` (written to settings/<cell>/ as a BEIR folder) and a `domain`
(a `<cell>-corpus|queries|qrels` config in MTEB's columns); the source domain is kept in
`source_domain`.
"""

# cohesive: the grid's padding pool, leak checks and cell assembly are one validity argument.

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import polars as pl
from pydantic import Field, field_validator, model_validator

from builder.backends.rerankers.config import GRADE_VARIABLES
from builder.bench import Bench
from builder.io.sources import SourceError, SourceSpec
from builder.stages.base import Estimate, Flow, Stage, StageParamError, StageParams, Verdicts, register_stage
from builder.stages.contracts import DOCUMENTS, QUERIES, SPANS
from builder.stages.grid.cells import GridQuery, Row, chance, errors, shares, span_text, tables
from builder.stages.grid.evidence import Evidence, widen
from builder.stages.grid.from_built import BUILT_FROM
from builder.stages.grid.judges import BM25Judge, LLMJudge, PaddingJudge, RerankerJudge
from builder.stages.grid.padding import Passage, Piece, Repeats, passages_of
from builder.stages.grid.placement import compose, halves, place
from builder.stages.grid.walk import Screen, Target, Walk, padding, walk_all
from builder.stages.refs import ModelRef, PromptRef, RerankerRef
from builder.util.stable import derive_seed

if TYPE_CHECKING:
    from builder.stages.context import StageContext

GRID_COLUMNS = ("grid_depth", "grid_length")
# The plan's guess at a padding paragraph, for the LLM judge's calls: the CPython reference's
# mean is 26 words; prose runs longer, so this errs towards more calls.
_PARAGRAPH_TOKENS = 25
_BENCH_POOL = "the bench's documents"  # the recipe's sources, as the stages before left them


class GridParams(StageParams):
    depths: list[float] = Field(
        default=[0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0],
        min_length=1,
        description=("where the evidence goes: the share of padding tokens before it, 0 (first) to 1 (last)"),
    )
    lengths: list[int] = Field(
        default=[512, 1024, 2048, 4096, 8192],
        min_length=1,
        description=("document lengths in the recipe's tokenizer's tokens, evidence included"),
    )
    distractors: int = Field(
        default=100,
        ge=0,
        description=(
            "documents of the cell's length in each cell beside the queries' own, made from the same "
            "padding pool and checked the same way (no query's evidence, none answering a query): with "
            "40 queries, 100 make chance nDCG@10 0.032 and Recall@100 0.71; a shortfall is counted"
        ),
    )
    padding: SourceSpec | None = Field(
        default=None,
        description=(
            "the corpus the padding comes from, written like an entry of `sources:` (e.g. "
            "{type: python_docs}); null: the bench's own documents (after from_built, the built "
            "folder's). Either way no query's source document pads"
        ),
    )
    judge: Literal["bm25", "reranker", "llm"] = Field(
        default="bm25",
        description=(
            "what checks that padding answers none of the cell's queries: BM25 (max_score_ratio, "
            "rank_margin), the `reranker` named, or the `llm` judge"
        ),
    )
    max_score_ratio: float | None = Field(
        default=0.5,
        gt=0,
        le=1,
        description=(
            "bm25: padding that BM25 scores at least this share of a query's evidence's score for it is "
            "left out; null: no score check"
        ),
    )
    rank_margin: int | None = Field(
        default=None,
        ge=0,
        description=(
            "bm25: rank the padding pool by BM25 score per query; padding ranked at or above the evidence, "
            "or among the rank_margin passages just below it, is left out (0: only those at or above)"
        ),
    )
    reranker: RerankerRef | None = Field(
        default=None,
        description=("judge reranker: a rerankers: entry (or bm25) scoring each query against each passage"),
    )
    reranker_margin: float = Field(
        default=0.0,
        ge=0,
        description=("judge reranker: padding must score more than this below the evidence, in the reranker's units"),
    )
    llm: ModelRef | None = Field(default=None, description="judge llm: the model that grades each passage 0-4")
    prompt: PromptRef = Field(default="relevance_grade", description=("judge llm: the grading prompt, 0-4"))
    max_grade: int = Field(
        default=1, ge=0, le=3, description=("judge llm: padding graded above this (0-4) against a query is left out")
    )
    judge_batch: int = Field(
        default=16,
        ge=1,
        description=("judge reranker or llm: passages per walk per round; a walk stops once its padding is full"),
    )
    near_duplicate: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description=(
            "padding holding this share of a query's evidence's word trigrams (or the evidence, or its "
            "span) is left out"
        ),
    )
    near_duplicate_ratio: float = Field(
        default=90.0,
        gt=0,
        le=100,
        description=(
            "padding matching a query's evidence at this rapidfuzz partial_ratio (0-100) or above is left "
            "out: a near copy with a few words changed"
        ),
    )
    length_tolerance: float = Field(
        default=0.02,
        ge=0,
        lt=1,
        description=(
            "a document may fall short of its length by at most this share of it; a query whose padding "
            "cannot come that close goes (padding_exhausted)"
        ),
    )
    max_depth_error: float = Field(
        default=0.05,
        gt=0,
        le=1,
        description=(
            "a query whose evidence cannot be placed within this of every depth (padding sentences too "
            "long to break near it) goes (depth_beyond_tolerance)"
        ),
    )
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
class _Pool:
    """The padding corpus, and what is left of it to pad with."""

    texts: dict[str, str]  # every document of the padding corpus
    domains: dict[str, str | None]
    named: str  # where it comes from, for stats and the card
    passages: dict[str, list[Passage]]  # the documents that may pad: no query's source


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
        queries = self._evidence(chosen, texts, ctx, verdicts)
        shortest = min(p.lengths)
        if queries and all(q.tokens > shortest for q in queries):
            raise StageParamError(
                "lengths",
                f"length {shortest} is below the evidence of every query "
                f"(the shortest holds {min(q.tokens for q in queries)} tokens): "
                "ask for longer lengths",
            )
        fits = self._apart([q for q in queries if q.tokens <= shortest], verdicts)
        verdicts.drop_all([q.query_id for q in queries if q.tokens > shortest], "evidence_longer_than_length")
        pool = self._pool(bench, {q.doc_id for q in queries}, ctx)
        sentences = sorted({s for ps in pool.passages.values() for x in ps for s in x.sentences})
        tokens = dict(zip(sentences, ctx.tokenizer.count_many(sentences)))
        judge = self._judge([x.text for d, t in pool.texts.items() for x in passages_of(d, t or "")], ctx)
        repeats = Repeats(
            [q.evidence.text for q in fits], [span_text(q) for q in fits], p.near_duplicate, p.near_duplicate_ratio
        )
        screen = Screen([Target(q.text, q.evidence.text) for q in fits], repeats, judge)
        longest = max(p.lengths)
        walks = [self._walk(q.query_id, pool, longest - q.tokens, ctx) for q in fits]
        others = [self._walk(f"distractor{k}", pool, longest, ctx, anywhere=True) for k in range(p.distractors)]
        walk_all(walks + others, screen, tokens)
        rows: list[Row] = []
        for q, walk in zip(fits, walks):
            placed = self._place(q, walk, tokens, screen)
            if isinstance(placed, str):
                verdicts.drop(q.query_id, placed)
                continue
            rows += placed
        distractors, short = self._distractors(others, tokens, screen)
        kept = verdicts.apply(bench, ctx.label)
        corpus, grid_queries, qrels = tables(rows, distractors, p.depths, bench, ctx.tokenizer)
        n_queries = len({q.query_id for q, *_ in rows})
        pieces = [x for *_, fill in rows for x in fill] + [
            x for by_length in distractors.values() for _, fill in by_length for x in fill
        ]
        ctx.stats["grid"] = {
            "depths": p.depths,
            "lengths": p.lengths,
            "cells": len(p.depths) * len(p.lengths),
            "queries": n_queries,
            "judge": p.judge,
            "padding_pool": {"from": pool.named, "documents": len(pool.passages)},
            "padding_share": shares(pieces, pool.domains),
            "padding_excluded": dict(sorted(screen.excluded.items())),
            "distractors": {
                "asked": p.distractors,
                "per_length": {str(n): len(d) for n, d in distractors.items()},
                "short": dict(sorted(short.items())),
            },
            "chance": {
                str(n): {"documents": n_queries + len(d), **chance(n_queries + len(d))} for n, d in distractors.items()
            }
            if n_queries
            else {},
            **errors(corpus),
        }
        return Bench.of(corpus=corpus, queries=grid_queries, qrels=qrels, drops=kept.drops)

    def _apart(self, queries: list[GridQuery], verdicts: Verdicts) -> list[GridQuery]:
        """The queries whose evidence no earlier one's repeats, nor repeats an earlier one's
        (two questions on one sentence would each have two relevant documents in a cell, and
        the qrels name one): the later goes (`evidence_shared_with_another_query`)."""
        p = self.params
        kept: list[GridQuery] = []
        for q in queries:
            mine = Repeats([q.evidence.text], [span_text(q)], p.near_duplicate, p.near_duplicate_ratio)
            theirs = Repeats(
                [k.evidence.text for k in kept], [span_text(k) for k in kept], p.near_duplicate, p.near_duplicate_ratio
            )
            flat = " ".join(q.evidence.text.split())
            if kept and (theirs(flat) or any(mine(" ".join(k.evidence.text.split())) for k in kept)):
                verdicts.drop(q.query_id, "evidence_shared_with_another_query")
            else:
                kept.append(q)
        return kept

    def _slack(self, length: int) -> int:
        return int(self.params.length_tolerance * length)

    def _place(self, q: GridQuery, walk: Walk, tokens: dict[str, int], screen: Screen) -> list[Row] | str:
        """The query's document in every cell, or why it cannot have one in each."""
        p = self.params
        out = []
        for length in p.lengths:
            fill = padding(walk.usable, tokens, length - q.tokens, self._slack(length), screen)
            if fill is None:
                return "padding_exhausted"

            def allowed(at: int, fill: list[Piece] = fill) -> bool:
                cut = halves(fill, at)
                return cut is None or (screen.ok(cut[0]) and screen.ok(cut[1]))

            for depth in p.depths:
                placed = place(fill, q.evidence.text, depth, allowed)
                if abs(placed.depth - depth) > p.max_depth_error:
                    return "depth_beyond_tolerance"
                if placed.text.count(q.evidence.text) != 1:
                    return "evidence_not_unique"
                out.append((q, length, depth, placed, fill))
        return out

    def _distractors(
        self, walks: list[Walk], tokens: dict[str, int], screen: Screen
    ) -> tuple[dict[int, list[tuple[str, list[Piece]]]], Counter[str]]:
        """Per length, the distractors' texts (and pieces); a distractor the pool cannot fill,
        or that repeats another of its length word for word (MTEB refuses duplicate texts), is
        counted."""
        out: dict[int, list[tuple[str, list[Piece]]]] = {}
        short: Counter[str] = Counter()
        for length in self.params.lengths:
            out[length] = []
            made: set[str] = set()
            for walk in walks:
                fill = padding(walk.usable, tokens, length, self._slack(length), screen)
                if fill is None:
                    short["padding_exhausted"] += 1
                    continue
                text = compose(fill)
                if text in made:
                    short["duplicate_text"] += 1
                    continue
                made.add(text)
                out[length].append((text, fill))
        return out, short

    def plan(self, flow: Flow) -> tuple[Flow, Estimate]:
        """Every query (at most max_queries) once per cell, beside the cell's distractors;
        queries whose padding runs out go."""
        p = self.params
        n = flow.queries if p.max_queries is None else min(flow.queries, p.max_queries)
        cells = len(p.depths) * len(p.lengths)
        note = (
            f"{cells} cells ({len(p.depths)} depths x {len(p.lengths)} lengths): at most {n * cells:,} "
            f"queries and {(n + p.distractors) * cells:,} documents"
        )
        out = Flow(docs=(n + p.distractors) * cells, queries=n * cells, doc_tokens=sum(p.lengths) / len(p.lengths))
        if p.judge != "llm":
            return out, Estimate(notes=[note])
        # Every paragraph a walk meets is graded against every query, once: the walks share
        # what they meet, and at most the whole pool (the bench's documents, when they pad).
        met = (n + p.distractors) * -(-max(p.lengths) // _PARAGRAPH_TOKENS)
        if p.padding is None:
            met = min(met, -(-int(flow.docs * flow.doc_tokens) // _PARAGRAPH_TOKENS))
        calls = n * met
        judged = (
            f"llm judge: each padding paragraph met (taken as {_PARAGRAPH_TOKENS} tokens) graded against "
            f"every query, in rounds of {p.judge_batch} per walk"
        )
        return out, Estimate(
            calls=calls,
            prompt_tokens=calls * (_PARAGRAPH_TOKENS + 250),
            completion_tokens=calls * 2,
            notes=[note, judged],
        )

    def _sample(self, queries: pl.DataFrame, ctx: StageContext, verdicts: Verdicts) -> pl.DataFrame:
        n = self.params.max_queries
        if n is None or queries.height <= n:
            return queries
        ranked = queries.with_columns(pl.col("query_id").hash(derive_seed(ctx.seed, ctx.label)).alias("_rank"))
        chosen = ranked.sort("_rank", "query_id").head(n).drop("_rank")
        picked = set(chosen["query_id"].to_list())
        verdicts.drop_all([q for q in queries["query_id"].to_list() if q not in picked], "not_sampled")
        return queries.filter(pl.col("query_id").is_in(list(picked)))

    def _evidence(
        self, queries: pl.DataFrame, texts: dict[str, str], ctx: StageContext, verdicts: Verdicts
    ) -> list[GridQuery]:
        found: list[GridQuery] = []
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
            found.append(GridQuery(qid, text, doc, lang, evidence, n, span))
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

    def _pool(self, bench: Bench, sources: set[str], ctx: StageContext) -> _Pool:
        """The padding corpus (the bench's documents, or the one `padding` names), and its
        documents that may pad: every one but the queries' sources."""
        spec = self.params.padding
        if spec is None:
            corpus = bench.corpus
            folders = corpus[BUILT_FROM].unique().drop_nulls().to_list() if BUILT_FROM in corpus.columns else []
            named = f"built folder {', '.join(sorted(folders))}" if folders else _BENCH_POOL
        else:
            from builder.io.corpus_loader import load_sources

            try:
                corpus, _ = load_sources([spec], ctx.base_dir)
            except SourceError as exc:
                raise StageParamError("padding", str(exc)) from None
            path = getattr(spec, "path", None)
            named = f"{spec.type} source{f' {path}' if path else ''} (domain {spec.domain})"
        texts = dict(zip(corpus["doc_id"].to_list(), corpus["text"].to_list()))
        domains = dict(zip(corpus["doc_id"].to_list(), corpus["domain"].to_list()))
        passages = {d: passages_of(d, t or "") for d, t in texts.items() if d not in sources}
        free = {d: ps for d, ps in passages.items() if ps}
        if not free and sources:
            raise StageParamError(
                "padding",
                f"the padding corpus ({named}) leaves nothing to pad with: each of "
                f"its {len(texts)} documents is a query's source (or empty); name a "
                "larger corpus with `padding:`, or take fewer queries (max_queries)",
            )
        return _Pool(texts, domains, named, free)

    def _walk(self, item: str, pool: _Pool, need: int, ctx: StageContext, anywhere: bool = False) -> Walk:
        """The pool's documents in an order seeded by `item`, their paragraphs in their own;
        `anywhere` starts it at a seeded paragraph, wrapping round (distractors: a pool of
        few documents would otherwise open many of them alike)."""
        order = sorted(pool.passages)
        rng = ctx.item_rng(item)
        rng.shuffle(order)
        passages = [x for d in order for x in pool.passages[d]]
        if anywhere:
            start = rng.randrange(len(passages))
            passages = passages[start:] + passages[:start]
        return Walk(passages, need, self._slack(max(self.params.lengths)))
