"""Token-length outliers per stratum (PosIR B.5.3): documents shorter than Q1 - k_low·IQR
or longer than Q3 + k_high·IQR are dropped, with their queries and qrels.

The bounds are asymmetric by default (3.0 below, 1.5 above) because overlong documents
are the usual sign of a broken translation (repetition, concatenation), while short ones
are mostly legitimate. Quartiles are polars quantiles with the interpolation the recipe
names ("linear" by default, as numpy and pandas compute them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import polars as pl
from pydantic import Field

from builder.stages.base import Stage, StageParams, register_stage
from builder.stages.contracts import DOCUMENTS

if TYPE_CHECKING:
    from builder.bench import Bench
    from builder.stages.context import StageContext


class IQRFilterParams(StageParams):
    by: list[str] = Field(default=["lang", "domain"], description="corpus columns that define a stratum")
    column: str = Field(default="n_tokens", description="the length measured")
    k_low: float = Field(default=3.0, ge=0.0, description="documents below Q1 - k_low * IQR are dropped")
    k_high: float = Field(default=1.5, ge=0.0, description="documents above Q3 + k_high * IQR are dropped")
    interpolation: Literal["linear", "nearest", "lower", "higher", "midpoint"] = Field(
        default="linear", description="how polars interpolates the quartiles"
    )
    min_stratum_size: int = Field(default=8, ge=1, description="smaller strata are left alone")
    languages: list[str] | None = Field(
        default=None,
        description="filter only documents in these languages (default: all); strata still hold every document",
    )


@register_stage
class IQRFilter(Stage):
    """Drop documents whose length is an outlier within their language and domain."""

    name = "iqr_filter"
    needs = frozenset({DOCUMENTS})
    Params = IQRFilterParams
    params: IQRFilterParams

    def run(self, bench: Bench, ctx: StageContext) -> Bench:
        p = self.params
        missing = [c for c in [*p.by, p.column] if c not in bench.corpus.columns]
        if missing:
            raise ValueError(f"iqr_filter: the corpus has no column {missing[0]!r}")
        bounds = self.bounds(bench.corpus)
        cols = list(dict.fromkeys(["doc_id", *p.by, p.column, *(["lang"] if p.languages else [])]))
        judged = bench.corpus.select(cols).join(bounds, on=p.by, how="left", nulls_equal=True)
        checked = pl.col("checked")
        if p.languages is not None:
            checked = checked & pl.col("lang").is_in(p.languages)
        value = pl.col(p.column)
        reason = (
            pl.when(checked & (value < pl.col("low")))
            .then(pl.lit("iqr_lower"))
            .when(checked & (value > pl.col("high")))
            .then(pl.lit("iqr_upper"))
        )
        judged = judged.with_columns(reason.alias("reason"))
        ctx.stats["iqr_filter"] = _stats(judged, bounds, p.by)
        return bench.keep_docs(judged["reason"], ctx.label)

    def bounds(self, corpus: pl.DataFrame) -> pl.DataFrame:
        """One row per stratum: size, quartiles, bounds, and whether it is filtered at all."""
        p = self.params
        value = pl.col(p.column)
        out = (
            corpus.group_by(p.by, maintain_order=True)
            .agg(
                pl.len().alias("n"),
                value.quantile(0.25, p.interpolation).alias("q1"),
                value.quantile(0.75, p.interpolation).alias("q3"),
            )
            .with_columns((pl.col("q3") - pl.col("q1")).alias("iqr"))
        )
        return out.with_columns(
            (pl.col("q1") - p.k_low * pl.col("iqr")).alias("low"),
            (pl.col("q3") + p.k_high * pl.col("iqr")).alias("high"),
            (pl.col("n") >= p.min_stratum_size).alias("checked"),
        )


def _stats(judged: pl.DataFrame, bounds: pl.DataFrame, by: list[str]) -> dict[str, Any]:
    """Per stratum (named `lang=fra-Latn|domain=web`): size, quartiles, bounds and drops."""
    counts = judged.group_by(by, maintain_order=True).agg(
        (pl.col("reason") == "iqr_lower").sum().alias("iqr_lower"),
        (pl.col("reason") == "iqr_upper").sum().alias("iqr_upper"),
    )
    rows = bounds.join(counts, on=by, how="left", nulls_equal=True)
    out: dict[str, Any] = {}
    for row in rows.iter_rows(named=True):
        name = "|".join(f"{c}={row[c]}" for c in by)
        out[name] = {k: row[k] for k in ("n", "q1", "q3", "low", "high", "checked", "iqr_lower", "iqr_upper")}
    return out
