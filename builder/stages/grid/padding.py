"""Padding: other documents' paragraphs as whole sentences in their own order, with those
that could answer the query, or repeat its evidence, left out and counted."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from builder.stages.grid.evidence import PARAGRAPH_BREAK

_SENTENCE_BREAK = re.compile(r"(?<=[.!?。！？])\s+(?=\S)")
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Passage:
    doc_id: str
    index: int  # its place among its document's paragraphs
    sentences: tuple[str, ...]  # whitespace made single spaces; the words are the document's

    @property
    def text(self) -> str:
        return " ".join(self.sentences)


def passages_of(doc_id: str, text: str) -> list[Passage]:
    """A document's non-empty paragraphs, each split into sentences."""
    out = []
    for paragraph in PARAGRAPH_BREAK.split(text):
        flat = " ".join(paragraph.split())
        if flat:
            out.append(Passage(doc_id, len(out), tuple(_SENTENCE_BREAK.split(flat))))
    return out


def shingles(text: str, n: int = 3) -> set[tuple[str, ...]]:
    words = [w.lower() for w in _WORD.findall(text)]
    if len(words) < n:
        return {tuple(words)} if words else set()
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def near_duplicate(evidence: str, evidence_shingles: set[tuple[str, ...]], passage: str, share: float) -> bool:
    """Whether the passage holds the evidence, or at least `share` of its word trigrams."""
    if " ".join(evidence.split()) in passage:
        return True
    if not evidence_shingles:
        return False
    return len(evidence_shingles & shingles(passage)) / len(evidence_shingles) >= share


@dataclass(frozen=True)
class Piece:
    passage: int  # which padding passage the sentence comes from, in the order used
    text: str
    tokens: int


def fill(passages: Sequence[Passage], tokens_of: dict[str, int], budget: int) -> list[Piece] | None:
    """Sentences in order until the next would pass `budget` tokens; None when the
    passages run out first (the padding cannot be filled)."""
    out: list[Piece] = []
    used = 0
    for n, sentence in _sentences(passages):
        size = tokens_of[sentence]
        if used + size > budget:
            return out
        out.append(Piece(n, sentence, size))
        used += size
    return None


def _sentences(passages: Sequence[Passage]) -> Iterator[tuple[int, str]]:
    for n, passage in enumerate(passages):
        for sentence in passage.sentences:
            yield n, sentence
