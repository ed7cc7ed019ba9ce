"""Load a BEIR folder (corpus, queries, qrels) into the bench, e.g. as FarRelevant's input."""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl
from pydantic import Field

from builder.io.beir_input import read_beir_input
from builder.io.bench_rows import add_rows, input_path
from builder.stages.base import Stage, StageParams, register_stage
from builder.stages.contracts import DOCUMENTS, QUERIES
from builder.stages.refs import DataPath
from builder.util.license_field import license_field

if TYPE_CHECKING:
    from builder.bench import Bench
    from builder.stages.context import StageContext


class FromBEIRParams(StageParams):
    path: DataPath = Field(
        description="BEIR folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv): "
        "local, hf://datasets/<repo>@<rev>/<folder>, or a zip URL#folder"
    )
    split: str = Field(default="test", description="the qrels file read: qrels/<split>.tsv")
    limit_queries: int | None = Field(default=None, ge=1, description="keep the first N queries that have qrels")
    lang: str = Field(default="en", description="language given to every document")
    domain: str = Field(default="general", description="domain given to every document")
    id_prefix: str = Field(default="", description="prepended to document and query ids")
    license: str | None = license_field()


@register_stage
class FromBEIR(Stage):
    """Load a BEIR folder into the bench; malformed rows are counted drops."""

    name = "from_beir"
    needs = frozenset()
    provides = frozenset({DOCUMENTS, QUERIES})
    Params = FromBEIRParams
    params: FromBEIRParams

    def run(self, bench: Bench, ctx: StageContext) -> Bench:
        p = self.params
        loaded = read_beir_input(input_path(p.path, ctx.base_dir), p.split, p.id_prefix, p.limit_queries)
        corpus = loaded.corpus.with_columns(
            pl.lit(p.lang).alias("lang"),
            pl.lit(p.domain).alias("domain"),
            pl.Series("n_tokens", ctx.tokenizer.count_many(loaded.corpus["text"].to_list()), pl.Int64),
        )
        queries = loaded.queries.with_columns(pl.lit(p.lang).alias("lang"))
        ctx.stats.update(loaded.stats)
        return add_rows(bench, ctx.label, corpus=corpus, queries=queries, qrels=loaded.qrels, rejected=loaded.rejected)
