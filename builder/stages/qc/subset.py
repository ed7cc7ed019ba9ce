"""`subset`: keep N queries per position category (the Tiny versions)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from builder.stages.base import Estimate, Flow, QueryFilter, StageParams, Verdicts, register_stage
from builder.stages.categories import TYPICAL_CATEGORIES, CategoryColumn, pick_per_category
from builder.stages.contracts import COLUMN_PROVIDED_AS, QUERIES

if TYPE_CHECKING:
    from builder.bench import Bench
    from builder.stages.context import StageContext


class SubsetParams(StageParams):
    column: CategoryColumn = Field(default="position_tag", description="query column holding the category")
    per_category: int = Field(ge=1, description="queries kept per category (all, where fewer exist)")


@register_stage
class Subset(QueryFilter):
    """Keep N queries per category (a Tiny version); the corpus stays whole."""

    name = "subset"
    needs = frozenset({QUERIES})
    Params = SubsetParams
    params: SubsetParams
    reports_thirds = False  # it keeps the same number per category on purpose
    removes_by_design = True

    def needed(self) -> frozenset[str]:
        return self.needs | {COLUMN_PROVIDED_AS[self.params.column]}

    def judge(self, bench: Bench, ctx: StageContext, verdicts: Verdicts) -> None:
        pick_per_category(bench, ctx, self.params.column, self.params.per_category, "not_in_subset", verdicts)

    def plan(self, flow: Flow) -> tuple[Flow, Estimate]:
        n = TYPICAL_CATEGORIES[self.params.column] * self.params.per_category
        return Flow(flow.docs, min(flow.queries, n), flow.doc_tokens), Estimate()
