"""Where a query's evidence sits in its source file: the page, heading or paragraph its spans
fall in, read from the document's location map."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

# Query columns derived from the location map (added only when the corpus has one).
LOCATION_COLUMNS = {"evidence_location": pl.Utf8, "evidence_page": pl.Int64}


def _touched(start: int, end: int, locations: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The locations a span overlaps; a span inside the blank line between two pieces (it
    cannot hold evidence) is given the piece after it."""
    hit = [loc for loc in locations if loc["start"] < max(end, start + 1) and start < loc["end"]]
    if hit:
        return hit
    after = [loc for loc in locations if loc["start"] >= start]
    return after[:1]


def _pages(numbers: list[int]) -> str:
    runs: list[list[int]] = []
    for n in sorted(set(numbers)):
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    text = ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)
    return ("page " if len(numbers) == 1 or len(set(numbers)) == 1 else "pages ") + text


def evidence_location(spans: Sequence[dict[str, Any]] | None, locations: Sequence[dict[str, Any]] | None
                      ) -> tuple[str | None, int | None]:
    """(a label such as "page 3", "pages 3-4", "Setup > Linux" or "paragraph 7", the page the
    first span starts on for a PDF) for a query's spans; (None, None) without spans or map."""
    if not spans or not locations:
        return None, None
    ordered = sorted(locations, key=lambda loc: loc["start"])
    touched: list[dict[str, Any]] = []
    for span in spans:
        for loc in _touched(span["start"], span["end"], ordered):
            if loc not in touched:
                touched.append(loc)
    if not touched:
        return None, None
    if all(loc["kind"] == "page" for loc in touched):
        first = _touched(spans[0]["start"], spans[0]["end"], ordered)
        return _pages([loc["number"] for loc in touched]), (first[0]["number"] if first else None)
    return " | ".join(loc["label"] for loc in touched), None


def add_evidence_locations(queries: pl.DataFrame, corpus: pl.DataFrame) -> pl.DataFrame:
    """`evidence_location` and `evidence_page` for queries with spans, when the corpus carries
    a location map (documents from files); the queries unchanged otherwise."""
    queries = queries.drop([c for c in LOCATION_COLUMNS if c in queries.columns])
    if "locations" not in corpus.columns or "spans" not in queries.columns:
        return queries
    maps = dict(corpus.select("doc_id", "locations").iter_rows())
    labels, pages = [], []
    for doc_id, spans in queries.select("doc_id", "spans").iter_rows():
        label, page = evidence_location(spans, maps.get(doc_id))
        labels.append(label)
        pages.append(page)
    return queries.with_columns(pl.Series("evidence_location", labels, dtype=pl.Utf8),
                                pl.Series("evidence_page", pages, dtype=pl.Int64))
