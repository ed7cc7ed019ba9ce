"""A query's evidence: its span widened to whole sentences, never past its paragraph."""

from __future__ import annotations

import re
from dataclasses import dataclass

PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_SENTENCE_END = re.compile(r"[.!?。！？]+[\"')\]]*(?=\s|$)")


@dataclass(frozen=True)
class Evidence:
    text: str  # the source document's characters, as they are
    span_start: int  # the query's span, relative to the evidence text
    span_end: int


def widen(document: str, start: int, end: int) -> Evidence | str:
    """The evidence around document[start:end], or why there is none: a span that crosses
    a paragraph break is more than a paragraph of evidence."""
    if not 0 <= start < end <= len(document):
        return "span_outside_document"
    if PARAGRAPH_BREAK.search(document, start, end):
        return "evidence_spans_paragraphs"
    before = [m.end() for m in PARAGRAPH_BREAK.finditer(document, 0, start)]
    paragraph_start = before[-1] if before else 0
    after = PARAGRAPH_BREAK.search(document, end)
    paragraph_end = after.start() if after else len(document)
    first = paragraph_start
    for m in _SENTENCE_END.finditer(document, paragraph_start, start):
        first = m.end()
    last_end = _SENTENCE_END.search(document, max(end - 1, first), paragraph_end)
    last = last_end.end() if last_end else paragraph_end
    while first < start and document[first].isspace():
        first += 1
    while last > end and document[last - 1].isspace():
        last -= 1
    return Evidence(document[first:last], start - first, end - first)
