"""What QC stages share about scorer windows and positional skew.

`beyond_window` (a stage param): `window` (default) scores long texts window by window
(see backends/rerankers/windows.py); `drop` removes, before scoring, queries whose span
ends past what a scorer reads in one input, as `span_beyond_window:<scorer>`.
`kept_by_third` counts, per position third, how many queries a stage kept (the QC filter
base, `QueryFilter` in stages/base.py, records it for every QC stage), so a stage that
favours one part of the document shows in the run summary and the data card.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import polars as pl
from pydantic import Field

from builder.backends.rerankers.windows import budget_of, reads_up_to

if TYPE_CHECKING:
    from builder.bench import Bench

BeyondWindow = Literal["window", "drop"]
THIRDS = ("beginning", "middle", "end")


def beyond_window_field() -> Any:
    return Field(
        default="window",
        description=(
            "a text longer than a scorer's max_length: `window` scores overlapping windows and keeps "
            "the best; `drop` removes queries whose span ends past the first window "
            "(span_beyond_window:<scorer>)"
        ),
    )


def span_ends(bench: Bench) -> dict[str, int]:
    """Per query with spans: the end of its last span (characters into its document)."""
    if "spans" not in bench.queries.columns:
        return {}
    return {
        qid: max(s["end"] for s in spans)
        for qid, spans in bench.queries.select("query_id", "spans").iter_rows()
        if spans
    }


def beyond_window(reranker: Any, items: list[tuple[str, str, str, int]]) -> list[str]:
    """Ids of (query id, query, text, span end) items whose span the scorer cannot read in one input."""
    if budget_of(reranker) is None:
        return []
    out = []
    for qid, query, text, end in items:
        limit = reads_up_to(reranker, query, text)
        if limit is not None and end > limit:
            out.append(qid)
    return out


def kept_by_third(before: Bench, after: Bench) -> dict[str, dict[str, Any]]:
    """Per position third (position_tag, else chunk_tag): queries in, kept, kept share."""
    q = before.queries
    column = next((c for c in ("position_tag", "chunk_tag") if c in q.columns), None)
    if column is None:
        return {}
    kept = set(after.queries["query_id"].to_list())
    out: dict[str, dict[str, Any]] = {}
    for third in THIRDS:
        ids = q.filter(pl.col(column) == third)["query_id"].to_list()
        n_kept = sum(i in kept for i in ids)
        out[third] = {"in": len(ids), "kept": n_kept, "share": round(n_kept / len(ids), 3) if ids else None}
    return out


def format_kept_by_third(kept: dict[str, dict[str, Any]] | None) -> str:
    """`beginning 6/6 (100%) · middle 6/6 (100%) · end 0/6 (0%)`; empty when not recorded."""
    if not kept:
        return ""
    cells = []
    for third in THIRDS:
        row = kept.get(third) or {}
        if row.get("in"):
            cells.append(f"{third} {row['kept']}/{row['in']} ({round(100 * row['kept'] / row['in'])}%)")
    return " · ".join(cells)
