"""Even out position categories: `balance` downsamples every category to the smallest
(FineWeb-PosQ, after reranker agreement); `subset` keeps N queries per category (the Tiny
versions: 1,000 per position tag). Both draw with per-query randomness, so the choice
does not depend on row order; documents are never removed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import polars as pl

if TYPE_CHECKING:
    from builder.bench import Bench
    from builder.stages.base import Verdicts
    from builder.stages.context import StageContext

CategoryColumn = Literal[
    "position_tag", "chunk_tag", "position_bin", "char_bucket", "length_bucket", "requested_position"
]
# How many categories each column usually has, for `build-bench plan`.
TYPICAL_CATEGORIES = {
    "position_tag": 3,
    "chunk_tag": 3,
    "requested_position": 3,
    "position_bin": 20,
    "char_bucket": 6,
    "length_bucket": 4,
}


def pick_per_category(
    bench: Bench, ctx: StageContext, column: str, quota: int | None, reason: str, verdicts: Verdicts
) -> None:
    """Keep `quota` queries per category (None: as many as the smallest category has),
    chosen by a per-query random draw; the rest go with `reason`. Queries without a
    category go as `no_category`."""
    q = bench.queries
    if column not in q.columns:
        verdicts.drop_all(q["query_id"].to_list(), "no_category")
        return
    draws = [ctx.item_rng(qid).random() for qid in q["query_id"]]
    ranked = q.select("query_id", pl.col(column).cast(pl.Utf8).alias("_cat")).with_columns(
        pl.Series("_draw", draws, dtype=pl.Float64)
    )
    sizes = ranked.drop_nulls("_cat").group_by("_cat").len()
    smallest = int(sizes["len"].min()) if sizes.height else 0
    keep_n = smallest if quota is None else quota
    ranked = ranked.with_columns(pl.col("_draw").rank("ordinal").over("_cat").alias("_order"))
    why = (
        pl.when(pl.col("_cat").is_null())
        .then(pl.lit("no_category"))
        .when(pl.col("_order") > keep_n)
        .then(pl.lit(reason))
        .otherwise(None)
    )
    verdicts.update(dict(ranked.select("query_id", why.alias("reason")).iter_rows()))
    ctx.stats["category_sizes_in"] = dict(sorted(sizes.iter_rows()))
    ctx.stats["kept_per_category"] = {c: min(n, keep_n) for c, n in sorted(sizes.iter_rows())}
