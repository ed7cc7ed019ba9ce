"""`balance_confounds`: keep the queries whose position groups agree in everything but position.

The build's stats report, per position third, the confounds a PSI over thirds also measures
(builder/publish/confounds.py): query–span word overlap, BM25 of the query against its span,
span and document length, and the question-type mix. This stage controls them by greedy
trimming: while some confound's standardized mean difference (SMD) between two compared
groups exceeds `max_smd`, it removes the one query whose removal leaves the smallest largest
|SMD| (ties: the smaller sum of squared SMDs, then a per-query draw from the recipe seed),
as long as that is no worse than keeping it.
A query's removal changes only its own group's means and variances, so every candidate is
scored at once from leave-one-out sums. BM25 over spans takes its IDF from the spans left,
so after each pass the features are computed again on the queries kept and the pass repeats
until the figures the stats will report are within `max_smd`. A group is never trimmed below
`min_group` (smaller groups are not compared, so trimming one away would only hide it);
where that stops the trimming short, the stage says so and keeps what it has.

Each removed query goes with the reason `confound_smd:<confound>`, naming the confound whose
largest difference it was removed to reduce.
"""

from __future__ import annotations

from itertools import combinations
from typing import TYPE_CHECKING, Literal

import numpy as np
import polars as pl
from pydantic import Field

from builder.evaluation.confounds import FEATURES, describe, span_features
from builder.evaluation.intervals import BootstrapSettings
from builder.stages.base import QueryFilter, StageParams, Verdicts, register_stage
from builder.stages.categories import CategoryColumn
from builder.stages.contracts import COLUMN_PROVIDED_AS, QUERIES, SPANS

if TYPE_CHECKING:
    from builder.bench import Bench
    from builder.stages.context import StageContext

Confound = Literal["overlap", "span_bm25", "span_words", "doc_words", "question_type"]
ALL_CONFOUNDS: list[Confound] = ["overlap", "span_bm25", "span_words", "doc_words", "question_type"]
REASON = "confound_smd"
# Groups this size and up are compared, as the build's stats and eval compare them.
MIN_GROUP = BootstrapSettings().min_group
# A spread this small means neither group varies: the SMD is undefined, as in describe().
_FLAT = 1e-12


class BalanceConfoundsParams(StageParams):
    column: CategoryColumn = Field(default="position_tag", description="query column holding the position group")
    confounds: list[Confound] = Field(
        default_factory=lambda: list(ALL_CONFOUNDS),
        min_length=1,
        description=("confounds to balance; question_type balances the share of each question type"),
    )
    max_smd: float = Field(
        default=0.1,
        gt=0,
        description="largest |standardized mean difference| allowed between two groups for any confound",
    )
    min_group: int = Field(
        default=MIN_GROUP,
        ge=2,
        description=("groups of at least this many queries are compared (as in stats.json); none is trimmed below it"),
    )


class _Matrix:
    """The confound values of the queries being balanced: one column per confound (a
    question type's indicator counts as one), NaN where a query has no value."""

    def __init__(self, features: pl.DataFrame, confounds: list[Confound]) -> None:
        self.ids: list[str] = features["query_id"].to_list()
        columns, names = [], []
        for name in confounds:
            if name == "question_type":
                types = features["question_type"].to_list()
                for kind in sorted(set(types)):
                    columns.append(np.array([float(t == kind) for t in types]))
                    names.append(f"question type '{kind}'")
            else:
                columns.append(features[name].cast(pl.Float64).fill_null(float("nan")).to_numpy())
                names.append(name)
        self.values = np.column_stack(columns) if columns else np.zeros((len(self.ids), 0))
        self.names = names
        self.confound_of = [n if n in FEATURES else "question_type" for n in names]


