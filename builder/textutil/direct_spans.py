"""Locating a few references in a document without normalizing all of it.

Normalizing a whole document costs more than a plain fuzzy alignment of one quote, so
a document that only a few references point into is searched directly:

- exact: as in :class:`DocumentIndex`, on the original text;
- normalized: the normalized quote's longest ASCII word is looked up case-blind in
  the original text (and in the folded form of the few words holding a non-ASCII
  character); from each hit the other words are compared one original word at a
  time, each folded alone. Normalization never reaches across whitespace, so this
  finds exactly the occurrences the normalized view holds. Text it cannot judge word
  by word (a word folding to nothing or to several words, no usable anchor, too many
  hits) falls back to the full view;
- fuzzy: rapidfuzz alignment on the original text with ASCII letters lowered (one
  character for one, so offsets need no map), only around the places where one of
  the quote's longest words occurs verbatim, unless it has none.

:func:`matcher_for` chooses this or the up-front index by the number of references.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from builder.textutil.fuzzy_near import code_points, fuzzy_near_words, lower, occurrences
from builder.textutil.normalize import OffsetMap, fold_word, normalize_with_map, simple_fold
from builder.textutil.spans import DocumentIndex, Span, SpanFailure

__all__ = ["INDEX_FROM_REFERENCES", "DirectMatcher", "matcher_for"]

# From this many references on, one document's normalized view costs less than
# looking each of them up directly (benchmarks/localize.py measures both).
INDEX_FROM_REFERENCES = 8

# An anchor this short or this common makes word-by-word checking slower than the view.
_MIN_ANCHOR = 3
_MAX_CANDIDATES = 16

_ASCII_LOWER = bytes.maketrans(bytes(range(65, 91)), bytes(range(97, 123)))
_NO_CODES = np.zeros(0, dtype=np.uint32)
_NEXT_WORD = re.compile(r"\s+(\S+)")
_WORD_REST = re.compile(r"\S*")
_NOT_ALNUM = re.compile(r"[^a-z0-9]+")
_NOT_ALNUM_BYTES = bytes(c for c in range(128) if not chr(c).isalnum() or chr(c).isupper())
_NOT_ALNUM_ASCII = bytes(c for c in range(256) if not (c < 128 and chr(c).isalnum()))


class _Unjudgeable(Exception):
    """The text near a hit cannot be compared word by word: use the full view."""


class _Word(NamedTuple):
    """One original word, its folded form and per folded character its range in the word
    (None: one for one)."""

    start: int
    end: int
    folded: str
    starts: tuple[int, ...] | None
    ends: tuple[int, ...] | None

    def offset(self, at: int) -> int:
        """Original offset where folded character ``at`` begins."""
        return self.start + (self.starts[at] if self.starts else at)

    def end_offset(self, at: int) -> int:
        """Original offset where folded character ``at - 1`` ends."""
        return self.start + (self.ends[at - 1] if self.ends else at)


def _fold_original(text: str, start: int, end: int) -> _Word:
    word = text[start:end]
    if word.isascii():
        return _Word(start, end, word.lower(), None, None)
    folded, starts, ends = fold_word(word)
    if not folded or len(folded.split()) != 1 or folded.split()[0] != folded:
        raise _Unjudgeable
    return _Word(start, end, folded, starts, ends)


class DirectMatcher(DocumentIndex):
    """Looks references up in one document without building its normalized view first;
    gives the same exact and normalized spans as :class:`DocumentIndex`."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._lazy_view: tuple[str, OffsetMap] | None = None
        self._encoded: bytes | None = None
        self._lowered: str | None = None
        self._opaque: list[tuple[_Word, bool]] | None = None
        self._letters: bytes | None = None

    def _normalized(self) -> tuple[str, OffsetMap]:
        if self._lazy_view is None:
            self._lazy_view = normalize_with_map(self.text)
        return self._lazy_view

    def _find_normalized(self, needle: str, whole_end: bool) -> tuple[int, int] | SpanFailure:
        if self._lazy_view is None:
            if _letters_and_digits(needle) not in self._skeleton():
                return SpanFailure.NOT_FOUND
            try:
                return self._walk_find(needle, whole_end)
            except _Unjudgeable:
                pass
        return super()._find_normalized(needle, whole_end)

    def _locate_fuzzy(self, needle: str, quote: str, min_score: float) -> Span | SpanFailure:
        found = fuzzy_near_words(lower(" ".join(quote.split())), self.text, self._lowered_text(), min_score)
        return found if isinstance(found, SpanFailure) else Span(found[0], found[1], "fuzzy", found[2])

    # --- normalized search, word by word -------------------------------------------

    def _walk_find(self, needle: str, whole_end: bool) -> tuple[int, int] | SpanFailure:
        words = needle.split(" ")
        plain = [len(w) * (w.isascii() and w.isalnum()) for w in words]
        if "" in words or max(plain) < _MIN_ANCHOR:
            raise _Unjudgeable
        # Every occurrence holds each of the needle's words, so any one can anchor the
        # search: the first of the three longest whose hits can all be judged (counting
        # each word's hits first would scan the text once per word).
        longest = [k for k in sorted(range(len(words)), key=lambda k: -plain[k])[:3] if plain[k] >= _MIN_ANCHOR]
        for anchor in longest:
            try:
                hits = self._anchor_hits(words[anchor])
                break
            except _Unjudgeable:
                continue
        else:
            raise _Unjudgeable
        found: list[tuple[int, int]] = []
        for word, at in hits:
            span = self._grow(words, anchor, word, at, whole_end)
            if span:
                found.append(span)
                if len(found) == 2:
                    return SpanFailure.AMBIGUOUS
        return found[0] if found else SpanFailure.NOT_FOUND

    def _anchor_hits(self, anchor: str) -> list[tuple[_Word, int]]:
        """Every place the anchor occurs in a folded word: the word and where in it."""
        opaque = self._opaque_words()
        hits: list[tuple[_Word, int]] = []
        for word, judgeable in opaque:
            for at in occurrences(word.folded, anchor):
                if not judgeable:
                    raise _Unjudgeable
                hits.append((word, at))
        starts = [word.start for word, _ in opaque]
        for start in occurrences(self._lowered_text(), anchor):
            inside = bisect_right(starts, start) - 1
            if inside < 0 or opaque[inside][0].end <= start:
                word = self._word_around(start)
                if word.starts is not None or not word.folded.startswith(anchor, start - word.start):
                    raise _Unjudgeable  # a word _inert let through after all
                hits.append((word, start - word.start))
                if len(hits) > _MAX_CANDIDATES:
                    raise _Unjudgeable
        return hits

    def _word_around(self, at: int) -> _Word:
        return _fold_original(self.text, *_around(self.text, at))

    def _grow(self, words: list[str], anchor: int, word: _Word, at: int, whole_end: bool) -> tuple[int, int] | None:
        """The occurrence whose anchor word is folded ``word`` from ``at``, if the other
        words fit around it."""
        last = len(words) - 1
        if (anchor > 0 and at != 0) or (anchor < last and at + len(words[anchor]) != len(word.folded)):
            return None
        start = self._grow_back(words[:anchor], word, at)
        if start is None:
            return None
        end = self._grow_forward(words[anchor + 1 :], word, at + len(words[anchor]), whole_end)
        return None if end is None else (start, end)

    def _grow_back(self, before: list[str], word: _Word, at: int) -> int | None:
        """Where the occurrence begins, given the words before the anchor."""
        if not before:
            return word.offset(at)
        wanted = " ".join(before) + " "
        begin = word.start - len(wanted)
        piece = self.text[max(begin, 0) : word.start]
        if begin >= 0 and piece.isascii() and " ".join(piece.split()) + " " == piece:
            # Plain ASCII, single spaces: it folds to itself lowered.
            return begin if piece.lower() == wanted else None
        low = max(0, word.start - 2 * len(wanted) - 16)
        if self._letters_differ(low, word.start, wanted, from_end=True):
            return None
        first, first_at = word, at
        for i in range(len(before) - 1, -1, -1):
            first = self._previous_word(first.start)
            if first is None or not (first.folded == before[i] if i else first.folded.endswith(before[0])):
                return None
            first_at = len(first.folded) - len(before[i])
        return first.offset(first_at)

    def _grow_forward(self, after: list[str], word: _Word, end: int, whole_end: bool) -> int | None:
        """Where the occurrence ends, given the words after the anchor."""
        if after:
            wanted = " " + " ".join(after)
            stop = word.end + len(wanted)
            piece = self.text[word.end : stop]
            follower = self.text[stop : stop + 1]
            if piece.isascii() and follower.isascii() and " " + " ".join(piece.split()) == piece:
                # Plain ASCII, single spaces, up to an ASCII character, which cannot
                # fold into it: it folds to itself lowered.
                inside = follower.isalnum() and wanted[-1].isalnum()
                return None if piece.lower() != wanted or (whole_end and inside) else stop
            if self._letters_differ(word.end, word.end + 2 * len(wanted) + 16, wanted, from_end=False):
                return None
        final, final_end = word, end
        for i, expected in enumerate(after):
            final = self._next_word(final.end)
            if final is None or not (
                final.folded == expected if i < len(after) - 1 else final.folded.startswith(expected)
            ):
                return None
            final_end = len(expected)
        folded = final.folded
        if whole_end and final_end < len(folded) and folded[final_end - 1].isalnum() and folded[final_end].isalnum():
            return None
        return final.end_offset(final_end)

    def _letters_differ(self, low: int, high: int, wanted: str, from_end: bool) -> bool:
        """Whether the ASCII letters and digits of ``text[low:high]`` rule out that the
        words next to the anchor (on its left when ``from_end``) fold to ``wanted``.

        Away from opaque words folding keeps every ASCII letter and digit, lowered, and
        makes none, so those of the text must continue those of ``wanted``.
        """
        opaque = self._opaque_words()
        last = bisect_right([word.start for word, _ in opaque], high - 1) - 1
        if last >= 0 and opaque[last][0].end > low:
            return False
        high = min(high, len(self.text))
        have = _NOT_ALNUM.sub("", self._lowered_text()[low:high])
        want = _NOT_ALNUM.sub("", wanted)
        if len(have) < len(want) and (low if from_end else len(self.text) - high):
            return False  # the stretch read may be too short to tell
        return not (have.endswith(want) if from_end else have.startswith(want))

    def _next_word(self, end: int) -> _Word | None:
        match = _NEXT_WORD.match(self.text, end)
        return _fold_original(self.text, *match.span(1)) if match else None

    def _previous_word(self, start: int) -> _Word | None:
        end = start
        while end and self.text[end - 1].isspace():
            end -= 1
        if not end or end == start:
            return None
        begin = end
        while begin and not self.text[begin - 1].isspace():
            begin -= 1
        return _fold_original(self.text, begin, end)

    # --- per-document state, built on first use ---------------------------------------

    def _utf16(self) -> bytes:
        if self._encoded is None:
            self._encoded = self.text.encode("utf-16-le", "surrogatepass")
        return self._encoded

    def _code_points(self) -> np.ndarray:
        units = np.frombuffer(self._utf16(), dtype=np.uint16)
        # One unit per character unless some lie beyond the Basic Multilingual Plane.
        return units if len(units) == len(self.text) else code_points(self.text)

    def _lowered_text(self) -> str:
        """The text with its ASCII letters lowered, at the same offsets: a find of ASCII
        in it is a case-blind match. Other characters may come out changed (the
        quickest way lowers bytes of UTF-16), but never into ASCII ones."""
        if self._lowered is None:
            if self.text.isascii():
                self._lowered = self.text.lower()
            else:
                self._lowered = self._utf16().translate(_ASCII_LOWER).decode("utf-16-le", "surrogatepass")
        return self._lowered

    def _skeleton(self) -> bytes:
        """The ASCII letters and digits of the normalized view, in order (spliced from the
        lowered text and the folded opaque words): a needle whose own are not a run of
        them cannot occur."""
        if self._letters is None:
            if self.text.isascii():
                self._letters = self.text.encode("ascii").translate(_ASCII_LOWER, _NOT_ALNUM_ASCII)
            else:
                # The lowered text turns no other character into ASCII, so dropping
                # what is not ASCII keeps exactly its ASCII letters and digits.
                lowered, pieces, done = self._lowered_text(), [], 0
                for word, _ in self._opaque_words():
                    pieces += [
                        lowered[done : word.start].encode("ascii", "ignore"),
                        word.folded.encode("ascii", "ignore"),
                    ]
                    done = word.end
                pieces.append(lowered[done:].encode("ascii", "ignore"))
                self._letters = b"".join(pieces).translate(None, _NOT_ALNUM_BYTES)
        return self._letters

    def _opaque_words(self) -> list[tuple[_Word, bool]]:
        """The words where a case-blind search of the original text may miss what their
        folding holds, folded, in order, each with whether it can be compared word by word."""
        if self._opaque is None:
            self._opaque = []
            codes = self._code_points() if not self.text.isascii() else _NO_CODES
            # Web text holds few distinct non-ASCII characters, mostly inert ones.
            opaque = [char for char in map(chr, sorted(set(codes[codes > 127].tolist()))) if not _inert(char)]
            if opaque:
                for at in sorted(at for char in opaque for at in occurrences(self.text, char)):
                    if self._opaque and at < self._opaque[-1][0].end:
                        continue
                    try:
                        self._opaque.append((self._word_around(at), True))
                    except _Unjudgeable:
                        start, end = _around(self.text, at)
                        self._opaque.append((_Word(start, end, fold_word(self.text[start:end])[0], None, None), False))
        return self._opaque


@lru_cache(maxsize=65536)
def _inert(char: str) -> bool:
    """Whether ``char`` folds to one character that is no ASCII letter or digit and
    never joins the character before it; a word of ASCII and such characters folds one
    for one, so a case-blind search of the original finds every ASCII word in it."""
    folded = simple_fold(char)
    if folded is None or (folded.isascii() and folded.isalnum()):
        return False
    return not any(unicodedata.combining(c) or 0x1160 <= ord(c) <= 0x11FF for c in unicodedata.normalize("NFKC", char))


def _letters_and_digits(text: str) -> bytes:
    """The ASCII letters and digits of ``text`` (lower case already), in order."""
    return text.encode("ascii", "ignore").translate(None, _NOT_ALNUM_BYTES)


def _around(text: str, at: int) -> tuple[int, int]:
    start = at
    while start and not text[start - 1].isspace():
        start -= 1
    match = _WORD_REST.match(text, at)
    return start, match.end() if match else at


def matcher_for(text: str, references: int) -> DocumentIndex:
    """The index when many references share the document, else the direct matcher."""
    return DocumentIndex(text) if references >= INDEX_FROM_REFERENCES else DirectMatcher(text)
