"""The runner's check on every stage: no row lost or invented without a recorded reason."""

from __future__ import annotations

from collections import Counter

import polars as pl

from builder.bench import Bench
from builder.records.stage_record import StageRecord
from builder.stages.base import Stage


class InvariantError(RuntimeError):
    """A stage lost or invented rows without recording why: a bug in that stage."""


def check_invariants(before: Bench, after: Bench, stage: Stage, label: str) -> StageRecord:
    """in + added == out + dropped, for documents and queries, where `added` counts every
    row the stage made, those it dropped again included (a generation call that failed is
    a query dropped at once); unique ids; qrels point at live rows."""
    counts: dict[str, int] = {}
    drops = after.drops.filter(pl.col("stage") == label)
    for kind, table, key in (("doc", "corpus", "doc_id"), ("query", "queries", "query_id")):
        ids_in = set(getattr(before, table)[key].to_list())
        out_col = getattr(after, table)[key]
        if out_col.n_unique() != out_col.len():
            raise InvariantError(f"{label}: duplicate {key} values in the output")
        ids_out = set(out_col.to_list())
        rows = drops.filter(pl.col("kind") == kind)["id"].to_list()
        dropped = set(rows)
        if len(dropped) != len(rows) or dropped & ids_out:
            twice = sorted({r for r in dropped if rows.count(r) > 1} | (dropped & ids_out))[:5]
            raise InvariantError(f"{label}: {table} rows dropped twice, or dropped and kept (e.g. {twice})")
        gone = ids_in - ids_out
        if table not in stage.rebuilds and gone != dropped & ids_in:
            lost = sorted(gone - dropped)[:5]
            raise InvariantError(
                f"{label}: {len(gone - dropped)} {table} rows vanished without a drop reason "
                f"(e.g. {lost}); a stage must record every removal"
            )
        name = "docs" if kind == "doc" else "queries"
        counts[f"{name}_in"] = len(ids_in)
        counts[f"{name}_out"] = len(ids_out)
        counts[f"{name}_added"] = len((ids_out | dropped) - ids_in)
        counts[f"{name}_dropped"] = len(dropped)
    live_q = set(after.queries["query_id"].to_list())
    live_d = set(after.corpus["doc_id"].to_list())
    bad = after.qrels.filter(~pl.col("query_id").is_in(list(live_q)) | ~pl.col("doc_id").is_in(list(live_d)))
    if bad.height:
        raise InvariantError(f"{label}: {bad.height} qrels point at removed queries or documents")
    return StageRecord(stage=label, **counts, dropped=dict(Counter(drops["reason"].to_list())))
