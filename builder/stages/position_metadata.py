"""Recompute every position field from the queries' spans (after any stage that moves text)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from builder.stages.base import Stage, StageParams, register_stage
from builder.stages.contracts import POSITIONS, SPANS
from builder.stages.position_columns import PositionOptions, annotate_positions

if TYPE_CHECKING:
    from builder.bench import Bench
    from builder.stages.context import StageContext


class PositionMetadataParams(StageParams):
    positions: PositionOptions = Field(
        default=PositionOptions(), description=("how the position fields are computed from the spans")
    )


@register_stage
class PositionMetadata(Stage):
    """Fill rel_pos, position_bin, position_tag, length_bucket and PosIR's pos_* fields."""

    name = "position_metadata"
    needs = frozenset({SPANS})
    provides = frozenset({POSITIONS})
    Params = PositionMetadataParams
    params: PositionMetadataParams

    def run(self, bench: Bench, ctx: StageContext) -> Bench:
        if "spans" not in bench.queries.columns:
            ctx.stats["note"] = "no spans column: nothing to annotate"
            return bench
        queries = annotate_positions(bench.queries, bench.corpus, ctx.tokenizer, self.params.positions)
        return bench.replace(queries=queries)
