"""Segment agreement (FineWeb-PosQ appendix A.2, stage 1): a query labelled with a third
of its document must match that third best.

The document is cut into three equal parts by characters (the first two of length
floor(len / 3), as in the chunk tagging). Every listed reranker must score the labelled
third strictly highest; one whose top score is shared by the labelled third and another
casts no vote (a tie decides nothing), and with no vote at all the query goes as
`segment_undecided`. The optional LLM step grades all three thirds 0-4 and requires
the labelled one to reach `min_grade` and beat the others by `margin` levels. FineWeb-PosQ
runs the rerankers, balances, then the LLM step: list the stage twice for that.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, model_validator

from builder.backends.rerankers import Grade, is_missing
from builder.backends.rerankers.config import GRADE_VARIABLES
from builder.backends.rerankers.windows import score_windowed
from builder.stages.base import Estimate, Flow, QueryFilter, StageParams, Verdicts, grouped_calls, register_stage
from builder.stages.contracts import COLUMN_PROVIDED_AS, QUERIES
from builder.stages.grading import grade, grade_histogram
from builder.stages.qc.span_contrast import verdict
from builder.stages.qc.windowing import BeyondWindow, beyond_window, beyond_window_field, span_ends
from builder.stages.refs import ModelRef, PromptRef, RerankerRef

if TYPE_CHECKING:
    from builder.bench import Bench
    from builder.stages.context import StageContext

THIRDS = ("beginning", "middle", "end")
Row = tuple[str, str, list[str], int]  # query id, query, the three thirds, labelled third


class SegmentParams(StageParams):
    rerankers: list[RerankerRef] = Field(default=["bm25"], description="names under rerankers:; may be empty with llm")
    label_column: Literal["chunk_tag", "position_tag"] = Field(
        default="chunk_tag", description="query column holding the labelled third"
    )
    require: Literal["all", "majority"] = Field(
        default="all",
        description=("every voting reranker must rank the labelled third highest, or more than half of them"),
    )
    llm: ModelRef | None = Field(default=None, description="optional LLM grading of the three thirds")
    prompt: PromptRef = Field(default="relevance_grade", description="llm: the grading prompt, 0-4")
    min_grade: int = Field(default=3, ge=0, le=4, description="llm: lowest grade of the labelled third")
    margin: int = Field(default=1, ge=0, le=4, description="levels the labelled third must beat each other by")
    questions_per_call: int = Field(
        default=8, ge=1, description=("llm: pairs about one text graded per request; 1 asks for a bare grade")
    )
    beyond_window: BeyondWindow = beyond_window_field()

    @model_validator(mode="after")
    def _something_to_check(self) -> SegmentParams:
        if not self.rerankers and not self.llm:
            raise ValueError("give rerankers, an llm, or both")
        return self


def third_vote(three: list[float], label: int) -> str:
    """One reranker's vote: `agree` when the labelled third scores strictly highest,
    `disagree` when another scores strictly higher, `tie` (no decision) when it shares the top."""
    if any(is_missing(s) for s in three):
        return "no_score"
    best_other = max(s for j, s in enumerate(three) if j != label)
    if three[label] > best_other:
        return "agree"
    return "disagree" if three[label] < best_other else "tie"


def segment_verdict(votes: list[tuple[str, str]], require: str) -> str | None:
    """None to keep, else why not. Ties abstain: the verdict is taken over the rerankers that
    decide (all of them agree, or more than half); when none decides, `segment_undecided`."""
    failed = [
        f"{vote if vote == 'no_score' else 'segment_disagreement'}:{name}"
        for name, vote in votes
        if vote in ("disagree", "no_score")
    ]
    deciding = [v for v in votes if v[1] != "tie"]
    if not deciding:
        return "segment_undecided"
    return verdict(failed, len(deciding), require)


def thirds(text: str) -> list[str]:
    third = len(text) // 3
    return [text[:third], text[third : 2 * third], text[2 * third :]]


@register_stage
class SegmentAgreement(QueryFilter):
    """Keep queries whose labelled third of the document scores highest of the three."""

    name = "segment_agreement"
    needs = frozenset({QUERIES})
    Params = SegmentParams
    params: SegmentParams

    def needed(self) -> frozenset[str]:
        return self.needs | {COLUMN_PROVIDED_AS[self.params.label_column]}

    prompt_variables = GRADE_VARIABLES

    def judge(self, bench: Bench, ctx: StageContext, verdicts: Verdicts) -> None:
        rows = self._rows(bench, verdicts)
        votes: dict[str, list[tuple[str, str]]] = {r[0]: [] for r in rows}
        corpus_texts = bench.corpus["text"].to_list()
        tallies: dict[str, dict[str, int]] = {}
        ends = span_ends(bench)
        for name in self.params.rerankers:
            reranker = ctx.reranker(name)
            if self.params.beyond_window == "drop":
                verdicts.drop_all(self._unread(reranker, rows, ends), f"span_beyond_window:{name}")
                rows = verdicts.undecided(rows)
                votes = dict(verdicts.undecided(votes.items()))
            reranker.fit(corpus_texts)
            scores = score_windowed(reranker, [(q, part) for _, q, parts, _ in rows for part in parts])
            tally = tallies.setdefault(name, dict.fromkeys(("agree", "disagree", "tie", "no_score"), 0))
            for k, (qid, _, _, label) in enumerate(rows):
                vote = third_vote(scores[3 * k : 3 * k + 3], label)
                tally[vote] += 1
                votes[qid].append((name, vote))
        ctx.stats["segment_agreement"] = tallies
        if self.params.rerankers:
            for qid, cast in votes.items():
                verdicts.drop(qid, segment_verdict(cast, self.params.require))
        if self.params.llm:
            verdicts.update(self._llm_check(verdicts.undecided(rows), ctx))

    @staticmethod
    def _unread(reranker: Any, rows: list[Row], ends: dict[str, int]) -> list[str]:
        """Queries whose span ends past what the scorer reads of their labelled third (a
        query without spans: when the labelled third itself is longer than that)."""
        items = []
        for qid, query, parts, label in rows:
            start = sum(len(p) for p in parts[:label])
            end = ends.get(qid, start + len(parts[label]))
            items.append((qid, query, parts[label], end - start))
        return beyond_window(reranker, items)

    def _rows(self, bench: Bench, verdicts: Verdicts) -> list[Row]:
        """One row per query with a labelled third; the others go as `no_position_label`."""
        texts = dict(bench.corpus.select("doc_id", "text").iter_rows())
        column = self.params.label_column
        if column not in bench.queries.columns:
            verdicts.drop_all(bench.queries["query_id"].to_list(), "no_position_label")
            return []
        rows: list[Row] = []
        for qid, query, doc_id, label in bench.queries.select("query_id", "text", "doc_id", column).iter_rows():
            if label not in THIRDS:
                verdicts.drop(qid, "no_position_label")
            else:
                rows.append((qid, query, thirds(texts[doc_id]), THIRDS.index(label)))
        return rows

    def _llm_check(self, rows: list[Row], ctx: StageContext) -> dict[str, str]:
        p = self.params
        grades = self._one_pair_per_call(rows, ctx) if p.questions_per_call == 1 else self._batched(rows, ctx)
        asked = [g for three in grades.values() for g in three if g is not None]
        ctx.stats["llm_grades"] = grade_histogram(asked)
        ctx.stats["grading_pairs_not_sent"] = 3 * len(rows) - len(asked)
        reasons: dict[str, str] = {}
        for qid, _, _, label in rows:
            three = grades[qid]
            error = next((g.error for g in three if g is not None and g.error), None)
            values = [(g.value or 0) if g is not None else 0 for g in three]
            if error:
                reasons[qid] = error
            elif values[label] < p.min_grade:
                reasons[qid] = f"llm_grade_below:{p.min_grade}"
            elif any(values[label] < v + p.margin for j, v in enumerate(values) if j != label):
                reasons[qid] = "llm_segment_not_higher"
        return reasons

    def _one_pair_per_call(self, rows: list[Row], ctx: StageContext) -> dict[str, list[Grade | None]]:
        """The labelled third first, the other two only where it reached `min_grade`: below
        it the query fails whatever they get (None: not asked)."""
        p = self.params
        assert p.llm is not None
        own = grade(
            ctx, p.llm, p.prompt, [(q, parts[label]) for _, q, parts, label in rows], 1, "grading labelled thirds"
        )
        out: dict[str, list[Grade | None]] = {}
        for (qid, _, _, label), g in zip(rows, own):
            out[qid] = [g if j == label else None for j in range(3)]
        rest = [row for row, g in zip(rows, own) if g.error is None and (g.value or 0) >= p.min_grade]
        pairs = [(q, parts[j]) for _, q, parts, label in rest for j in range(3) if j != label]
        others = iter(grade(ctx, p.llm, p.prompt, pairs, 1, "grading other thirds") if pairs else [])
        for qid, _, _, label in rest:
            out[qid] = [out[qid][j] if j == label else next(others) for j in range(3)]
        return out

    def _batched(self, rows: list[Row], ctx: StageContext) -> dict[str, list[Grade | None]]:
        """Several questions share a call about one third, so all three thirds go at once."""
        p = self.params
        assert p.llm is not None
        flat = grade(
            ctx,
            p.llm,
            p.prompt,
            [(q, part) for _, q, parts, _ in rows for part in parts],
            p.questions_per_call,
            "grading thirds",
        )
        return {qid: list(flat[3 * k : 3 * k + 3]) for k, (qid, *_) in enumerate(rows)}

    def plan(self, flow: Flow) -> tuple[Flow, Estimate]:
        if not self.params.llm:
            return flow, Estimate()
        calls = 3 * grouped_calls(flow.queries, flow.docs, self.params.questions_per_call)
        return flow, Estimate(
            calls=calls, prompt_tokens=int(calls * (flow.doc_tokens / 3 + 300)), completion_tokens=calls * 40
        )
