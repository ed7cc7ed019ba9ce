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
    requested_position: str  # beginning | middle | end
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


# Bounds a server that enforces the schema writes within, so that a small model that
# repeats itself ends its answer instead of filling max_tokens.
MAX_QUESTION_CHARS = 500
MAX_ANSWER_CHARS = 2000


def question_list_schema(n: int, types: list[str] | None = None, least: int = 1) -> dict[str, Any]:
    """The JSON Schema of `least` to n question items that `check_question_items` accepts;
    `types`, when given, are the only values the item's "type" may take."""
    kind: dict[str, Any] = {"type": "string", "enum": types} if types else {"type": "string", "maxLength": 80}
    item = {
        "type": "object",
        "properties": {
            "question": {"type": "string", "minLength": 1, "maxLength": MAX_QUESTION_CHARS},
            "answer": {"type": "string", "maxLength": MAX_ANSWER_CHARS},
            "type": kind,
        },
        "required": ["question", "answer", "type"],
        "additionalProperties": False,
    }
    return {"type": "array", "items": item, "minItems": least, "maxItems": n}


def check_question_items(items: Any) -> list[dict[str, Any]]:
    """A model's question list: non-empty, each item with non-empty question and answer."""
    if not isinstance(items, list) or not items:
        raise ValueError("expected a non-empty JSON list of questions")
    for item in items:
        if not (
            isinstance(item, dict)
            and isinstance(item.get("question"), str)
            and item["question"].strip()
            and isinstance(item.get("answer"), str)
        ):
            raise ValueError('each question needs non-empty "question" and "answer" strings')
    return items
