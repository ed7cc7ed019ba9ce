"""Adding freshly loaded rows to a Bench, for stages that read their own input files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import polars as pl

from builder.bench import Bench
from builder.io.remote import fetch_input
from builder.io.sources import SourceError

# (kind, id, reason): an input row that never entered the bench, e.g. a malformed line.
Rejected = tuple[str, str, str]


def input_path(path: str, base_dir: Path | None) -> Path:
    """A stage's input: a local path (the working directory, then the recipe's folder), or a
    public one (`hf://datasets/...`, `https://...`) fetched into the Hugging Face caches."""
    return fetch_input(path, base_dir)


def _check_new_ids(old: pl.Series, new: pl.Series, what: str) -> None:
    clash = new.filter(new.is_in(old.implode()))
    if clash.len():
        raise SourceError(
            f"{clash.len()} new {what} ids already exist in the bench (e.g. {clash[0]!r}); set a distinct id_prefix"
        )


def _stack(old: pl.DataFrame, new: pl.DataFrame | None) -> pl.DataFrame:
    if new is None or new.is_empty():
        return old
    return pl.concat([old, new], how="diagonal_relaxed")


def add_rows(
    bench: Bench,
    label: str,
    *,
    corpus: pl.DataFrame | None = None,
    queries: pl.DataFrame | None = None,
    qrels: pl.DataFrame | None = None,
    rejected: Sequence[Rejected] = (),
) -> Bench:
    """Append new corpus/query/qrel rows; `rejected` input rows become drop records."""
    if corpus is not None:
        _check_new_ids(bench.corpus["doc_id"], corpus["doc_id"], "document")
    if queries is not None:
        _check_new_ids(bench.queries["query_id"], queries["query_id"], "query")
    drops = pl.DataFrame(
        [(label, kind, row_id, reason) for kind, row_id, reason in rejected],
        schema={"stage": pl.Utf8, "kind": pl.Utf8, "id": pl.Utf8, "reason": pl.Utf8},
        orient="row",
    )
    return Bench.of(
        corpus=_stack(bench.corpus, Bench.of(corpus=corpus).corpus if corpus is not None else None),
        queries=_stack(bench.queries, Bench.of(queries=queries).queries if queries is not None else None),
        qrels=_stack(bench.qrels, Bench.of(qrels=qrels).qrels if qrels is not None else None),
        drops=_stack(bench.drops, drops),
    )
