"""Where a query's evidence sits in its source file: the page, heading or paragraph its spans
fall in, read from the document's location map."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from builder.util.lazy import lazy_import

if TYPE_CHECKING:
    import polars as pl
else:
    pl = lazy_import("polars")

# Query columns derived from the location map (added only when the corpus has one).
LOCATION_COLUMNS = ("evidence_location", "evidence_page")


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


def evidence_location(
    spans: Sequence[dict[str, Any]] | None, locations: Sequence[dict[str, Any]] | None
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
    return queries.with_columns(
        pl.Series("evidence_location", labels, dtype=pl.Utf8), pl.Series("evidence_page", pages, dtype=pl.Int64)
    )


def file_position_stats(queries: pl.DataFrame, corpus: pl.DataFrame) -> dict[str, Any]:
    """For the card, where the evidence of queries over documents from files sits: counts per
    kind of file, and for PDFs the position both as share of the text (rel_pos) and by page
    (the page's middle over the document's last page with text), by third and per page."""
    if "evidence_location" not in queries.columns or "source_kind" not in corpus.columns:
        return {}
    from builder.textutil.positions import third_of

    rows = queries.filter(pl.col("evidence_location").is_not_null()).join(
        corpus.select(
            "doc_id",
            "source_kind",
            pl.col("locations").list.eval(pl.element().struct.field("number")).list.max().alias("_last_page"),
        ),
        on="doc_id",
        how="inner",
    )
    if rows.is_empty():
        return {}
    by_kind = dict(sorted(rows.group_by("source_kind").len().iter_rows()))
    out: dict[str, Any] = {"n_queries": rows.height, "by_kind": by_kind}
    pdf = rows.filter(pl.col("evidence_page").is_not_null() & pl.col("rel_pos").is_not_null())
    if pdf.is_empty():
        return out
    page_share = [(page - 0.5) / last for page, last in pdf.select("evidence_page", "_last_page").iter_rows()]
    thirds = {t: {"text": 0, "pages": 0} for t in ("beginning", "middle", "end")}
    for rel, share in zip(pdf["rel_pos"].to_list(), page_share, strict=True):
        thirds[third_of(rel)]["text"] += 1
        thirds[third_of(share)]["pages"] += 1
    pages = dict(sorted(pdf.group_by("evidence_page").len().iter_rows()))
    out["pdf"] = {
        "n_queries": pdf.height,
        "mean_share_of_text": round(cast(float, pdf["rel_pos"].mean()), 3),
        "mean_share_of_pages": round(sum(page_share) / len(page_share), 3),
        "thirds": thirds,
        "pages": {str(p): n for p, n in pages.items()},
    }
    return out
