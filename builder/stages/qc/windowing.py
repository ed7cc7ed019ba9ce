"""What QC stages share about scorer windows.

`beyond_window` (a stage param): `window` (default) scores long texts window by window
(see backends/rerankers/windows.py); `drop` removes, before scoring, queries whose span
ends past what a scorer reads in one input, as `span_beyond_window:<scorer>`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from builder.backends.rerankers.windows import budget_of, reads_up_to

if TYPE_CHECKING:
    from builder.bench import Bench

BeyondWindow = Literal["window", "drop"]


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
