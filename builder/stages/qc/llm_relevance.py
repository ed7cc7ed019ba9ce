"""LLM relevance check (PosIR §2.3 and C.3): a 0-4 grade of each query against its
document, and optionally against the document with the query's spans cut out."""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl
from pydantic import Field

from builder.backends.rerankers.config import GRADE_VARIABLES
from builder.stages.base import Estimate, Flow, QueryFilter, StageParams, Verdicts, grouped_calls, register_stage
from builder.stages.contracts import QUERIES, SPANS
from builder.stages.grading import WithoutSpan, contrast_rows, contrast_verdicts, without_span_field
from builder.stages.refs import ModelRef, PromptRef

if TYPE_CHECKING:
    from builder.bench import Bench
    from builder.stages.context import StageContext


class RelevanceParams(StageParams):
    llm: ModelRef = Field(description="the grading model (PosIR used DeepSeek-V3.1, non-thinking)")
    prompt: PromptRef = Field(default="relevance_grade", description="the grading prompt, 0-4")
    min_grade: int = Field(default=3, ge=0, le=4, description="keep only grades at or above this")
    contrast: bool = Field(
        default=True,
        description=("also grade the document without the query's spans and require a strictly higher grade with them"),
    )
    questions_per_call: int = Field(
        default=8,
        ge=1,
        description=("questions about one text per request; 1 = one pair per request, graded with a bare integer"),
    )
    without_span: WithoutSpan = without_span_field()


@register_stage
class LLMRelevance(QueryFilter):
    """Keep queries an LLM grades at least `min_grade` (0-4) against their document,
    and (with `contrast`) higher than against the document without their spans."""

    name = "llm_relevance"
    needs = frozenset({QUERIES})
    Params = RelevanceParams
    params: RelevanceParams

    prompt_variables = GRADE_VARIABLES

    def needed(self) -> frozenset[str]:
        return self.needs | {SPANS} if self.params.contrast else self.needs

    def run(self, bench: Bench, ctx: StageContext) -> Bench:
        self.grades: dict[str, int] = {}
        out = super().run(bench, ctx)
        # The judge's grade stays on each kept query, for `build-bench review --report`'s
        # agreement between reviewers and the judge.
        grades = pl.DataFrame(
            {"query_id": list(self.grades), "llm_grade": list(self.grades.values())},
            schema={"query_id": pl.Utf8, "llm_grade": pl.Int64},
        )
        queries = out.queries.drop("llm_grade", strict=False).join(
            grades, on="query_id", how="left", maintain_order="left"
        )
        return out.replace(queries=queries)

    def judge(self, bench: Bench, ctx: StageContext, verdicts: Verdicts) -> None:
        p = self.params
        if p.contrast:
            rows, missing = contrast_rows(bench)
            verdicts.update(missing)
        else:
            texts = dict(bench.corpus.select("doc_id", "text").iter_rows())
            rows = [
                (qid, q, texts[d], "", ())
                for qid, q, d in bench.queries.select("query_id", "text", "doc_id").iter_rows()
            ]
        verdicts.update(
            contrast_verdicts(
                ctx, rows, p.llm, p.prompt, p.min_grade, p.contrast, p.questions_per_call, p.without_span, self.grades
            )
        )

    def plan(self, flow: Flow) -> tuple[Flow, Estimate]:
        p = self.params
        calls = grouped_calls(flow.queries, flow.docs, p.questions_per_call)
        if p.contrast:
            calls += flow.queries
        est = Estimate(
            calls=calls,
            prompt_tokens=int(calls * (flow.doc_tokens + 300)),
            completion_tokens=calls * 12 * min(p.questions_per_call, 4),
        )
        return flow, est
