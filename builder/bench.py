"""The Bench: corpus, queries, qrels and drops as polars tables.

Every removal goes through `drop_docs` / `drop_queries`, which record a reason and
cascade (document -> its queries -> their qrels), so nothing disappears silently. A
removal that another document caused (a false negative found in it) also records that
document in the drop log's optional `rivals` column: a grown release's diff reads it to
tell removals caused by new documents from the others.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from builder.textutil.positions import REGION_OF_NAME
from builder.util.atomic import replace_dir, temp_dir_beside

CORPUS_SCHEMA: dict[str, pl.DataType] = {
    "doc_id": pl.Utf8(),
    "title": pl.Utf8(),
    "text": pl.Utf8(),
    "lang": pl.Utf8(),
    "domain": pl.Utf8(),
    "n_tokens": pl.Int64(),
}
QUERY_SCHEMA: dict[str, pl.DataType] = {
    "query_id": pl.Utf8(),
    "text": pl.Utf8(),
    "doc_id": pl.Utf8(),
    "lang": pl.Utf8(),
}
QREL_SCHEMA: dict[str, pl.DataType] = {
    "query_id": pl.Utf8(),
    "doc_id": pl.Utf8(),
    "score": pl.Int64(),
}
DROP_SCHEMA: dict[str, pl.DataType] = {
    "stage": pl.Utf8(),
    "kind": pl.Utf8(),
    "id": pl.Utf8(),
    "reason": pl.Utf8(),
}
SPAN_DTYPE = pl.List(pl.Struct({"start": pl.Int64, "end": pl.Int64, "method": pl.Utf8, "score": pl.Float64}))

Reasons = Mapping[str, str] | pl.DataFrame


def _conform(df: pl.DataFrame | None, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """Give a table at least the required columns, with the required types, in front."""
    if df is None:
        return pl.DataFrame(schema=schema)
    missing = [pl.lit(None, dtype=t).alias(c) for c, t in schema.items() if c not in df.columns]
    if missing:
        df = df.with_columns(missing)
    casts = [pl.col(c).cast(t) for c, t in schema.items() if df.schema[c] != t]
    if casts:
        df = df.with_columns(casts)
    rest = [c for c in df.columns if c not in schema]
    return df.select([*schema, *rest])


def canonical_positions(queries: pl.DataFrame) -> pl.DataFrame:
    """Queries read back from disk, with `requested_position` in beginning / middle / end:
    older releases wrote it in the prompt's words (first / middle / final)."""
    if "requested_position" not in queries.columns:
        return queries
    return queries.with_columns(pl.col("requested_position").cast(pl.Utf8).replace(REGION_OF_NAME))


RIVALS_DTYPE = pl.List(pl.Utf8)


# A failed LLM request's drop reason may go on with its cause (`llm_failed: HTML page
# instead of JSON`); the log keeps `llm_failed` as the reason, so failures count together,
# and the rest in a `cause` column.
_CAUSED = "llm_failed: "


def _reason_frame(reasons: Reasons) -> pl.DataFrame:
    if isinstance(reasons, pl.DataFrame):
        extra = [pl.col("rivals").cast(RIVALS_DTYPE)] if "rivals" in reasons.columns else []
        extra += [pl.col("cause").cast(pl.Utf8)] if "cause" in reasons.columns else []
        frame = reasons.select(pl.col("id").cast(pl.Utf8), pl.col("reason").cast(pl.Utf8), *extra)
    else:
        frame = pl.DataFrame(
            {"id": list(reasons.keys()), "reason": list(reasons.values())},
            schema={"id": pl.Utf8, "reason": pl.Utf8},
        )
    if "cause" in frame.columns or not frame["reason"].str.contains(_CAUSED, literal=True).any():
        return frame
    at = pl.col("reason").str.find(_CAUSED, literal=True)
    return frame.with_columns(
        pl.when(at.is_null())
        .then(pl.col("reason"))
        .otherwise(pl.col("reason").str.slice(0, at + len(_CAUSED) - 2))
        .alias("reason"),
        pl.when(at.is_null()).then(None).otherwise(pl.col("reason").str.slice(at + len(_CAUSED))).alias("cause"),
    )


def _logged(log: pl.DataFrame, drops: pl.DataFrame) -> pl.DataFrame:
    """The drop log with `drops` appended; `rivals` appears once a drop has it (null elsewhere),
    so a log without it stays as it was."""
    return pl.concat([log, drops], how="diagonal_relaxed")


