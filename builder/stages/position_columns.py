"""Derive every position field of a query from its spans and its positive document."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from builder.backends.tokenizers import TokenCounter
from builder.io.files.locate import add_evidence_locations
from builder.textutil.positions import length_bucket, position_bin, rel_pos, third_of
from builder.util.lazy import lazy_import

if TYPE_CHECKING:
    import polars as pl
else:
    pl = lazy_import("polars")

POSITION_COLUMNS = (
    "rel_pos",
    "position_bin",
    "position_tag",
    "length_bucket",
    "pos_char_span",
    "pos_char_length",
    "pos_token_length",
    "pos_tokenizer",
)

# Query columns any one of which places a query in its document: spans and the fields
# measured from them, SQuAD-PosQ's answer-start bucket, FineWeb-PosQ's chunk third.
PLACING_COLUMNS = ("spans", "rel_pos", "position_tag", "position_bin", "char_bucket", "chunk_tag")


def placed_queries(queries: pl.DataFrame) -> int:
    """How many queries have a position: a non-empty `spans` or any other placing column set."""
    present = [c for c in PLACING_COLUMNS if c in queries.columns]
    if not present:
        return 0
    placed = [pl.col(c).list.len().fill_null(0) > 0 if c == "spans" else pl.col(c).is_not_null() for c in present]
    return int(queries.select(pl.any_horizontal(placed).sum()).item())


class PositionOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    anchor: Literal["start", "midpoint"] = Field(
        default="start", description="rel_pos from the mean span start, or the mean midpoint (PosIR eval)"
    )
    n_bins: int = Field(default=20, ge=1, description="equal position bins over the document (position_bin)")
    length_edges: list[int] = Field(default=[512, 1024, 1536], description="Q1..Q4 bucket edges in tokens")


def annotate_positions(
    queries: pl.DataFrame, corpus: pl.DataFrame, tokenizer: TokenCounter, options: PositionOptions
) -> pl.DataFrame:
    """Add POSITION_COLUMNS to queries that have `spans`; the document's text and token
    count come from the corpus (token counts are those of the recipe tokenizer)."""
    docs = corpus.select("doc_id", pl.col("text").alias("_doc_text"), pl.col("n_tokens").alias("_doc_tokens"))
    joined = queries.drop([c for c in POSITION_COLUMNS if c in queries.columns]).join(docs, on="doc_id", how="left")
    rows = joined.select("spans", "_doc_text", "_doc_tokens").iter_rows()
    fields: dict[str, list] = {c: [] for c in POSITION_COLUMNS}
    for spans, text, n_tokens in rows:
        for name, value in _fields(spans, text, n_tokens, tokenizer.name, options).items():
            fields[name].append(value)
    annotated = joined.drop("_doc_text", "_doc_tokens").with_columns(
        pl.Series("rel_pos", fields["rel_pos"], dtype=pl.Float64),
        pl.Series("position_bin", fields["position_bin"], dtype=pl.Int64),
        pl.Series("position_tag", fields["position_tag"], dtype=pl.Utf8),
        pl.Series("length_bucket", fields["length_bucket"], dtype=pl.Utf8),
        pl.Series("pos_char_span", fields["pos_char_span"], dtype=pl.List(pl.List(pl.Int64))),
        pl.Series("pos_char_length", fields["pos_char_length"], dtype=pl.Int64),
        pl.Series("pos_token_length", fields["pos_token_length"], dtype=pl.Int64),
        pl.Series("pos_tokenizer", fields["pos_tokenizer"], dtype=pl.Utf8),
    )
    # Documents read from files also say on which page (heading, paragraph) the evidence sits.
    return add_evidence_locations(annotated, corpus)


def _fields(
    spans: Sequence[dict] | None, text: str | None, n_tokens: int | None, tokenizer_name: str, options: PositionOptions
) -> dict[str, object]:
    if not spans or not text:
        return dict.fromkeys(POSITION_COLUMNS)
    pairs = [(s["start"], s["end"]) for s in spans]
    rel = rel_pos(pairs, len(text), options.anchor)
    return {
        "rel_pos": rel,
        "position_bin": position_bin(rel, options.n_bins),
        "position_tag": third_of(rel),
        "length_bucket": length_bucket(n_tokens or 0, options.length_edges),
        "pos_char_span": [list(p) for p in pairs],
        "pos_char_length": len(text),
        "pos_token_length": n_tokens,
        "pos_tokenizer": tokenizer_name,
    }
