"""`lexical_overlap`: drop questions that share too many words with their evidence span.

NoLiMa's control: a question that repeats its evidence's words is found by word matching
wherever the evidence sits, so a position effect measured on it is partly a lexical one.
The overlap is the one the build's stats report as a confound (builder/evaluation/confounds.py):
the share of the question's distinct content words, as BM25 tokenizes them without
stopwords, found in its evidence span. A question above `max_overlap` goes as
`lexical_overlap`. It checks what `generate_queries: {avoid_overlap: true}` asked the model
for, once `localize_spans` has found the evidence. The mean overlap per position group,
before and after, goes to stats.json and the card.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl
from pydantic import Field

from builder.evaluation.confounds import span_features
from builder.evaluation.metrics import group_universe
from builder.stages.base import QueryFilter, StageParams, Verdicts, register_stage
from builder.stages.categories import CategoryColumn
from builder.stages.contracts import COLUMN_PROVIDED_AS, QUERIES, SPANS

if TYPE_CHECKING:
    from builder.bench import Bench
    from builder.stages.context import StageContext

REASON = "lexical_overlap"


class LexicalOverlapParams(StageParams):
    max_overlap: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description=("largest share of a question's content words that may occur in its evidence span"),
    )
    column: CategoryColumn = Field(
        default="position_tag", description=("query column whose groups the achieved overlap is reported by")
    )


def _means(frame: pl.DataFrame, column: str) -> dict[str, float | None]:
    """Mean overlap per group (None: no query of the group has one)."""
    out: dict[str, float | None] = {}
    for group in group_universe(column, frame["_group"].unique().to_list()):
        values = frame.filter(pl.col("_group") == group)["overlap"].drop_nulls()
        out[str(group)] = round(float(values.mean()), 4) if values.len() else None
    return out


@register_stage
class LexicalOverlap(QueryFilter):
    """Drop questions whose content words mostly occur in their evidence span."""

    name = "lexical_overlap"
    needs = frozenset({QUERIES, SPANS})
    Params = LexicalOverlapParams
    params: LexicalOverlapParams

    def needed(self) -> frozenset[str]:
        return self.needs | {COLUMN_PROVIDED_AS[self.params.column]}

    def judge(self, bench: Bench, ctx: StageContext, verdicts: Verdicts) -> None:
        p = self.params
        texts = dict(bench.corpus.select("doc_id", "text").iter_rows())
        features = span_features(bench.queries, texts)
        if features is None:
            ctx.stats[REASON] = {
                "max_overlap": p.max_overlap,
                "column": p.column,
                "dropped": 0,
                "not_judged": bench.queries.height,
                "mean_before": {},
                "mean_after": {},
            }
            return
        group = pl.col(p.column).cast(pl.Utf8) if p.column in bench.queries.columns else pl.lit(None, pl.Utf8)
        frame = features.join(
            bench.queries.select("query_id", group.alias("_group")), on="query_id", how="left"
        ).with_columns(pl.col("_group").fill_null("none"))
        over = frame.filter(pl.col("overlap") > p.max_overlap)["query_id"].to_list()
        verdicts.drop_all(over, REASON)
        kept = frame.filter(~pl.col("query_id").is_in(over))
        ctx.stats[REASON] = {
            "max_overlap": p.max_overlap,
            "column": p.column,
            "dropped": len(over),
            # Queries without a span, or without a content word, have no overlap to judge.
            "not_judged": bench.queries.height - frame["overlap"].drop_nulls().len(),
            "mean_before": _means(frame, p.column),
            "mean_after": _means(kept, p.column),
        }
