"""What each position group (beginning, middle, end third) cost: every LLM stage's usage
shared among the groups of the queries it handled, then divided by the queries each
group kept.

A query's group is where its evidence lies once localized (position_tag, rel_pos or
chunk_tag), else the region its generation asked for (requested_position). A stage
records how many queries of each group it handled (its input and what it made and
kept); its calls, tokens and money are shared in those proportions. A stage that
handled no grouped query (summaries made before any question) serves every kept
query alike, so its share follows the kept counts. Queries made and dropped in the
same stage are out of sight by then: the groups of those that survived carry their
cost, so the figures are an attribution, not a per-request account.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from builder.bench import Bench
from builder.textutil.positions import REGION_OF_NAME, REGIONS, third_of

GROUPS = REGIONS
SPENT_FIELDS = ("calls", "prompt_tokens", "completion_tokens", "cached_tokens", "usd")


def _group_column(q: pl.DataFrame) -> pl.Expr:
    found: list[pl.Expr] = []
    if "position_tag" in q.columns:
        found.append(pl.col("position_tag").cast(pl.Utf8))
    if "rel_pos" in q.columns:
        found.append(pl.col("rel_pos").cast(pl.Float64).map_elements(third_of, return_dtype=pl.Utf8))
    if "chunk_tag" in q.columns:
        found.append(pl.col("chunk_tag").cast(pl.Utf8))
    if "requested_position" in q.columns:
        found.append(pl.col("requested_position").cast(pl.Utf8).replace_strict(REGION_OF_NAME, default=None))
    return pl.coalesce(found) if found else pl.lit(None, pl.Utf8)


def asked_by_group(before: Bench, after: Bench) -> dict[str, int]:
    """Queries a stage handled per group: those it was given and those it made and kept,
    each in the group it has after the stage if it survived, else before."""
    frames = [
        b.queries.select("query_id", _group_column(b.queries).alias("group"))
        for b in (after, before)
        if b.queries.height
    ]
    if not frames:
        return dict.fromkeys(GROUPS, 0)
    rows = pl.concat(frames).unique("query_id", keep="first", maintain_order=True)
    counts = dict(rows.group_by("group").len().iter_rows())
    return {g: int(counts.get(g, 0)) for g in GROUPS}


def round_spent(field: str, value: float | None) -> float | None:
    return None if value is None else round(value, 6 if field == "usd" else 2)


def group_ledger(
    rows: Sequence[Mapping[str, Any]], asked: Sequence[Mapping[str, int] | None], kept: Mapping[str, int]
) -> dict[str, Any]:
    """Per group: queries kept, the LLM usage attributed to it and that per kept query.
    `rows` are the stages' usage rows (SPENT_FIELDS; usd None when unpriced), `asked`
    each stage's `asked_by_group`, `kept` the final queries per group."""
    spent: dict[str, dict[str, float | None]] = {g: dict.fromkeys(SPENT_FIELDS, 0.0) for g in GROUPS}
    for row, counts in zip(rows, asked):
        weights = {g: (counts or {}).get(g, 0) for g in GROUPS}
        if not sum(weights.values()):
            weights = {g: kept.get(g, 0) for g in GROUPS}
        total = sum(weights.values())
        for g in GROUPS:
            share = weights[g] / total if total else 1 / len(GROUPS)
            for f in SPENT_FIELDS:
                have, add = spent[g][f], row.get(f)
                spent[g][f] = None if have is None or add is None else have + add * share
    out: dict[str, Any] = {}
    for g in GROUPS:
        n = kept.get(g, 0)
        out[g] = {
            "kept": n,
            "spent": {f: round_spent(f, v) for f, v in spent[g].items()},
            "per_kept_query": {f: round_spent(f, None if v is None else v / n) for f, v in spent[g].items()}
            if n
            else None,
        }
    return out
