"""What else differs between a build's position thirds: the confounds its PSI may measure.

The same figures as `eval` reports (builder/evaluation/confounds.py), taken on the built
tables: per third, the mean and spread of query–span word overlap, BM25 of the query
against its span alone, span and document length in words, and the question-type mix.
Thirds of at least `MIN_GROUP` queries (eval's default `--min-group`, so the build and
eval warn alike) are compared; a standardized mean difference above 0.2 is a warning.
Figures are rounded to 4 decimals so that stats.json reads the same on every machine.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from builder.evaluation.confounds import describe, span_features
from builder.evaluation.intervals import BootstrapSettings
from builder.records.stage_record import StageRecord

GROUPING = "position_tag"
MIN_GROUP = BootstrapSettings().min_group
PREFIX = "confound: "
# Stage figures that control a confound rather than report it: `balance_confounds`'s
# trimming, and generation's lexical-overlap check.
CONTROL_FIGURES = ("confounds_balanced", "lexical_overlap")


def position_confounds(
    queries: pl.DataFrame, corpus: pl.DataFrame, tags: pl.Series, min_group: int = MIN_GROUP
) -> dict[str, Any] | None:
    """The confounds of the thirds `tags` (one label per row of `queries`); None where no
    query has an evidence span."""
    texts = dict(corpus.select("doc_id", "text").iter_rows())
    features = span_features(queries, texts)
    if features is None:
        return None
    labels = features.join(queries.select("query_id", tags.alias("_tag")), on="query_id", how="left")["_tag"]
    found = describe(features, labels, min_group, GROUPING)
    return {
        "grouping": GROUPING,
        "min_group": min_group,
        "groups": _rounded(found["groups"]),
        "compared_groups": found["compared_groups"],
        "smd": _rounded(found["smd"]),
        "warnings": [PREFIX + line for line in found["warnings"]],
    }


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def confound_controls(stages: list[StageRecord]) -> dict[str, dict[str, Any]]:
    """Per stage that controlled a confound, its figures (CONTROL_FIGURES) by name."""
    out: dict[str, dict[str, Any]] = {}
    for record in stages:
        found = {k: record.figures[k] for k in CONTROL_FIGURES if isinstance(record.figures.get(k), dict)}
        if found:
            out[record.stage] = found
    return out