@dataclass(frozen=True)
class Bench:
    corpus: pl.DataFrame
    queries: pl.DataFrame
    qrels: pl.DataFrame
    drops: pl.DataFrame

    @classmethod
    def of(
        cls,
        corpus: pl.DataFrame | None = None,
        queries: pl.DataFrame | None = None,
        qrels: pl.DataFrame | None = None,
        drops: pl.DataFrame | None = None,
    ) -> Bench:
        return cls(
            _conform(corpus, CORPUS_SCHEMA),
            _conform(queries, QUERY_SCHEMA),
            _conform(qrels, QREL_SCHEMA),
            _conform(drops, DROP_SCHEMA),
        )

    def replace(self, **tables: pl.DataFrame) -> Bench:
        return Bench.of(**{**self._tables(), **tables})

    def _tables(self) -> dict[str, pl.DataFrame]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    # -- removals -------------------------------------------------------------

    def drop_docs(self, reasons: Reasons, stage: str) -> Bench:
        """Remove documents; their queries are dropped as `doc_removed:<reason>`."""
        frame = _reason_frame(reasons).filter(pl.col("id").is_in(self.corpus["doc_id"].implode()))
        if frame.is_empty():
            return self
        rivals = [pl.col(c) for c in ("rivals", "cause") if c in frame.columns]
        drops = frame.select(pl.lit(stage).alias("stage"), pl.lit("doc").alias("kind"), "id", "reason", *rivals)
        bench = self.replace(
            corpus=self.corpus.filter(~pl.col("doc_id").is_in(frame["id"].implode())),
            drops=_logged(self.drops, drops),
        )
        orphans = self.queries.join(frame, left_on="doc_id", right_on="id", how="inner").select(
            pl.col("query_id").alias("id"), ("doc_removed:" + pl.col("reason")).alias("reason"), *rivals
        )
        bench = bench.drop_queries(orphans, stage)
        return bench._prune_qrels(stage)

    def drop_queries(self, reasons: Reasons, stage: str) -> Bench:
        """Remove queries and their qrels."""
        frame = (
            _reason_frame(reasons)
            .filter(pl.col("id").is_in(self.queries["query_id"].implode()))
            .unique("id", keep="first", maintain_order=True)
        )
        if frame.is_empty():
            return self
        ids = frame["id"].implode()
        rivals = [pl.col(c) for c in ("rivals", "cause") if c in frame.columns]
        drops = frame.select(pl.lit(stage).alias("stage"), pl.lit("query").alias("kind"), "id", "reason", *rivals)
        return self.replace(
            queries=self.queries.filter(~pl.col("query_id").is_in(ids)),
            qrels=self.qrels.filter(~pl.col("query_id").is_in(ids)),
            drops=_logged(self.drops, drops),
        )

    def _prune_qrels(self, stage: str) -> Bench:
        """Drop qrels whose document is gone; queries left with no qrels at all go too."""
        live = self.qrels.filter(pl.col("doc_id").is_in(self.corpus["doc_id"].implode()))
        if live.height == self.qrels.height:
            return self
        had = self.qrels["query_id"].unique()
        still = live["query_id"].unique()
        lost = had.filter(~had.is_in(still.implode()))
        bench = self.replace(qrels=live)
        return bench.drop_queries({q: "no_relevant_doc_left" for q in lost.to_list()}, stage)

    def keep_docs(self, reasons: pl.Series, stage: str) -> Bench:
        """Row-aligned filter: `reasons[i]` is None to keep corpus row i, else why it goes."""
        frame = pl.DataFrame({"id": self.corpus["doc_id"], "reason": reasons.cast(pl.Utf8)})
        return self.drop_docs(frame.drop_nulls("reason"), stage)

    def keep_queries(self, reasons: pl.Series, stage: str) -> Bench:
        """Row-aligned filter over queries, like `keep_docs`."""
        frame = pl.DataFrame({"id": self.queries["query_id"], "reason": reasons.cast(pl.Utf8)})
        return self.drop_queries(frame.drop_nulls("reason"), stage)

    # -- persistence ----------------------------------------------------------

    def save(self, directory: Path) -> None:
        """Write the four tables as parquet; the folder appears whole or not at all."""
        directory = Path(directory)
        tmp = temp_dir_beside(directory)
        try:
            self.write_tables(tmp)
            replace_dir(tmp, directory)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def write_tables(self, folder: Path) -> list[str]:
        """Write the four tables as parquet into an existing folder; returns the file names."""
        names = []
        for name, table in self._tables().items():
            table.write_parquet(Path(folder) / f"{name}.parquet")
            names.append(f"{name}.parquet")
        return names

    @classmethod
    def load(cls, directory: Path) -> Bench:
        directory = Path(directory)
        tables = {f.name: pl.read_parquet(directory / f"{f.name}.parquet") for f in dataclasses.fields(cls)}
        return cls.of(**{**tables, "queries": canonical_positions(tables["queries"])})

    def counts(self) -> dict[str, int]:
        return {"docs": self.corpus.height, "queries": self.queries.height, "qrels": self.qrels.height}
