"""What a generation mode hands back to the stage."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class QueryDraft:
    query_id: str
    doc_id: str
    text: str
    answer: str
    qtype: str
    requested_position: str  # first | middle | final
    reference_texts: tuple[str, ...] = ()
    chunk_start: int | None = None
    chunk_end: int | None = None
    chunk_tag: str | None = None


@dataclass
class GenerationOutcome:
    drafts: list[QueryDraft] = field(default_factory=list)
    # call id -> (doc id, reason): a call whose questions never arrived
    failed: dict[str, tuple[str, str]] = field(default_factory=dict)
    unusable_docs: set[str] = field(default_factory=set)
    notes: dict[str, int] = field(default_factory=dict)


def check_question_items(items: Any) -> list[dict[str, Any]]:
    """A model's question list: non-empty, each item with non-empty question and answer."""
    if not isinstance(items, list) or not items:
        raise ValueError("expected a non-empty JSON list of questions")
    for item in items:
        if not (isinstance(item, dict) and isinstance(item.get("question"), str)
                and item["question"].strip() and isinstance(item.get("answer"), str)):
            raise ValueError('each question needs non-empty "question" and "answer" strings')
    return items
