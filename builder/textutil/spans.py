"""Locate reference quotes inside their source document as character spans.

An LLM is asked to copy evidence verbatim, but its copy drifts: whitespace is
collapsed, typographic quotes become straight ones, case changes, a final full
stop goes missing, or a word is altered.  :class:`DocumentIndex` tries, in
order, an exact search (the quote verbatim, any run of whitespace matching any
other: PosIR's regular-expression rule), a search over a normalized view of
both texts, and a fuzzy alignment; `methods` chooses which of the three run.
Offsets always refer to the *original* string (Python code points, half-open
``[start, end)``).

All functions are pure; nothing here does I/O.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from typing import NamedTuple

import numpy as np
from rapidfuzz import fuzz, process
from rapidfuzz.distance import LCSseq

from builder.textutil import ALL_METHODS, MatchMethod
from builder.textutil.normalize import OffsetMap, normalize_text, normalize_with_map

__all__ = [
    "ALL_METHODS",
    "DocumentIndex",
    "Span",
    "SpanFailure",
    "locate_references",
    "merge_spans",
    "normalize_text",
]


# Weakest last: a merged span is only as trustworthy as its weakest part.
_METHOD_STRENGTH: dict[str, int] = {"exact": 0, "normalized": 1, "fuzzy": 2}

# Below this many normalized characters a single edit already costs more than
# ten points and random partial hits become likely, so fuzzy matching of such
# short references is unreliable and is not attempted.
_MIN_FUZZY_CHARS = 8

# partial_ratio scores windows exactly as long as the quote. When the quote
# dropped words, such a window loses about twice as many points as the fitted
# span does, so the coarse search keeps candidates whose shortfall from 100 is
# up to this many times the final threshold's.
_COARSE_SHORTFALL_FACTOR = 2.5

# When fitting a fuzzy span, covering one more document character must match
# at least this fraction of a quote character to pay off. The ratio itself
# would demand about one half, which cuts off a changed word next to either
# end of the quote ("The and opinion" fits "ng opinion" best).
_EXTENT_CHAR_COST = 0.25

# A second alignment this close to the best one makes the location ambiguous.
_AMBIGUITY_MARGIN = 0.5

# Pads a haystack shorter than the needle: rapidfuzz would otherwise swap their
# roles and score a fragment of the needle as a perfect match. A noncharacter,
# so it matches nothing in real text.
_PAD_CHAR = "\uffff"


class SpanFailure(str, Enum):  # noqa: UP042 - a StrEnum would print differently where a reason is formatted
    """Why a reference could not be turned into a span."""

    NOT_FOUND = "span_not_found"
    AMBIGUOUS = "span_ambiguous"
    UNANSWERABLE = "unanswerable"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Span:
    """A half-open ``[start, end)`` code-point range of the original document."""

    start: int
    end: int
    method: MatchMethod
    score: float


def _strip_trailing_punctuation(text: str) -> str:
    """``text`` without its final run of punctuation and spaces."""
    end = len(text)
    while end and (text[end - 1] == " " or unicodedata.category(text[end - 1]).startswith("P")):
        end -= 1
    return text[:end]


def _ends_inside_word(haystack: str, end: int) -> bool:
    return 0 < end < len(haystack) and haystack[end - 1].isalnum() and haystack[end].isalnum()


def _find_unique(haystack: str, needle: str, *, whole_end: bool = False) -> int | SpanFailure:
    """Offset of the only occurrence (overlapping ones count as repeats).

    With ``whole_end`` an occurrence that stops in the middle of a word (or
    between two CJK characters) does not count.
    """
    found: list[int] = []
    at = haystack.find(needle)
    while at >= 0 and len(found) < 2:
        if not (whole_end and _ends_inside_word(haystack, at + len(needle))):
            found.append(at)
        at = haystack.find(needle, at + 1)
    if not found:
        return SpanFailure.NOT_FOUND
    return found[0] if len(found) == 1 else SpanFailure.AMBIGUOUS


def _find_unique_spaced(haystack: str, needle: str) -> tuple[int, int] | SpanFailure:
    """The only match of ``needle`` with every whitespace run matching any other run.

    Every match holds the needle's longest word verbatim, so only that word's
    occurrences are tried, each grown word by word in both directions.
    """
    words = needle.split()
    lengths = list(map(len, words))
    anchor = lengths.index(max(lengths))
    single = " ".join(words)
    before = sum(lengths[:anchor]) + anchor
    found: list[tuple[int, int]] = []
    at = haystack.find(words[anchor])
    while at >= 0 and len(found) < 2:
        start = at - before
        window = haystack[start : start + len(single)] if start >= 0 else ""
        if window and " ".join(window.split()) == window:
            # One space between words all along: only the verbatim quote fits here.
            match = (start, start + len(single)) if window == single else None
        else:
            match = _spaced_match_at(haystack, words, anchor, at)
        if match:
            found.append(match)
        at = haystack.find(words[anchor], at + 1)
    if not found:
        return SpanFailure.NOT_FOUND
    return found[0] if len(found) == 1 else SpanFailure.AMBIGUOUS


def _spaced_match_at(haystack: str, words: list[str], anchor: int, at: int) -> tuple[int, int] | None:
    """The match whose word ``anchor`` stands at ``at``, if the other words fit around it."""
    end = at + len(words[anchor])
    for word in words[anchor + 1 :]:
        gap = end
        while gap < len(haystack) and haystack[gap].isspace():
            gap += 1
        if gap == end or not haystack.startswith(word, gap):
            return None
        end = gap + len(word)
    start = at
    for word in reversed(words[:anchor]):
        gap = start
        while gap and haystack[gap - 1].isspace():
            gap -= 1
        if gap == start or not haystack.endswith(word, 0, gap):
            return None
        start = gap - len(word)
    return start, end


def _padded(haystack: str, length: int) -> str:
    return haystack + _PAD_CHAR * (length - len(haystack))


@lru_cache(maxsize=256)
def _steps(radius: int) -> np.ndarray:
    """0, -1, 1, -2, 2, ... up to ``radius``: offsets ordered by distance, left first."""
    return np.array([0] + [d for step in range(1, radius + 1) for d in (-step, step)], dtype=np.int64)


def _nearby(center: int, radius: int, low: int, high: int) -> np.ndarray:
    """Offsets in [low, high] ordered by distance from ``center``."""
    offsets = center + _steps(radius)
    return offsets[(offsets >= low) & (offsets <= high)]


def _gains(needle: str, windows: list[str], lengths: np.ndarray) -> np.ndarray:
    """Per window: characters of the needle it matches, less a cost per covered character."""
    return process.cdist([needle], windows, scorer=LCSseq.similarity)[0] - _EXTENT_CHAR_COST * lengths


def _refine(needle: str, haystack: str, start: int, end: int) -> tuple[int, int]:
    """Move a window's ends to where the quote's text begins and ends.

    partial_ratio windows are exactly as long as the quote, so they cut off or
    overhang text when the quote dropped or added words. Each end is moved in
    turn (coordinate ascent) to maximise matched characters minus a cost per
    covered character; of equal gains the offset nearest the current one wins.
    """
    radius = len(needle) // 6 + 6
    gain = LCSseq.similarity(needle, haystack[start:end]) - _EXTENT_CHAR_COST * (end - start)
    while True:
        ends = _nearby(end, radius, start + 1, len(haystack))
        new_end = int(ends[_gains(needle, [haystack[start:e] for e in ends.tolist()], ends - start).argmax()])
        starts = _nearby(start, radius, 0, new_end - 1)
        gains = _gains(needle, [haystack[s:new_end] for s in starts.tolist()], new_end - starts)
        best = int(gains.argmax())
        if gains[best] <= gain:
            return start, end
        start, end, gain = int(starts[best]), new_end, float(gains[best])


def _trim_spaces(haystack: str, start: int, end: int) -> tuple[int, int]:
    """Drop whitespace the alignment swallowed at either end."""
    while start < end and haystack[start].isspace():
        start += 1
    while end > start and haystack[end - 1].isspace():
        end -= 1
    return start, end


class _Fit(NamedTuple):
    """A fuzzy alignment: the fitted span, its ratio, and the coarse window."""

    start: int
    end: int
    score: float
    window_start: int
    window_end: int


def _coarse_cutoff(min_score: float) -> float:
    return max(0.0, 100.0 - _COARSE_SHORTFALL_FACTOR * (100.0 - min_score))


def _fit(needle: str, haystack: str, min_score: float) -> _Fit | None:
    """Best fuzzy alignment of ``needle`` in ``haystack``, if any comes close."""
    coarse = fuzz.partial_ratio_alignment(
        needle, _padded(haystack, len(needle)), score_cutoff=_coarse_cutoff(min_score)
    )
    window_end = min(coarse.dest_end, len(haystack)) if coarse else 0
    if coarse is None or window_end <= coarse.dest_start:
        return None
    start, end = _trim_spaces(haystack, *_refine(needle, haystack, coarse.dest_start, window_end))
    return _Fit(start, end, fuzz.ratio(needle, haystack[start:end]), coarse.dest_start, window_end)


def _has_rival(needle: str, haystack: str, best: _Fit, min_score: float) -> bool:
    """Whether text outside the best fit fits the needle about as well.

    Everything the best fit or its coarse window touched is masked, so a
    rival cannot be a shifted copy of the same occurrence.
    """
    masked_start = min(best.start, best.window_start)
    masked_end = max(best.end, best.window_end)
    for side in (haystack[:masked_start], haystack[masked_end:]):
        rival = _fit(needle, side, min_score) if side else None
        if rival and rival.score >= best.score - _AMBIGUITY_MARGIN:
            return True
    return False


def _fuzzy_in(needle: str, haystack: str, min_score: float) -> tuple[int, int, float] | SpanFailure:
    """The only good fuzzy alignment of ``needle`` in ``haystack``: its range and score."""
    best = _fit(needle, haystack, min_score)
    if best is None or best.score < min_score:
        return SpanFailure.NOT_FOUND
    if _has_rival(needle, haystack, best, min_score):
        return SpanFailure.AMBIGUOUS
    return best.start, best.end, best.score


class DocumentIndex:
    """Normalized view of one document, built once up front and shared by every
    :meth:`locate` call: what pays when many references share the document."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._view = normalize_with_map(text)

    def _normalized(self) -> tuple[str, OffsetMap]:
        return self._view

    def locate(
        self, reference: str, fuzzy_min_score: float = 90.0, methods: Sequence[MatchMethod] = ALL_METHODS
    ) -> Span | SpanFailure:
        """Find ``reference`` in the document with the chosen methods, in the order
        exact, normalized, fuzzy; an ambiguous result stops the search."""
        if not 0.0 <= fuzzy_min_score <= 100.0:
            raise ValueError(f"fuzzy_min_score must be within [0, 100], got {fuzzy_min_score}")
        if not methods or any(m not in ALL_METHODS for m in methods):
            raise ValueError(f"methods must be a non-empty subset of {list(ALL_METHODS)}, got {list(methods)}")
        quote = reference.strip()
        if not quote:
            return SpanFailure.NOT_FOUND
        result: Span | SpanFailure = SpanFailure.NOT_FOUND
        if "exact" in methods:
            found = _find_unique_spaced(self.text, quote)
            result = Span(*found, "exact", 100.0) if isinstance(found, tuple) else found
        if result is not SpanFailure.NOT_FOUND or list(methods) == ["exact"]:
            return result
        needle = normalize_text(quote)
        if "normalized" in methods:
            result = self._locate_normalized(needle)
        if result is SpanFailure.NOT_FOUND and "fuzzy" in methods and len(needle) >= _MIN_FUZZY_CHARS:
            result = self._locate_fuzzy(needle, quote, fuzzy_min_score)
        return result

    def _locate_normalized(self, needle: str) -> Span | SpanFailure:
        found = self._find_normalized(needle, whole_end=False)
        trimmed = _strip_trailing_punctuation(needle)
        if found is SpanFailure.NOT_FOUND and trimmed and trimmed != needle:
            # The quote's final punctuation was added or changed by the LLM.
            # Its text must then end where a word ends, or "the cat." would
            # match inside "the catalog".
            found = self._find_normalized(trimmed, whole_end=True)
        return Span(*found, "normalized", 100.0) if isinstance(found, tuple) else found

    def _find_normalized(self, needle: str, whole_end: bool) -> tuple[int, int] | SpanFailure:
        """The original range of the only occurrence of ``needle`` in the normalized view."""
        norm_text, offsets = self._normalized()
        found = _find_unique(norm_text, needle, whole_end=whole_end)
        return offsets.to_original(found, found + len(needle)) if isinstance(found, int) else found

    def _locate_fuzzy(self, needle: str, quote: str, min_score: float) -> Span | SpanFailure:
        norm_text, offsets = self._normalized()
        found = _fuzzy_in(needle, norm_text, min_score)
        if isinstance(found, SpanFailure):
            return found
        return Span(*offsets.to_original(found[0], found[1]), "fuzzy", found[2])


