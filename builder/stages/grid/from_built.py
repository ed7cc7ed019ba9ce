"""Read a build-bench output folder back into the bench, spans and all, as a grid's input."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
from pydantic import Field

from builder.io.bench_rows import add_rows, input_path
from builder.io.table_check import TableError, check_built_folder
from builder.stages.base import Stage, StageParamError, StageParams, register_stage
from builder.stages.contracts import DOCUMENTS, QUERIES, SPANS
from builder.stages.refs import DataPath

BUILT_FROM = "built_from"  # the folder a document was read from

if TYPE_CHECKING:
    from builder.bench import Bench
    from builder.stages.context import StageContext


class FromBuiltParams(StageParams):
    path: DataPath = Field(
        description="a folder build-bench wrote (corpus, queries and qrels .parquet), "
        "whose queries carry spans, e.g. out/quickstart"
    )


@register_stage
class FromBuilt(Stage):
    """Load a built benchmark folder (documents, queries with their spans, qrels)."""

    name = "from_built"
    needs = frozenset()
    provides = frozenset({DOCUMENTS, QUERIES, SPANS})
    Params = FromBuiltParams
    params: FromBuiltParams

    def problems(self, recipe: Any) -> list[tuple[str, str]]:
        # The recipe's sources are loaded before any stage runs: beside a built folder they
        # would become padding unasked (or clash with its ids).
        if getattr(recipe, "sources", None):
            return [
                (
                    "path",
                    "from_built reads its documents from the built folder, but the recipe's "
                    "`sources:` would be loaded beside them and pad the grid: set `sources: []` "
                    "(to pad from another corpus, name it in depth_grid's `padding:`)",
                )
            ]
        return []

    def run(self, bench: Bench, ctx: StageContext) -> Bench:
        from builder.io.built_folder import BuiltFolder

        folder = Path(input_path(self.params.path, ctx.base_dir))
        try:
            check_built_folder(folder)
        except TableError as exc:
            raise StageParamError("path", f"{folder} is not a build-bench output folder: {exc}") from None
        reader = BuiltFolder.open(folder)
        built = reader.read_bench()
        queries = built.queries
        if "spans" not in queries.columns or queries["spans"].list.len().fill_null(0).sum() == 0:
            raise StageParamError(
                "path",
                f"{reader.path('queries')} has no spans: build the folder with "
                "a localize_spans stage (or a recipe that writes spans)",
            )
        ctx.stats["read"] = {"folder": str(folder), "docs": built.corpus.height, "queries": queries.height}
        # A later grid names where its padding came from by this column.
        corpus = built.corpus.with_columns(pl.lit(str(self.params.path)).alias(BUILT_FROM))
        return add_rows(bench, ctx.label, corpus=corpus, queries=queries, qrels=built.qrels)
