"""`balance`: downsample every position category to the smallest (FineWeb-PosQ)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from builder.stages.base import QueryFilter, StageParams, Verdicts, register_stage
from builder.stages.categories import CategoryColumn, pick_per_category
from builder.stages.contracts import COLUMN_PROVIDED_AS, QUERIES

if TYPE_CHECKING:
    from builder.bench import Bench
    from builder.stages.context import StageContext


class BalanceParams(StageParams):
    column: CategoryColumn = Field(default="position_tag", description="query column holding the category")


@register_stage
class Balance(QueryFilter):
    """Downsample every category to the size of the smallest one."""

    name = "balance"
    needs = frozenset({QUERIES})
    Params = BalanceParams
    params: BalanceParams
    reports_thirds = False  # it evens the categories out on purpose
    removes_by_design = True

    def needed(self) -> frozenset[str]:
        return self.needs | {COLUMN_PROVIDED_AS[self.params.column]}

    def judge(self, bench: Bench, ctx: StageContext, verdicts: Verdicts) -> None:
        pick_per_category(bench, ctx, self.params.column, None, "balanced_out", verdicts)
