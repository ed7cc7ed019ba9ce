"""Translating short texts (queries, titles) several per call, as a numbered JSON list."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from builder.backends.llm import ChatRequest
from builder.backends.llm.json_batches import IdList, ask_numbered, number_batches, per_item

# (lang, [{"id": 1, "text": ...}, ...]) -> messages
RenderItems = Callable[[str, list[dict[str, Any]]], tuple[dict[str, str], ...]]


def _translation(entry: Any) -> str | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("text"), str):
        raise ValueError('each entry needs "id" and a "text" string')
    return entry["text"].strip() or None  # an empty translation is a missing one


TRANSLATIONS = IdList(
    read=_translation,
    wrappers=("translations", "items"),
    entry="translation",
    item="numbered text",
    fields={"text": {"type": "string"}},
)


def translate_short(
    items: Sequence[tuple[str, str, str]],
    per_call: int,
    render: RenderItems,
    backend: Any,
    raw_log: Path,
    advance: Callable[[int], None] | None = None,
) -> dict[tuple[str, str], str | None]:
    """Translations of (key, lang, text) items keyed by (key, lang); None where it failed."""

    def request_for(lang: str, _: int, keys: list[tuple[str, str]], numbered: list[dict[str, Any]]) -> ChatRequest:
        return ChatRequest.of(render(lang, numbered), item_id=f"{keys[0][0]}@{lang}")

    batches = number_batches(((lang, (key, lang), text) for key, lang, text in items), per_call, request_for)
    answers = ask_numbered(
        backend, batches, TRANSLATIONS.validator, TRANSLATIONS.schema, raw_log=raw_log, on_done=advance
    )
    return {key: value for key, value, _ in per_item(batches, answers)}
