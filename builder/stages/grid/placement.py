"""Put the evidence, character for character, at a depth of the padding."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from builder.stages.grid.padding import Piece

PARAGRAPH = "\n\n"


@dataclass(frozen=True)
class Placed:
    text: str
    evidence_start: int  # where the evidence begins in text
    depth: float  # padding tokens before the evidence over all padding tokens


def compose(pieces: Sequence[Piece]) -> str:
    """Padding alone (a distractor): a paragraph's sentences joined by spaces, paragraphs by a blank line."""
    parts: list[str] = []
    for j, piece in enumerate(pieces):
        if j:
            parts.append(" " if piece.passage == pieces[j - 1].passage else PARAGRAPH)
        parts.append(piece.text)
    return "".join(parts)


def halves(pieces: Sequence[Piece], at: int) -> tuple[str, str] | None:
    """The two paragraphs the evidence makes of one padding paragraph when it goes before
    pieces[at]; None when it goes between two paragraphs."""
    if not 0 < at < len(pieces) or pieces[at - 1].passage != pieces[at].passage:
        return None
    passage = pieces[at].passage
    before = [p.text for p in pieces[:at] if p.passage == passage]
    after = [p.text for p in pieces[at:] if p.passage == passage]
    return " ".join(before), " ".join(after)


def place(
    pieces: Sequence[Piece], evidence: str, depth: float, allowed: Callable[[int], bool] = lambda at: True
) -> Placed:
    """The evidence goes between two sentences, as a paragraph of its own, at the allowed
    place where the padding tokens before it come closest to `depth` of them all (the
    earlier place on a tie). The first and last places are always allowed."""
    total = sum(p.tokens for p in pieces)
    prefix = [0]
    for piece in pieces:
        prefix.append(prefix[-1] + piece.tokens)
    ranked = sorted(range(len(prefix)), key=lambda j: (abs(prefix[j] - depth * total), j))
    at = next(j for j in ranked if j in (0, len(pieces)) or allowed(j))
    parts: list[str] = []
    start = 0
    previous: int | None = None
    for j in range(len(pieces) + 1):
        if j == at:
            if parts:
                parts.append(PARAGRAPH)
            start = sum(len(p) for p in parts)
            parts.append(evidence)
            previous = -1
        if j == len(pieces):
            break
        piece = pieces[j]
        if parts:
            parts.append(" " if piece.passage == previous else PARAGRAPH)
        parts.append(piece.text)
        previous = piece.passage
    return Placed("".join(parts), start, prefix[at] / total if total else 0.0)
