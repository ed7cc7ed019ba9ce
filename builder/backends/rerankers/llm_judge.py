"""0-4 relevance grades from an LLM: one question per call, or several about one text.

`grade_pairs` is shared by the `llm_judge` reranker and the stages' own LLM checks. With
`questions_per_call: 1` every request holds one (question, text) pair and the prompt
(variable `one_pair`) asks for a bare integer, as FineWeb-PosQ's judge did; otherwise
pairs with the same text are asked together and the answer lists one grade per question.
A text may be a `SetAside`: the whole document plus passages the judge is to grade as if
deleted, so that grading without a span shares the document with grading with it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from builder.backends.llm import ChatRequest, LLMBackend
from builder.backends.llm.json_batches import IdList, NumberedBatch, ask_numbered, number_batches, per_item
from builder.backends.rerankers.base import Pair, RerankerBase
from builder.backends.rerankers.config import LLMJudgeConfig

Render = Callable[..., Sequence[dict[str, str]]]
MAX_GRADE = 4


class SetAside(NamedTuple):
    """A document to grade as if `passages` had been deleted from it."""

    document: str
    passages: tuple[str, ...]


# A question and what it is graded against: a text, or a document with passages set aside.
GradedPair = tuple[str, "str | SetAside"]


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


def _entry_grade(entry: Any) -> Any:
    if not isinstance(entry, dict):
        raise ValueError('each entry needs "id" and "grade"')
    return entry.get("grade", entry.get("score"))


GRADES = IdList(
    read=_entry_grade,
    wrappers=("grades", "scores"),
    entry="grade",
    fields={"grade": {"type": "integer", "minimum": 0, "maximum": MAX_GRADE}},
)
# One pair per request: the prompt asks for the grade alone.
BARE_GRADE: dict[str, Any] = {"type": "integer", "minimum": 0, "maximum": MAX_GRADE}


def _validator(n: int) -> Callable[[Any], list[int]]:
    """Grades for n questions: id-keyed entries, or a plain list (a bare number for one)."""

    def validate(value: Any) -> list[int]:
        value = GRADES.unwrap(value)
        if isinstance(value, int) and n == 1:
            value = [value]
        if isinstance(value, list) and not (value and all(isinstance(v, dict) for v in value)):
            if len(value) != n:
                raise ValueError(f"expected {n} grades, one per question, got {len(value)}")
            return [_grade(v) for v in value]
        return [_grade(v) for v in GRADES.values(value, n)]

    return validate


def _document(text: str | SetAside) -> str:
    return text.document if isinstance(text, SetAside) else text


def _batches(
    sets: Sequence[Sequence[GradedPair]], per_call: int, render: Render, tag: str
) -> list[NumberedBatch[tuple[int, int]]]:
    """Requests for the pairs of every set: pairs of one set sharing a text, `per_call` at most
    each; the requests about one document follow each other, so a prefix cache of modest
    size still holds the document when the next one comes."""

    def request_for(
        group: tuple[int, str | SetAside], _: int, keys: list[tuple[int, int]], questions: list[dict[str, Any]]
    ) -> ChatRequest:
        text = group[1]
        passages = list(text.passages) if isinstance(text, SetAside) else []
        messages = render(document=_document(text), questions=questions, one_pair=per_call == 1, set_aside=passages)
        return ChatRequest.of(messages, item_id=f"{tag}{keys[0][1]}")

    items = [((s, text), (s, i), question) for s, pairs in enumerate(sets) for i, (question, text) in enumerate(pairs)]
    first_seen: dict[str, int] = {}
    for (_, text), _, _ in items:
        first_seen.setdefault(_document(text), len(first_seen))
    items.sort(key=lambda item: first_seen[_document(item[0][1])])  # stable: sets keep their order within
    return number_batches(items, per_call, request_for)


def grade_pair_sets(
    backend: LLMBackend,
    render: Render,
    sets: Sequence[Sequence[GradedPair]],
    *,
    questions_per_call: int = 8,
    raw_log: Path | None = None,
    on_done: Callable[[int], None] | None = None,
    tag: str = "",
) -> list[list[Grade]]:
    """Grade each (question, text) pair of several sets, every request in one pool.

    Within a set, pairs with the same text are asked together: one request per text and
    batch of at most `questions_per_call` questions. `render(document=...,
    questions=[{"id", "text"}], one_pair=..., set_aside=[passages])` gives the messages;
    `tag` keeps the item ids of different callers apart in logs.
    """
    batches = _batches(sets, questions_per_call, render, tag)
    schema_for = (lambda _: BARE_GRADE) if questions_per_call == 1 else GRADES.schema
    answers = ask_numbered(backend, batches, _validator, schema_for, raw_log=raw_log, on_done=on_done)
    out = [[Grade(None, "llm_failed")] * len(pairs) for pairs in sets]
    for (s, i), value, error in per_item(batches, answers):
        out[s][i] = Grade(value, error)
    return out


def grade_pairs(
    backend: LLMBackend,
    render: Render,
    pairs: Sequence[Pair],
    *,
    questions_per_call: int = 8,
    raw_log: Path | None = None,
    on_done: Callable[[int], None] | None = None,
    tag: str = "",
) -> list[Grade]:
    """Grade each (question, text) pair (see `grade_pair_sets`)."""
    return grade_pair_sets(
        backend, render, [pairs], questions_per_call=questions_per_call, raw_log=raw_log, on_done=on_done, tag=tag
    )[0]


def request_count(pairs: Sequence[GradedPair], questions_per_call: int) -> int:
    """How many requests grading these pairs takes."""
    per_text = Counter(text for _, text in pairs)
    return sum(-(-n // questions_per_call) for n in per_text.values())


class LLMJudge(RerankerBase):
    """A reranker whose scores are LLM grades (0-4, or grade / 4 when normalized); NaN
    where the model gave no usable answer."""

    def __init__(
        self, name: str, config: LLMJudgeConfig, llm_lookup: Callable[[str], LLMBackend], render: Render
    ) -> None:
        self.name = name
        self.config = config
        self.normalized = config.normalize
        self._llm_lookup = llm_lookup
        self._render = render

    def score_pairs(self, pairs: Sequence[Pair]) -> list[float]:
        if not pairs:
            return []
        grades = grade_pairs(
            self._llm_lookup(self.config.llm),
            self._render,
            pairs,
            questions_per_call=self.config.questions_per_call,
            tag=f"{self.name}:",
        )
        scale = MAX_GRADE if self.config.normalize else 1
        return [g.value / scale if g.value is not None else math.nan for g in grades]
