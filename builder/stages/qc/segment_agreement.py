"""Segment agreement (FineWeb-PosQ appendix A.2, stage 1): a query labelled with a third
of its document must match that third best.

The document is cut into three equal parts by characters (the first two of length
floor(len / 3), as in the chunk tagging). Every listed reranker must score the labelled
third strictly highest; the optional LLM step grades all three thirds 0-4 and requires
the labelled one to reach `min_grade` and beat the others by `margin` levels. FineWeb-PosQ
runs the rerankers, balances, then the LLM step: list the stage twice for that.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from builder.backends.rerankers import is_missing
from builder.backends.rerankers.config import GRADE_VARIABLES
from builder.stages.base import Estimate, Flow, Stage, StageParams, register_stage
from builder.stages.refs import ModelRef, PromptRef, RerankerRef
from builder.stages.qc.grading import grade, grade_histogram
from builder.stages.qc.span_contrast import verdict

if TYPE_CHECKING:
    from builder.bench import Bench
    from builder.stages.context import StageContext

THIRDS = ("beginning", "middle", "end")
Row = tuple[str, str, list[str], int]  # query id, query, the three thirds, labelled third


class SegmentParams(StageParams):
    rerankers: list[RerankerRef] = Field(default=["bm25"], description="names under rerankers:; may be empty with llm")
    label_column: Literal["chunk_tag", "position_tag"] = Field(
        default="chunk_tag", description="query column holding the labelled third")
    require: Literal["all", "majority"] = "all"
    llm: ModelRef | None = Field(default=None, description="optional LLM grading of the three thirds")
    prompt: PromptRef = "relevance_grade"
    min_grade: int = Field(default=3, ge=0, le=4)
    margin: int = Field(default=1, ge=0, le=4, description="levels the labelled third must beat each other by")
    questions_per_call: int = Field(default=8, ge=1)

    @model_validator(mode="after")
    def _something_to_check(self) -> SegmentParams:
        if not self.rerankers and not self.llm:
            raise ValueError("give rerankers, an llm, or both")
        return self


def thirds(text: str) -> list[str]:
    third = len(text) // 3
    return [text[:third], text[third: 2 * third], text[2 * third:]]


@register_stage
class SegmentAgreement(Stage):
    """Keep queries whose labelled third of the document scores highest of the three."""

    name = "segment_agreement"
    Params = SegmentParams
    params: SegmentParams

    prompt_variables = GRADE_VARIABLES

    def run(self, bench: Bench, ctx: StageContext) -> Bench:
        rows, reasons = self._rows(bench)
        failures: dict[str, list[str]] = {r[0]: [] for r in rows}
        corpus_texts = bench.corpus["text"].to_list()
        for name in self.params.rerankers:
            reranker = ctx.reranker(name)
            reranker.fit(corpus_texts)
            scores = reranker.score_pairs([(q, part) for _, q, parts, _ in rows for part in parts])
            for k, (qid, _, _, label) in enumerate(rows):
                three = scores[3 * k: 3 * k + 3]
                if any(is_missing(s) for s in three):
                    failures[qid].append(f"no_score:{name}")
                elif any(three[label] <= s for j, s in enumerate(three) if j != label):
                    failures[qid].append(f"segment_disagreement:{name}")
        for qid, failed in failures.items():
            reason = verdict(failed, len(self.params.rerankers), self.params.require)
            if reason:
                reasons[qid] = reason
        if self.params.llm:
            reasons.update(self._llm_check([r for r in rows if r[0] not in reasons], ctx))
        return bench.drop_queries(reasons, ctx.label)

    def _rows(self, bench: Bench) -> tuple[list[Row], dict[str, str]]:
        texts = dict(bench.corpus.select("doc_id", "text").iter_rows())
        column = self.params.label_column
        if column not in bench.queries.columns:
            return [], dict.fromkeys(bench.queries["query_id"].to_list(), "no_position_label")
        rows: list[Row] = []
        reasons: dict[str, str] = {}
        for qid, query, doc_id, label in bench.queries.select(
                "query_id", "text", "doc_id", column).iter_rows():
            if label not in THIRDS:
                reasons[qid] = "no_position_label"
            else:
                rows.append((qid, query, thirds(texts[doc_id]), THIRDS.index(label)))
        return rows, reasons

    def _llm_check(self, rows: list[Row], ctx: StageContext) -> dict[str, str]:
        p = self.params
        assert p.llm is not None
        grades = grade(ctx, p.llm, p.prompt, [(q, part) for _, q, parts, _ in rows for part in parts],
                       p.questions_per_call, "grading thirds")
        ctx.stats["llm_grades"] = grade_histogram(grades)
        reasons: dict[str, str] = {}
        for k, (qid, _, _, label) in enumerate(rows):
            three = grades[3 * k: 3 * k + 3]
            error = next((g.error for g in three if g.error), None)
            values = [g.value or 0 for g in three]
            if error:
                reasons[qid] = error
            elif values[label] < p.min_grade:
                reasons[qid] = f"llm_grade_below:{p.min_grade}"
            elif any(values[label] < v + p.margin for j, v in enumerate(values) if j != label):
                reasons[qid] = "llm_segment_not_higher"
        return reasons

    def plan(self, flow: Flow) -> tuple[Flow, Estimate]:
        if not self.params.llm:
            return flow, Estimate()
        calls = 3 * max(flow.docs, flow.queries // self.params.questions_per_call) if flow.queries else 0
        return flow, Estimate(calls=calls, prompt_tokens=int(calls * (flow.doc_tokens / 3 + 300)),
                              completion_tokens=calls * 40)
