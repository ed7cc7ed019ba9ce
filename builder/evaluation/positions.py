"""Two definitions of where a query's evidence sits, selectable in `eval`, and the anchor.

- `native`: build-bench's own fields: `rel_pos` is the mean anchor of the query's spans
  over the document's characters (the dataset's own `rel_pos` where a query has no
  spans), 20 bins closed on the left (bin k holds k/20 <= r < (k+1)/20), the dataset's
  `length_bucket`. Default anchor: the span start.
- `posir`: PosIR's analysis. The anchor of the evidence span (`pos_char_span`, one
  `[start, end]` pair; the first span where a query has several) over the document's
  character length; 20 bins closed on the right, the first including 0 (bin 0 holds
  0 <= r <= 1/20, bin k holds k/20 < r <= (k+1)/20); length buckets by the document's
  token count, [0, 512], (512, 1024], (1024, 1536], (1536, inf). Default anchor: the
  span midpoint, as PosIR's script takes it. PSI is taken over the bins that hold
  queries, as in both definitions.

The anchor is `start` or `midpoint` of a span; `eval --anchor` overrides the default.
"""

from __future__ import annotations

import math
from typing import Literal

import polars as pl

from builder.textutil.positions import Anchor, length_bucket, position_bin

Definition = Literal["native", "posir"]
DEFINITIONS: tuple[Definition, ...] = ("native", "posir")
ANCHORS: tuple[Anchor, ...] = ("start", "midpoint")
DEFAULT_ANCHOR: dict[Definition, Anchor] = {"native": "start", "posir": "midpoint"}
POSIR_LENGTH_EDGES = (512, 1024, 1536)


def posir_bin(rel: float, n_bins: int = 20) -> int:
    """Bin of a relative position under PosIR's right-closed bins (0 goes to bin 0)."""
    if not 0.0 <= rel <= 1.0:
        raise ValueError(f"relative position must be within [0, 1], got {rel}")
    index = min(max(math.ceil(rel * n_bins) - 1, 0), n_bins - 1)
    # Guard against rel * n_bins rounding across a boundary.
    if index > 0 and rel <= index / n_bins:
        index -= 1
    elif index < n_bins - 1 and rel > (index + 1) / n_bins:
        index += 1
    return index


def bin_of(definition: Definition, rel: float, n_bins: int = 20) -> int:
    clamped = min(max(rel, 0.0), 1.0)
    return posir_bin(clamped, n_bins) if definition == "posir" else position_bin(clamped, n_bins)


def _first_pair(queries: pl.DataFrame) -> pl.Expr | None:
    """The evidence span as a `[start, end]` list: PosIR's `pos_char_span`, the first pair
    of our list of pairs, or the first of `spans`; None where the query has no span."""
    pos = queries.schema.get("pos_char_span")
    if isinstance(pos, pl.List) and isinstance(pos.inner, pl.List):
        return pl.col("pos_char_span").list.first()
    if isinstance(pos, pl.List) and pos.inner.is_integer():
        return pl.col("pos_char_span")
    spans = queries.schema.get("spans")
    if isinstance(spans, pl.List) and isinstance(spans.inner, pl.Struct):
        first = pl.col("spans").list.first()
        return pl.concat_list(first.struct.field("start"), first.struct.field("end"))
    return None


def first_span(queries: pl.DataFrame) -> pl.Expr | None:
    """Each query's evidence span as `[start, end]` (the first where it has several)."""
    return _first_pair(queries)


def _anchor_of(start: pl.Expr, end: pl.Expr, anchor: Anchor) -> pl.Expr:
    return start.cast(pl.Float64) if anchor == "start" else (start + end) / 2


def apply_native(queries: pl.DataFrame, doc_chars: pl.Expr, anchor: Anchor, rebin: bool) -> pl.DataFrame:
    """`rel_pos` as the mean anchor of the query's spans; with `rebin`, also the dataset's
    `position_bin` (20 left-closed bins) from it. Queries without spans keep their values."""
    dtype = queries.schema.get("spans")
    if not (isinstance(dtype, pl.List) and isinstance(dtype.inner, pl.Struct)) or not {"start", "end"} <= {
        f.name for f in dtype.inner.fields
    }:
        return queries
    point = _anchor_of(pl.element().struct.field("start"), pl.element().struct.field("end"), anchor)
    rel = (pl.col("spans").list.eval(point).list.mean() / doc_chars).clip(0.0, 1.0)
    if "rel_pos" in queries.columns:
        rel = pl.coalesce(rel, pl.col("rel_pos"))
    queries = queries.with_columns(rel.alias("rel_pos"))
    if rebin and "position_bin" in queries.columns:
        binned = pl.col("rel_pos").map_elements(lambda r: bin_of("native", r), return_dtype=pl.Int64)
        queries = queries.with_columns(pl.coalesce(binned, pl.col("position_bin").cast(pl.Int64)).alias("position_bin"))
    return queries


def apply_posir(
    queries: pl.DataFrame, doc_chars: pl.Expr, doc_tokens: pl.Expr | None, anchor: Anchor = "midpoint"
) -> pl.DataFrame:
    """`rel_pos`, `position_bin` and `length_bucket` under PosIR's definitions, where the
    query carries what they need; other queries keep the dataset's values."""
    pair = _first_pair(queries)
    derived = []
    if pair is not None:
        point = _anchor_of(pair.list.get(0, null_on_oob=True), pair.list.get(1, null_on_oob=True), anchor)
        rel = (point / doc_chars).clip(0.0, 1.0)
        if "rel_pos" in queries.columns:
            rel = pl.coalesce(rel, pl.col("rel_pos"))
        derived.append(rel.alias("rel_pos"))
    if doc_tokens is not None:
        bucket = doc_tokens.map_elements(lambda n: length_bucket(int(n), POSIR_LENGTH_EDGES), return_dtype=pl.Utf8)
        if "length_bucket" in queries.columns:
            bucket = pl.coalesce(bucket, pl.col("length_bucket"))
        derived.append(bucket.alias("length_bucket"))
    queries = queries.with_columns(derived)
    if "rel_pos" in queries.columns:
        queries = queries.with_columns(
            pl.col("rel_pos").map_elements(lambda r: bin_of("posir", r), return_dtype=pl.Int64).alias("position_bin")
        )
    return queries
