"""Put the evidence, character for character, at a depth of the padding."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from builder.stages.grid.padding import Piece

PARAGRAPH = "\n\n"


@dataclass(frozen=True)
class Placed:
    text: str
    evidence_start: int  # where the evidence begins in text
    depth: float  # padding tokens before the evidence over all padding tokens


def place(pieces: Sequence[Piece], evidence: str, depth: float) -> Placed:
    """The evidence goes between two sentences, as a paragraph of its own, where the padding
    tokens before it come closest to `depth` of them all (the earlier place on a tie)."""
    total = sum(p.tokens for p in pieces)
    prefix = [0]
    for piece in pieces:
        prefix.append(prefix[-1] + piece.tokens)
    at = min(range(len(prefix)), key=lambda j: (abs(prefix[j] - depth * total), j))
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
