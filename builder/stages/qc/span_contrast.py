"""Span contrast (PosIR §2.3): a query must be relevant because of its span.

Each reranker scores the query against its document and against the document with
the span characters cut out; the query stays only if the full document scores higher
(under every reranker, or a majority). An optional LLM check repeats the contrast with
0-4 grades (the document without the span in the layout `without_span` names, see
grading.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from builder.backends.rerankers import is_missing
from builder.backends.rerankers.config import GRADE_VARIABLES
from builder.backends.rerankers.windows import score_windowed
from builder.stages.base import Estimate, Flow, QueryFilter, StageParams, Verdicts, register_stage
from builder.stages.contracts import QUERIES, SPANS
from builder.stages.grading import WithoutSpan, contrast_rows, contrast_verdicts, without_span_field
from builder.stages.qc.windowing import BeyondWindow, beyond_window, beyond_window_field, span_ends
from builder.stages.refs import ModelRef, PromptRef, RerankerRef

if TYPE_CHECKING:
    from builder.bench import Bench
    from builder.stages.context import StageContext


class SpanContrastParams(StageParams):
    rerankers: list[RerankerRef] = Field(default=["bm25"], min_length=1, description="names under rerankers:")
    require: Literal["all", "majority"] = Field(
        default="all", description="with > without under every reranker, or under more than half"
    )
    llm: ModelRef | None = Field(default=None, description="optional LLM contrast check after the rerankers")
    prompt: PromptRef = Field(default="relevance_grade", description="LLM check: the grading prompt, 0-4")
    min_grade: int = Field(default=3, ge=0, le=4, description="LLM check: lowest grade with the span")
    questions_per_call: int = Field(
        default=8, ge=1, description=("LLM check: questions about one document graded per request")
    )
    without_span: WithoutSpan = without_span_field()
    beyond_window: BeyondWindow = beyond_window_field()


def verdict(failed: list[str], n_rerankers: int, require: str) -> str | None:
    """None to keep, else the reason naming the first reranker that failed."""
    if not failed:
        return None
    if require == "majority" and n_rerankers - len(failed) > n_rerankers / 2:
        return None
    return failed[0]


@register_stage
class SpanContrast(QueryFilter):
    """Keep queries whose document scores higher with their span than without it."""

    name = "span_contrast"
    needs = frozenset({QUERIES, SPANS})
    Params = SpanContrastParams
    params: SpanContrastParams

    prompt_variables = GRADE_VARIABLES

    def judge(self, bench: Bench, ctx: StageContext, verdicts: Verdicts) -> None:
        p = self.params
        rows, missing = contrast_rows(bench)
        verdicts.update(missing)
        ends = span_ends(bench)
        failures: dict[str, list[str]] = {qid: [] for qid, *_ in rows}
        corpus_texts = bench.corpus["text"].to_list()
        counts: dict[str, dict[str, int]] = {}
        for name in p.rerankers:
            reranker = ctx.reranker(name)
            if p.beyond_window == "drop":
                unread = beyond_window(reranker, [(qid, q, doc, ends[qid]) for qid, q, doc, *_ in rows])
                verdicts.drop_all(unread, f"span_beyond_window:{name}")
                rows = verdicts.undecided(rows)
            reranker.fit(corpus_texts)
            pairs = [(q, doc) for _, q, doc, *_ in rows] + [(q, cut) for _, q, _, cut, _ in rows]
            with ctx.progress.task(f"contrast with {name}", len(pairs)) as bar:
                scores = score_windowed(reranker, pairs, bar.advance)
            n = len(rows)
            tally = counts.setdefault(name, {"higher": 0, "not_higher": 0, "no_score": 0})
            for (qid, *_), with_span, without in zip(rows, scores[:n], scores[n:]):
                if is_missing(with_span) or is_missing(without):
                    failures[qid].append(f"no_score:{name}")
                    tally["no_score"] += 1
                elif with_span > without:
                    tally["higher"] += 1
                else:
                    failures[qid].append(f"contrast_not_higher:{name}")
                    tally["not_higher"] += 1
        ctx.stats["span_contrast"] = counts
        for qid, failed in failures.items():
            verdicts.drop(qid, verdict(failed, len(p.rerankers), p.require))
        if p.llm:
            kept = verdicts.undecided(rows)
            answers = contrast_verdicts(
                ctx, kept, p.llm, p.prompt, p.min_grade, True, p.questions_per_call, p.without_span
            )
            verdicts.update({q: _llm_reason(r) for q, r in answers.items() if r})

    def plan(self, flow: Flow) -> tuple[Flow, Estimate]:
        if not self.params.llm:
            return flow, Estimate(notes=[f"{2 * flow.queries} reranker pairs per reranker"])
        calls = flow.docs + flow.queries
        return flow, Estimate(
            calls=calls, prompt_tokens=int(calls * (flow.doc_tokens + 300)), completion_tokens=calls * 30
        )


def _llm_reason(reason: str) -> str:
    """Grading errors keep their own reason; a failed contrast is one reason here."""
    kept = ("llm_unparseable", "llm_truncated")
    return reason if reason.startswith("llm_failed") or reason in kept else "llm_contrast_failed"
