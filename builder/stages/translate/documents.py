"""Translating documents piece by piece with their span markers, re-asking once when the
markers of a piece come back lost, repeated or out of order."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from builder.backends.llm import ChatRequest
from builder.stages.context import Progress
from builder.stages.translate.markers import MarkerStyle, Tag, mark, piece_problem, spans_from_tags, strip_tags
from builder.stages.translate.pieces import core, split_pieces

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_WRAP = re.compile(r"^\s*<text>\s*(.*?)\s*</text>\s*$", re.DOTALL)


@dataclass
class SourceDoc:
    doc_id: str
    text: str
    spans: dict[int, tuple[int, int]]  # marker number -> [start, end) in the source text
    style: MarkerStyle | None  # None: no markers (no spans, or every bracket pair collides)


@dataclass
class DocResult:
    text: str | None = None
    reason: str | None = None  # why there is no text
    spans: dict[int, tuple[int, int]] = field(default_factory=dict)
    lost: set[int] = field(default_factory=set)  # marker numbers without a usable span
    piece_starts: list[int] = field(default_factory=list)
    reasked: int = 0


@dataclass
class _Piece:
    doc: SourceDoc
    lang: str
    lead: str
    body: str  # marked text sent to the model ("" = whitespace only, not sent)
    trail: str
    expected: Counter[Tag]
    answer: str | None = None
    error: str | None = None
    problem: str | None = None


# (lang, marked text, reminder, marker style when the text has markers) -> messages
Render = Callable[[str, str, str, MarkerStyle | None], tuple[dict[str, str], ...]]


def clean_answer(text: str) -> str:
    """The translation without reasoning blocks or a <text> wrapper echoed from the prompt."""
    answer = _THINK.sub("", text).rsplit("</think>", 1)[-1]
    wrapped = _WRAP.match(answer)
    return (wrapped.group(1) if wrapped else answer).strip()


def translate_documents(
    docs: Sequence[SourceDoc],
    langs: Sequence[str],
    max_tokens: int,
    count: Callable[[list[str]], list[int]],
    render: Render,
    backend: Any,
    progress: Progress,
) -> dict[tuple[str, str], DocResult]:
    """Every document in every language, keyed by (doc id, lang)."""
    pieces: dict[tuple[str, str], list[_Piece]] = {}
    for doc in docs:
        bounds = split_pieces(doc.text, max_tokens, count)
        for lang in langs:
            pieces[(doc.doc_id, lang)] = [_piece(doc, lang, a, b) for a, b in bounds]
    todo = [p for group in pieces.values() for p in group if p.body]
    with progress.task("translating document pieces", len(todo)) as bar:
        _ask(todo, render, backend, bar.advance, reminder=False)
    again = [p for p in todo if p.problem]
    with progress.task("re-asking pieces that lost markers", len(again)) as bar:
        _ask(again, render, backend, bar.advance, reminder=True)
    results = {key: _assemble(group) for key, group in pieces.items()}
    for piece in again:
        results[(piece.doc.doc_id, piece.lang)].reasked += 1
    return results


def _piece(doc: SourceDoc, lang: str, start: int, end: int) -> _Piece:
    if doc.style is None:
        text, expected = doc.text[start:end], Counter()
    else:
        text, expected = mark(doc.text, start, end, doc.spans, doc.style)
    lead, body, trail = core(text)
    return _Piece(doc, lang, lead, body, trail, expected)


def _reminder(piece: _Piece) -> str:
    style = piece.doc.style
    assert style is not None
    tags = " ".join(style.tag(n, closing) for n, closing in sorted(piece.expected))
    return (
        f"Important: this text contains exactly these markers: {tags}. Each one must appear "
        "exactly once in your translation, unchanged, around the translation of the words it "
        "surrounds here."
    )


def _ask(
    pieces: list[_Piece], render: Render, backend: Any, advance: Callable[[int], None] | None, reminder: bool
) -> None:
    if not pieces:
        return
    requests = [
        ChatRequest.of(
            render(p.lang, p.body, _reminder(p) if reminder else "", p.doc.style if p.expected else None),
            item_id=f"{p.doc.doc_id}@{p.lang}",
        )
        for p in pieces
    ]
    for piece, response in zip(pieces, backend.chat_many(requests, on_done=advance)):
        answer = clean_answer(response.text) if response.text is not None else ""
        problem = piece_problem(answer, piece.expected, piece.doc.style) if piece.doc.style else None
        if reminder:
            if answer and not problem:  # otherwise the first answer stands, markers lost
                piece.answer, piece.problem = answer, None
        elif not answer:
            failed = "llm_truncated" if response.reason == "llm_truncated" else "translation_failed"
            piece.error = failed if response.text is None else "empty_translation"
        else:
            piece.answer, piece.problem = answer, problem


def _assemble(group: list[_Piece]) -> DocResult:
    failed = next((p.error for p in group if p.error), None)
    if failed:
        return DocResult(reason=failed)
    doc = group[0].doc
    text_parts: list[str] = []
    tags: list[tuple[int, Tag]] = []
    starts: list[int] = []
    lost: set[int] = set()
    size = 0
    for p in group:
        translated = f"{p.lead}{p.answer or ''}{p.trail}"
        clean, found = strip_tags(translated, doc.style) if doc.style else (translated, [])
        starts.append(size + len(p.lead))
        tags += [(size + pos, tag) for pos, tag in found]
        text_parts.append(clean)
        size += len(clean)
        if p.problem:
            lost |= {n for n, _ in p.expected} | {n for _, (n, _) in found}
    text = "".join(text_parts)
    spans, broken = spans_from_tags(text, tags)
    lost |= broken | (set(doc.spans) - set(spans))
    return DocResult(text=text, spans={n: s for n, s in spans.items() if n not in lost}, lost=lost, piece_starts=starts)
