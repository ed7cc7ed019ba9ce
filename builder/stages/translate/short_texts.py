"""Translating short texts (queries, titles) several per call, as a numbered JSON list."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from builder.backends.llm import ChatRequest
from builder.backends.llm.json_answers import chat_json

# (lang, [{"id": 1, "text": ...}, ...]) -> messages
RenderItems = Callable[[str, list[dict[str, Any]]], tuple[dict[str, str], ...]]


def _validate_for(n: int) -> Callable[[Any], dict[int, str]]:
    def validate(value: Any) -> dict[int, str]:
        if isinstance(value, dict):
            value = value.get("translations", value.get("items", [value]))
        if not isinstance(value, list):
            raise ValueError("expected a JSON list with one entry per numbered text")
        out: dict[int, str] = {}
        for item in value:
            if not isinstance(item, dict) or not isinstance(item.get("text"), str):
                raise ValueError('each entry needs "id" and a "text" string')
            try:
                out[int(item["id"])] = item["text"].strip()
            except (KeyError, TypeError, ValueError):
                raise ValueError('each entry needs its numeric "id"') from None
        missing = [i for i in range(1, n + 1) if not out.get(i)]
        if missing:
            raise ValueError(f"no translation for ids {missing}")
        return out

    return validate


def translate_short(items: Sequence[tuple[str, str, str]], per_call: int, render: RenderItems,
                    backend: Any, raw_log: Path, advance: Callable[[int], None] | None = None
                    ) -> dict[tuple[str, str], str | None]:
    """Translations of (key, lang, text) items keyed by (key, lang); None where it failed."""
    batches: dict[int, list[tuple[list[tuple[str, str]], ChatRequest]]] = {}
    by_lang: dict[str, list[tuple[str, str]]] = {}
    for key, lang, text in items:
        by_lang.setdefault(lang, []).append((key, text))
    for lang, rows in by_lang.items():
        for at in range(0, len(rows), per_call):
            batch = rows[at: at + per_call]
            numbered = [{"id": i, "text": text} for i, (_, text) in enumerate(batch, start=1)]
            request = ChatRequest.of(render(lang, numbered), item_id=f"{batch[0][0]}@{lang}")
            batches.setdefault(len(batch), []).append(([(key, lang) for key, _ in batch], request))
    out: dict[tuple[str, str], str | None] = {}
    # One chat_json call per batch size, so each validator knows how many ids to expect.
    for size, group in sorted(batches.items()):
        answers = chat_json(backend, [r for _, r in group], _validate_for(size), raw_log=raw_log,
                            on_done=advance)
        for (keys, _), answer in zip(group, answers):
            for i, key in enumerate(keys, start=1):
                out[key] = answer.value[i] if answer.value is not None else None
    return out