def _moments(values: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per column over `rows`: count, sum and sum of squares of the non-missing values."""
    part = values[rows]
    valid = ~np.isnan(part)
    filled = np.where(valid, part, 0.0)
    return valid.sum(0).astype(float), filled.sum(0), (filled**2).sum(0)


def _mean_var(n: np.ndarray, s: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = s / n
        var = np.where(n >= 2, np.maximum(q - s * mean, 0.0) / (n - 1), np.nan)
    return mean, var


def _smd(mean_a: np.ndarray, var_a: np.ndarray, mean_b: np.ndarray, var_b: np.ndarray) -> np.ndarray:
    """|SMD| per column, 0 where undefined (a group with fewer than 2 values, or no spread)."""
    spread = np.sqrt((var_a + var_b) / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.abs(mean_a - mean_b) / spread
    return np.where(np.isfinite(out) & (spread > _FLAT), out, 0.0)


def _trim(
    matrix: _Matrix,
    groups: np.ndarray,
    kept: np.ndarray,
    compared: list[int],
    min_group: int,
    max_smd: float,
    draws: np.ndarray,
) -> list[tuple[int, str]]:
    """Greedy trimming on fixed features: the rows removed, in order, each with the confound
    it was removed for. `kept` is updated in place."""
    removed: list[tuple[int, str]] = []
    pairs = list(combinations(compared, 2))
    while True:
        moments = {g: _moments(matrix.values, kept & (groups == g)) for g in compared}
        stats = {g: _mean_var(*moments[g]) for g in compared}
        current = np.stack([_smd(*stats[a], *stats[b]) for a, b in pairs]) if pairs else np.zeros((0, 0))
        if current.size == 0 or current.max() <= max_smd:
            return removed
        worst = matrix.confound_of[int(np.unravel_index(current.argmax(), current.shape)[1])]
        best: tuple[float, float, float, int] | None = None
        for g in compared:
            rows = np.flatnonzero(kept & (groups == g))
            if len(rows) <= min_group:
                continue
            n, s, q = moments[g]
            x = matrix.values[rows]
            valid = ~np.isnan(x)
            filled = np.where(valid, x, 0.0)
            # Every candidate of group g at once: its group's moments without it.
            loo = _mean_var(n - valid, s - filled, q - filled**2)
            scores = np.zeros((len(rows), len(pairs), current.shape[1]))
            for k, (a, b) in enumerate(pairs):
                if g == a:
                    scores[:, k] = _smd(*loo, *stats[b])
                elif g == b:
                    scores[:, k] = _smd(*stats[a], *loo)
                else:
                    scores[:, k] = current[k]
            flat = scores.reshape(len(rows), -1)
            largest, squares = flat.max(1), (flat**2).sum(1)
            pick = int(np.lexsort((draws[rows], squares, largest))[0])
            candidate = (float(largest[pick]), float(squares[pick]), float(draws[rows[pick]]), int(rows[pick]))
            if best is None or candidate < best:
                best = candidate
        if best is None:
            return removed
        if best[:2] > (float(current.max()), float((current**2).sum())):
            return removed  # every removal makes it worse
        kept[best[3]] = False
        removed.append((best[3], worst))


def _largest(found: dict, confounds: list[Confound]) -> dict[str, float]:
    """The largest |SMD| per confound (question types together) over the compared pairs."""
    out: dict[str, float] = {}
    for entry in found["smd"]:
        name = entry["feature"] if entry["feature"] in FEATURES else "question_type"
        if name in confounds and entry["smd"] is not None:
            out[name] = round(max(out.get(name, 0.0), abs(entry["smd"])), 4)
    return out


@register_stage
class BalanceConfounds(QueryFilter):
    """Remove queries until every confound's SMD between position groups is at most max_smd."""

    name = "balance_confounds"
    needs = frozenset({QUERIES, SPANS})
    Params = BalanceConfoundsParams
    params: BalanceConfoundsParams
    reports_thirds = False  # it evens the groups out on purpose
    removes_by_design = True

    def needed(self) -> frozenset[str]:
        return self.needs | {COLUMN_PROVIDED_AS[self.params.column]}

    def judge(self, bench: Bench, ctx: StageContext, verdicts: Verdicts) -> None:
        p = self.params
        texts = dict(bench.corpus.select("doc_id", "text").iter_rows())
        queries = bench.queries
        if p.column not in queries.columns:
            verdicts.drop_all(queries["query_id"].to_list(), "no_category")
            return
        labels = queries.select("query_id", pl.col(p.column).cast(pl.Utf8).alias("_group"))
        removed: list[str] = []
        before = None
        while True:
            kept_queries = queries.filter(~pl.col("query_id").is_in(removed))
            features = span_features(kept_queries, texts)
            if features is None:
                ctx.stats["confounds_balanced"] = "no query has an evidence span"
                return
            # Queries outside every group are not compared, as in the stats: they stay (a left
            # join keeps the queries' order, and with it the order of the drops).
            features = features.join(labels, on="query_id", how="left").filter(pl.col("_group").is_not_null())
            tags = features["_group"]
            found = describe(features.drop("_group"), tags, p.min_group, p.column)
            before = before or found
            matrix = _Matrix(features, p.confounds)
            names = sorted(set(tags.to_list()))
            groups = np.array([names.index(t) for t in tags.to_list()])
            compared = [names.index(g) for g in found["compared_groups"]]
            draws = np.array([ctx.item_rng(q).random() for q in matrix.ids])
            kept = np.ones(len(matrix.ids), dtype=bool)
            step = _trim(matrix, groups, kept, compared, p.min_group, p.max_smd, draws)
            for row, confound in step:
                verdicts.drop(matrix.ids[row], f"{REASON}:{confound}")
                removed.append(matrix.ids[row])
            if not step:
                break
        after = _largest(found, p.confounds)
        reached = all(v <= p.max_smd for v in after.values())
        ctx.stats["confounds_balanced"] = {
            "column": p.column,
            "max_smd": p.max_smd,
            "min_group": p.min_group,
            "compared_groups": found["compared_groups"],
            "method": "greedy trimming",
            "largest_smd_before": _largest(before, p.confounds),
            "largest_smd_after": after,
            "removed": len(removed),
            "reached": reached,
            "group_sizes": {g["group"]: g["n"] for g in found["groups"]},
        }
        if not reached:
            above = ", ".join(f"{k} {v:.3f}" for k, v in after.items() if v > p.max_smd)
            ctx.warnings.append(
                f"balance_confounds: {p.column} groups still differ by more than SMD {p.max_smd} "
                f"in {above}: no removal improves it without trimming a group below {p.min_group}"
            )
