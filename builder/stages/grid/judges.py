"""Judges of padding: whether a passage could answer the query in place of its evidence.

Each judge answers, per candidate passage, None (usable as padding) or the reason it is
left out; `judge_failed:<why>` marks a passage the judge could not score, left out too
(padding nobody checked must not count as checked).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from builder.backends.rerankers.windows import score_windowed

if TYPE_CHECKING:
    from builder.backends.rerankers import Reranker
    from builder.stages.context import StageContext

Verdict = str | None


@dataclass(frozen=True)
class Ask:
    query: str
    evidence: str
    passages: tuple[str, ...]  # candidates, in the order the padding walk meets them


class PaddingJudge(Protocol):
    batch: int | None  # candidates per query per round; None: the whole pool in one round

    def judge(self, asks: Sequence[Ask]) -> list[list[Verdict]]: ...


class BM25Judge:
    """BM25 scores over the padding corpus: a passage is left out when it scores at least
    `score_ratio` of the evidence's score (`answers_query:bm25_score`), or when it ranks at or
    above the evidence, or among the `rank_margin` passages ranked just below it
    (`answers_query:bm25_rank`). A passage sharing no scored word with the query never answers."""

    batch = None  # the rank is over the query's whole pool

    def __init__(self, corpus: Sequence[str], score_ratio: float | None, rank_margin: int | None) -> None:
        from builder.backends.rerankers import BM25Config
        from builder.backends.rerankers.bm25 import BM25Scorer

        self.scorer = BM25Scorer("grid_padding", BM25Config())
        self.scorer.fit(list(corpus))
        self.score_ratio, self.rank_margin = score_ratio, rank_margin

    def judge(self, asks: Sequence[Ask]) -> list[list[Verdict]]:
        return [self._one(a) for a in asks]

    def _one(self, ask: Ask) -> list[Verdict]:
        evidence, *scores = self.scorer.score_pairs(
            [(ask.query, ask.evidence)] + [(ask.query, p) for p in ask.passages]
        )
        ranked = self._ranked_out(evidence, scores)
        out: list[Verdict] = []
        for k, score in enumerate(scores):
            if score <= 0:
                out.append(None)
            elif self.score_ratio is not None and score >= self.score_ratio * evidence:
                out.append("answers_query:bm25_score")
            elif k in ranked:
                out.append("answers_query:bm25_rank")
            else:
                out.append(None)
        return out

    def _ranked_out(self, evidence: float, scores: Sequence[float]) -> set[int]:
        """Passages at or above the evidence, then the next `rank_margin` below it (ties in walk order)."""
        if self.rank_margin is None:
            return set()
        above = {k for k, s in enumerate(scores) if s >= evidence}
        below = sorted((k for k, s in enumerate(scores) if s < evidence), key=lambda k: (-scores[k], k))
        return above | set(below[: self.rank_margin])


class RerankerJudge:
    """The recipe's reranker: a passage is left out unless it scores more than `margin`
    (in the reranker's own units) below the evidence (`answers_query:reranker`)."""

    def __init__(self, name: str, reranker: Reranker, corpus: Sequence[str], margin: float, batch: int) -> None:
        self.name, self.reranker, self.margin, self.batch = name, reranker, margin, batch
        reranker.fit(list(corpus))
        self._evidence: dict[tuple[str, str], float] = {}

    def judge(self, asks: Sequence[Ask]) -> list[list[Verdict]]:
        fresh = sorted({(a.query, a.evidence) for a in asks} - self._evidence.keys())
        pairs = fresh + [(a.query, p) for a in asks for p in a.passages]
        scores = score_windowed(self.reranker, pairs)
        self._evidence.update(zip(fresh, scores[: len(fresh)]))
        rest = iter(scores[len(fresh) :])
        return [[self._verdict(self._evidence[(a.query, a.evidence)], next(rest)) for _ in a.passages] for a in asks]

    def _verdict(self, evidence: float, score: float) -> Verdict:
        if math.isnan(evidence) or math.isnan(score):
            return f"judge_failed:{self.name}"
        return "answers_query:reranker" if score >= evidence - self.margin else None


class LLMJudge:
    """The LLM judge grades each passage 0-4 against the query with the recipe's grading
    prompt; a grade above `max_grade` leaves it out (`answers_query:llm`)."""

    def __init__(self, ctx: StageContext, llm: str, prompt: str, max_grade: int, batch: int) -> None:
        self.ctx, self.llm, self.prompt, self.max_grade, self.batch = ctx, llm, prompt, max_grade, batch

    def judge(self, asks: Sequence[Ask]) -> list[list[Verdict]]:
        from builder.stages.grading import grade_sets

        sets = [[(a.query, p) for p in a.passages] for a in asks]
        # One passage per request: each passage is its own document to the grader.
        grades = grade_sets(self.ctx, self.llm, self.prompt, sets, 1, "judging padding")
        return [[self._verdict(g.value, g.error) for g in per_ask] for per_ask in grades]

    def _verdict(self, value: int | None, error: str | None) -> Verdict:
        if error is not None or value is None:
            return f"judge_failed:{error or 'llm_failed'}"
        return "answers_query:llm" if value > self.max_grade else None
