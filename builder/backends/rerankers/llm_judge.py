"""0-4 relevance grades from an LLM: one question per call, or several about one text.

`grade_pairs` is shared by the `llm_judge` reranker and the stages' own LLM checks. With
`questions_per_call: 1` every request holds one (question, text) pair and the prompt
(variable `one_pair`) asks for a bare integer, as FineWeb-PosQ's judge did; otherwise
pairs with the same text are asked together and the answer lists one grade per question.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.backends.llm import ChatRequest, LLMBackend, chat_json
from builder.backends.rerankers.base import Pair, RerankerBase
from builder.backends.rerankers.config import GRADE_VARIABLES, LLMJudgeConfig

Render = Callable[..., Sequence[dict[str, str]]]
MAX_GRADE = 4


@dataclass(frozen=True)
class Grade:
    value: int | None
    error: str | None  # llm_failed | llm_unparseable


def _grade(value: Any) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_GRADE:
        raise ValueError(f"grades are whole numbers from 0 to {MAX_GRADE}, got {value!r}")
    return value


def _validator(n: int) -> Callable[[Any], list[int]]:
    def validate(value: Any) -> list[int]:
        if isinstance(value, dict):
            value = value.get("grades", value.get("scores"))
        if isinstance(value, int) and n == 1:
            value = [value]
        if not isinstance(value, list):
            raise ValueError("expected a JSON list with one grade per question")
        if value and all(isinstance(v, dict) for v in value):
            by_id = {int(v.get("id", -1)): v.get("grade", v.get("score")) for v in value}
            missing = [i for i in range(1, n + 1) if i not in by_id]
            if missing:
                raise ValueError(f"no grade for question ids {missing}")
            value = [by_id[i] for i in range(1, n + 1)]
        if len(value) != n:
            raise ValueError(f"expected {n} grades, one per question, got {len(value)}")
        return [_grade(v) for v in value]

    return validate


def _groups(pairs: Sequence[Pair], per_call: int) -> list[tuple[str, list[int]]]:
    """(text, pair indexes) batches: pairs sharing a text, at most `per_call` each."""
    by_text: dict[str, list[int]] = {}
    for i, (_, text) in enumerate(pairs):
        by_text.setdefault(text, []).append(i)
    return [(text, idx[at: at + per_call]) for text, idx in by_text.items()
            for at in range(0, len(idx), per_call)]


def grade_pairs(backend: LLMBackend, render: Render, pairs: Sequence[Pair], *,
                questions_per_call: int = 8, raw_log: Path | None = None,
                on_done: Callable[[int], None] | None = None, tag: str = "") -> list[Grade]:
    """Grade each (question, text) pair; one request per text and batch of questions.

    `render(document=..., questions=[{"id", "text"}], one_pair=...)` gives the messages;
    `tag` keeps the item ids of different callers apart in logs.
    """
    groups = _groups(pairs, questions_per_call)
    out: list[Grade] = [Grade(None, "llm_failed")] * len(pairs)
    for size in sorted({len(idx) for _, idx in groups}):
        picked = [(text, idx) for text, idx in groups if len(idx) == size]
        requests = [
            ChatRequest.of(render(document=text, questions=[
                {"id": k + 1, "text": pairs[i][0]} for k, i in enumerate(idx)],
                one_pair=questions_per_call == 1), item_id=f"{tag}{idx[0]}")
            for text, idx in picked
        ]
        answers = chat_json(backend, requests, _validator(size), raw_log=raw_log, on_done=on_done)
        for (_, idx), answer in zip(picked, answers):
            for k, i in enumerate(idx):
                out[i] = Grade(answer.value[k], None) if answer.error is None else Grade(None, answer.error)
    return out


def request_count(pairs: Sequence[Pair], questions_per_call: int) -> int:
    return len(_groups(pairs, questions_per_call))


class LLMJudge(RerankerBase):
    """A reranker whose scores are LLM grades (0-4, or grade / 4 when normalized); NaN
    where the model gave no usable answer."""

    def __init__(self, name: str, config: LLMJudgeConfig, llm_lookup: Callable[[str], LLMBackend],
                 render: Render) -> None:
        self.name = name
        self.config = config
        self.normalized = config.normalize
        self._llm_lookup = llm_lookup
        self._render = render

    def score_pairs(self, pairs: Sequence[Pair]) -> list[float]:
        if not pairs:
            return []
        grades = grade_pairs(self._llm_lookup(self.config.llm), self._render, pairs,
                             questions_per_call=self.config.questions_per_call, tag=f"{self.name}:")
        scale = MAX_GRADE if self.config.normalize else 1
        return [g.value / scale if g.value is not None else math.nan for g in grades]