def merge_spans(spans: Sequence[Span]) -> list[Span]:
    """Sort spans and merge those that overlap or touch.

    A merged span keeps the weakest method and the lowest score of its parts.
    """
    merged: list[Span] = []
    for span in sorted(spans, key=lambda s: (s.start, s.end)):
        if merged and span.start <= merged[-1].end:
            merged[-1] = _union(merged[-1], span)
        else:
            merged.append(span)
    return merged


def _union(a: Span, b: Span) -> Span:
    method = max(a.method, b.method, key=_METHOD_STRENGTH.__getitem__)
    return Span(min(a.start, b.start), max(a.end, b.end), method, min(a.score, b.score))


def locate_references(
    index_or_text: DocumentIndex | str,
    references: Sequence[str],
    fuzzy_min_score: float = 90.0,
    methods: Sequence[MatchMethod] = ALL_METHODS,
) -> list[Span] | SpanFailure:
    """Locate every reference of one query; all must succeed.

    No references means the question is unanswerable. Otherwise the first
    reference that fails decides the failure reason; on success the spans are
    returned sorted and merged (see :func:`merge_spans`).
    """
    if isinstance(references, str):
        raise TypeError("references must be a sequence of strings, not a single string")
    if not references:
        return SpanFailure.UNANSWERABLE
    index = index_or_text if isinstance(index_or_text, DocumentIndex) else DocumentIndex(index_or_text)
    spans: list[Span] = []
    for reference in references:
        found = index.locate(reference, fuzzy_min_score, methods)
        if isinstance(found, SpanFailure):
            return found
        spans.append(found)
    return merge_spans(spans)
