"""Padding: paragraphs of the pool's documents as whole sentences in their own order, and
the filter that keeps any query's evidence (or its span, or a near copy) out of it."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from rapidfuzz import fuzz

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
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


class Repeats:
    """Whether a passage repeats any of the given evidence texts: holds one of them or its
    query's span (whitespace aside), holds `share` of its word trigrams, or matches it at
    rapidfuzz's `partial_ratio` of `ratio` or more (a near copy with a few words changed)."""

    def __init__(self, evidence: Sequence[str], spans: Sequence[str], share: float, ratio: float) -> None:
        self.evidence = [" ".join(e.split()) for e in evidence]
        self.exact = [*self.evidence, *(" ".join(s.split()) for s in spans if s.strip())]
        self.trigrams = [shingles(e) for e in self.evidence]
        self.share, self.ratio = share, ratio

    def __call__(self, passage: str) -> bool:
        if any(e in passage for e in self.exact):
            return True
        words = shingles(passage)
        if any(t and len(t & words) / len(t) >= self.share for t in self.trigrams):
            return True
        return any(fuzz.partial_ratio(e, passage, score_cutoff=self.ratio) for e in self.evidence)


@dataclass(frozen=True)
class Piece:
    passage: int  # which padding passage the sentence comes from, in the order used
    text: str
    tokens: int
    doc_id: str = ""  # the pool document it comes from


def fill(passages: Sequence[Passage], tokens_of: dict[str, int], budget: int, slack: int) -> list[Piece] | None:
    """Sentences in order up to `budget` tokens. The first that would pass it ends the fill
    once at most `slack` tokens are left; before that it is skipped with the rest of its
    paragraph (a table read as one long sentence, say) and the next paragraph tried. None
    when the passages run out first (the padding cannot be filled)."""
    out: list[Piece] = []
    left = budget
    for n, passage in enumerate(passages):
        for sentence in passage.sentences:
            size = tokens_of[sentence]
            if size > left:
                if left <= slack:
                    return out
                break
            out.append(Piece(n, sentence, size, passage.doc_id))
            left -= size
    return out if left <= slack else None


def cut_paragraphs(pieces: Sequence[Piece], passages: Sequence[Passage]) -> Iterator[str]:
    """The texts of the paragraphs a fill cut short: each a new text for the judges."""
    taken: dict[int, list[str]] = {}
    for piece in pieces:
        taken.setdefault(piece.passage, []).append(piece.text)
    for n, sentences in taken.items():
        if len(sentences) < len(passages[n].sentences):
            yield " ".join(sentences)
