"""Fuzzy alignment of a quote near the places its longest words occur: the direct
matcher's fuzzy step (see `builder.textutil.direct_spans`).

Aligning a quote against a whole document costs the same whether or not it is there;
a quote close enough to pass keeps most of its words, so only the neighbourhoods of
those words are aligned, each with one LCS alignment.
"""

from __future__ import annotations

import numpy as np
from rapidfuzz import fuzz, process
from rapidfuzz.distance import LCSseq

from builder.textutil.spans import (
    _AMBIGUITY_MARGIN,
    _EXTENT_CHAR_COST,
    SpanFailure,
    _coarse_cutoff,
    _fuzzy_in,
    _trim_spaces,
)

__all__ = ["code_points", "fuzzy_near_words", "lower", "lower_ascii", "occurrences"]

# Fuzzy search looks around the quote's three longest words (of at least so many
# characters), or up to eight when those occur nowhere; past so many places it
# aligns the whole text instead. One plain ratio per place (in C++) costs a few
# microseconds, aligning the whole text and checking it for rivals a millisecond or
# more, so common words alone do not send a quote there.
_FUZZY_ANCHORS = 3
_MAX_FUZZY_ANCHORS = 8
_MIN_FUZZY_ANCHOR = 4
_MAX_PLACES = 256
# How far below the coarse cutoff a place's plain ratio may fall and still be aligned:
# a quote that dropped words sits a little off where its later words put it.
_QUICK_SLACK = 10.0

_UPPER_A = np.uint32(ord("A"))  # code points below it wrap around to large numbers
_TO_LOWER = np.uint32(32)


def fuzzy_near_words(needle: str, text: str, lowered: str, min_score: float) -> tuple[int, int, float] | SpanFailure:
    """Fuzzy alignment of the lower-cased ``needle`` in ``text``, tried only where one of
    the quote's longest words occurs (``lowered``: the text, ASCII letters lowered).

    A quote close enough to pass keeps most of its words, so the alignment and any
    rival of it hold one of them. Each such word placed where it occurs puts the quote
    somewhere; one ratio tells whether that place is worth aligning, which costs far
    less than aligning the whole text. When none of its longer words occurs, or they
    occur in too many places, the whole text is aligned.
    """
    length = len(needle)
    words = sorted(
        {w for w in needle.split() if len(w) >= _MIN_FUZZY_ANCHOR and w.isascii()}, key=lambda w: (-len(w), w)
    )
    found: set[int] = set()
    for used, word in enumerate(words[:_MAX_FUZZY_ANCHORS]):
        if found and used >= _FUZZY_ANCHORS:
            break
        found.update(max(0, at - needle.find(word)) for at in occurrences(lowered, word))
    placed = sorted(found)
    if not placed or len(placed) > _MAX_PLACES:
        return _fuzzy_in(needle, lower(text), min_score)
    windows = [lower(text[at : at + length]) for at in placed]
    quick = process.cdist([needle], windows, scorer=fuzz.ratio, score_cutoff=_coarse_cutoff(min_score) - _QUICK_SLACK)[
        0
    ]
    places = [at for at, score in zip(placed, quick.tolist()) if score]
    margin = length // 4 + 16
    fits = [fit for at in places if (fit := _align(needle, text, at - margin, at + length + margin))]
    best = max(fits, key=lambda fit: fit[2], default=None)
    if best is None or best[2] < min_score:
        return SpanFailure.NOT_FOUND
    for at in places:
        if min(at + length, best[1]) - max(at, best[0]) >= length // 2:
            continue  # the best fit's own place
        for low, high in (
            (at - margin, min(at + length + margin, best[0])),
            (max(at - margin, best[1]), at + length + margin),
        ):
            rival = _align(needle, text, low, high) if high > low else None
            if rival and rival[2] >= best[2] - _AMBIGUITY_MARGIN:
                return SpanFailure.AMBIGUOUS
    return best


def _align(needle: str, text: str, low: int, high: int) -> tuple[int, int, float] | None:
    """The stretch of ``text[low:high]`` the needle aligns with, and its ratio.

    One LCS alignment of the needle against the whole stretch; of its matched blocks,
    the run kept is the one that matches most characters less a cost per covered
    character, so stray matches far from the rest fall away. An alignment matches each
    character as early as it can, which may pull the quote's first characters onto
    strays before it; the start is therefore taken from the alignment of both reversed.
    """
    low, high = max(0, low), min(len(text), high)
    stretch = lower(text[low:high])
    start, end, first = _best_run(needle, stretch)
    if first:  # the quote's first characters went elsewhere or nowhere
        from_end = len(stretch) - _best_run(needle[::-1], stretch[::-1])[1]
        start = from_end if from_end < end else start
    start, end = _trim_spaces(stretch, start, end)
    return (low + start, low + end, fuzz.ratio(needle, stretch[start:end])) if end > start else None


def _best_run(needle: str, stretch: str) -> tuple[int, int, int]:
    """Of one LCS alignment, the run of matched blocks that matches most characters less
    a cost per covered character: where it begins and ends in ``stretch``, and the
    needle's first character in it."""
    best = (0.0, 0, 0, 0)
    lowest, lowest_at, lowest_first, matched = float("inf"), 0, 0, 0
    for block in LCSseq.editops(needle, stretch).as_matching_blocks():
        if not block.size:
            continue
        if matched - _EXTENT_CHAR_COST * block.b < lowest:
            lowest, lowest_at, lowest_first = matched - _EXTENT_CHAR_COST * block.b, block.b, block.a
        matched += block.size
        gain = matched - _EXTENT_CHAR_COST * (block.b + block.size) - lowest
        if gain > best[0]:
            best = (gain, lowest_at, block.b + block.size, lowest_first)
    return best[1], best[2], best[3]


def lower(text: str) -> str:
    """``text`` lower-cased, one character for one."""
    lowered = text.lower()
    return lowered if len(lowered) == len(text) else lower_ascii(text)


def code_points(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def lower_ascii(text: str) -> str:
    codes = code_points(text)
    return (
        (codes + _TO_LOWER * (codes - _UPPER_A < 26)).astype(np.uint32).tobytes().decode("utf-32-le", "surrogatepass")
    )


def occurrences(haystack: str, needle: str) -> list[int]:
    found = []
    at = haystack.find(needle)
    while at >= 0:
        found.append(at)
        at = haystack.find(needle, at + 1)
    return found
