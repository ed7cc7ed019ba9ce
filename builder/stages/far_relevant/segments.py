"""Split a text at random word boundaries and shuffle the pieces, keeping an offset map.

This is the de-biasing of Hofstätter et al. (2021) that paper 001 applies to MS MARCO:
cutting only between words keeps every word whole, and the map moves character spans
along with the piece that holds them.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

_GAP = re.compile(r"\s+")


@dataclass(frozen=True)
class Piece:
    start: int  # [start, end) in the original text
    end: int
    new_start: int  # where the piece begins in the shuffled text


@dataclass(frozen=True)
class Shuffled:
    text: str
    pieces: tuple[Piece, ...]  # in original order

    def move(self, start: int, end: int) -> tuple[int, int] | None:
        """New offsets of a span, or None when no single piece holds all of it."""
        for piece in self.pieces:
            if piece.start <= start and end <= piece.end:
                shift = piece.new_start - piece.start
                return start + shift, end + shift
        return None


def word_gaps(text: str) -> list[tuple[int, int]]:
    """Whitespace runs with a word on each side: the places a text may be cut."""
    return [m.span() for m in _GAP.finditer(text) if m.start() > 0 and m.end() < len(text)]


def _cuttable(gaps: list[tuple[int, int]], protected: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Gaps that do not fall inside (or touch the inside of) a protected span."""
    return [(gs, ge) for gs, ge in gaps if not any(s < ge and gs < e for s, e in protected)]


def shuffle_segments(
    text: str, segments: int, rng: random.Random, *, protected: Sequence[tuple[int, int]] = (), joiner: str = " "
) -> Shuffled:
    """Cut `text` into at most `segments` pieces at random word gaps outside `protected`,
    then join the pieces in random order. Leading and trailing whitespace is dropped."""
    if not text.strip():
        return Shuffled(text, (Piece(0, len(text), 0),))
    gaps = _cuttable(word_gaps(text), protected)
    cuts = sorted(rng.sample(gaps, min(segments - 1, len(gaps))))
    lead = len(text) - len(text.lstrip())
    bounds = [lead, *(x for gap in cuts for x in gap), len(text.rstrip())]
    spans = list(zip(bounds[::2], bounds[1::2]))
    order = list(range(len(spans)))
    rng.shuffle(order)
    new_starts: dict[int, int] = {}
    at = 0
    for k in order:
        new_starts[k] = at
        at += spans[k][1] - spans[k][0] + len(joiner)
    shuffled = joiner.join(text[s:e] for s, e in (spans[k] for k in order))
    pieces = tuple(Piece(s, e, new_starts[k]) for k, (s, e) in enumerate(spans))
    return Shuffled(shuffled, pieces)
