"""Positional de-biasing by split-and-shuffle (Hofstätter et al. 2021, used in paper 001 §5).

Each document is cut at random word boundaries and its pieces are joined in random
order. Evidence spans travel with their piece; every query on a document is updated.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import TYPE_CHECKING, Any, Literal

import polars as pl
from pydantic import Field

from builder.bench import SPAN_DTYPE
from builder.stages.base import Stage, StageParams, register_stage
from builder.stages.contracts import DOCUMENTS, SPANS
from builder.stages.far_relevant.segments import shuffle_segments
from builder.stages.position_columns import POSITION_COLUMNS

if TYPE_CHECKING:
    from builder.bench import Bench
    from builder.stages.context import StageContext

# Derived from span positions with settings owned by other stages; after shuffling they
# would be wrong, so they are cleared: run `position_metadata` afterwards to refill them.
STALE_COLUMNS = (*POSITION_COLUMNS, "char_bucket")


class ShuffleParams(StageParams):
    segments: int = Field(
        default=4, ge=2, description=("pieces per document (fewer where a document has fewer usable word gaps)")
    )
    on_cut: Literal["keep_intact", "drop"] = Field(
        default="keep_intact",
        description=(
            "keep_intact: never cut inside an evidence span; drop: cut anywhere and drop "
            "queries whose span is cut (span_cut_by_shuffle)"
        ),
    )
    joiner: str = Field(default=" ", description="put between shuffled pieces")


Spans = list[dict[str, Any]]


@register_stage
class ShuffleDebias(Stage):
    """Split every document at random word boundaries and shuffle the pieces; spans follow."""

    name = "shuffle_debias"
    needs = frozenset({DOCUMENTS, SPANS})
    provides = frozenset({SPANS})
    Params = ShuffleParams
    params: ShuffleParams

    def run(self, bench: Bench, ctx: StageContext) -> Bench:
        p = self.params
        by_doc = _spans_by_doc(bench.queries)
        texts: list[str] = []
        moved: dict[str, Spans] = {}
        drops: dict[str, str] = {}
        with ctx.progress.task("shuffling documents", bench.corpus.height) as bar:
            for doc_id, text in bench.corpus.select("doc_id", "text").iter_rows():
                bar.advance()
                entries = by_doc.get(doc_id, [])
                keep = [(s["start"], s["end"]) for _, spans in entries for s in spans]
                shuffled = shuffle_segments(
                    text,
                    p.segments,
                    ctx.item_rng(doc_id),
                    joiner=p.joiner,
                    protected=keep if p.on_cut == "keep_intact" else (),
                )
                texts.append(shuffled.text)
                for qid, spans in entries:
                    places = [shuffled.move(s["start"], s["end"]) for s in spans]
                    if any(x is None for x in places):
                        drops[qid] = "span_cut_by_shuffle"
                        continue
                    moved[qid] = sorted(
                        ({**s, "start": a, "end": b} for s, (a, b) in zip(spans, places)), key=lambda s: s["start"]
                    )
        corpus = bench.corpus.with_columns(
            pl.Series("text", texts, pl.Utf8), pl.Series("n_tokens", ctx.tokenizer.count_many(texts), pl.Int64)
        )
        queries = self._update_queries(bench.queries, corpus, moved, ctx)
        return bench.replace(corpus=corpus, queries=queries).drop_queries(drops, ctx.label)

    def _update_queries(
        self, queries: pl.DataFrame, corpus: pl.DataFrame, moved: dict[str, Spans], ctx: StageContext
    ) -> pl.DataFrame:
        if "spans" not in queries.columns:
            return queries
        new = [moved.get(q, old) for q, old in queries.select("query_id", "spans").iter_rows()]
        queries = queries.with_columns(pl.Series("spans", new, SPAN_DTYPE))
        stale = [c for c in STALE_COLUMNS if c in queries.columns]
        if stale:
            queries = queries.with_columns(pl.lit(None, queries.schema[c]).alias(c) for c in stale)
            ctx.stats["cleared_columns"] = stale
        if "span_token_start" in queries.columns:
            queries = _token_positions(queries, corpus, ctx)
        ctx.stats["spans_moved"] = len(moved)
        return queries


def _spans_by_doc(queries: pl.DataFrame) -> dict[str, list[tuple[str, Spans]]]:
    out: dict[str, list[tuple[str, Spans]]] = {}
    if "spans" not in queries.columns:
        return out
    for qid, doc_id, spans in queries.select("query_id", "doc_id", "spans").iter_rows():
        if spans:
            out.setdefault(doc_id, []).append((qid, spans))
    return out


def _token_positions(queries: pl.DataFrame, corpus: pl.DataFrame, ctx: StageContext) -> pl.DataFrame:
    """First span's [start, end) in tokens, recounted on the shuffled text."""
    texts = dict(corpus.select("doc_id", "text").iter_rows())
    token_starts: dict[str, list[int]] = {}
    starts, ends = [], []
    for doc_id, spans in queries.select("doc_id", "spans").iter_rows():
        if not spans or doc_id not in texts:
            starts.append(None)
            ends.append(None)
            continue
        if doc_id not in token_starts:
            token_starts[doc_id] = [s for s, _ in ctx.tokenizer.offsets(texts[doc_id])]
        offsets = token_starts[doc_id]
        starts.append(bisect_left(offsets, spans[0]["start"]))
        ends.append(bisect_left(offsets, spans[0]["end"]))
    return queries.with_columns(
        pl.Series("span_token_start", starts, pl.Int64), pl.Series("span_token_end", ends, pl.Int64)
    )
