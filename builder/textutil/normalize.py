"""The normalized view of a text that reference matching compares in, with a map from
every normalized offset back to the original characters it came from.

Most of a web document is ASCII words and whitespace, whose normalization is lower case
and one space per whitespace run; that part is done on a code-point array in bulk. Only
the words that hold a non-ASCII character go through the Unicode folding one cluster at a
time. Cutting the text at word boundaries changes nothing: no fold reaches across
whitespace.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import NamedTuple

import numpy as np

__all__ = ["OffsetMap", "fold_word", "normalize_text", "normalize_with_map", "simple_fold"]

# Applied after NFKC, which has already turned "…" into "...", fullwidth
# quotes into ASCII ones and the non-breaking hyphen into U+2010.
_QUOTE_AND_DASH = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u2032": "'",
        "\u2039": "'",
        "\u203a": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u201f": '"',
        "\u00ab": '"',
        "\u00bb": '"',
        "\u2010": "-",
        "\u2012": "-",
        "\u2013": "-",
        "\u2014": "-",
        "\u2015": "-",
        "\u2212": "-",
        "\u2043": "-",
        # Invisible characters that web text sprinkles inside words.
        "\u00ad": None,
        "\u200b": None,
        "\u2060": None,
        "\ufeff": None,
    }
)

# Characters that never start a user-perceived character of their own.
_JOINERS = frozenset(
    ["\u200d"]
    + [chr(c) for c in range(0xFE00, 0xFE10)]
    + [chr(c) for c in range(0x1F3FB, 0x1F400)]
    + [chr(c) for c in range(0xE0020, 0xE0080)]
    + [chr(c) for c in range(0xE0100, 0xE01F0)]
)

# Inside one word: printable ASCII runs not directly followed by a non-ASCII
# character (which might be a mark that attaches to it), and single characters
# followed by their non-ASCII companions, handled per cluster.
_TOKEN = re.compile(r"(?P<ascii>[!-~]+(?![^\s\x00-\x7f]))|(?P<other>\S[^\s\x00-\x7f]*)")

# What `str.isspace` (and the `\s` of `re`) calls whitespace, by code point; U+3000
# is the last, and the entry after it stands for every code point above.
_IS_SPACE = np.array([chr(c).isspace() for c in range(0x3002)])
_SPACE = np.uint32(ord(" "))
_UPPER_TO_LOWER = np.uint32(32)


def _fold(piece: str) -> str:
    """Compatibility-normalize, casefold and straighten quotes/dashes."""
    return unicodedata.normalize("NFKC", piece).casefold().translate(_QUOTE_AND_DASH)


# Clusters repeat a lot (CJK characters, curly quotes); whole tokens do not.
_fold_cluster = lru_cache(maxsize=65536)(_fold)


def _attaches(char: str, previous: str) -> bool:
    """Whether ``char`` belongs to the same visible character as ``previous``."""
    return previous == "\u200d" or char in _JOINERS or unicodedata.category(char).startswith("M")


def _clusters(token: str) -> list[tuple[int, int]]:
    """Split ``token`` into (start, end) ranges of base character plus marks."""
    bounds = [0]
    for i in range(1, len(token)):
        if not _attaches(token[i], token[i - 1]):
            bounds.append(i)
    bounds.append(len(token))
    return list(zip(bounds, bounds[1:]))


class OffsetMap:
    """Maps normalized offsets back to ranges of the original text.

    The k-th normalized character stands for original characters
    ``[starts[k], ends[k])``: one character, or a whole range where a ligature,
    a composed accent or a collapsed whitespace run became one or more characters.
    """

    def __init__(self, starts: np.ndarray, ends: np.ndarray) -> None:
        self._starts = starts
        self._ends = ends

    def to_original(self, norm_start: int, norm_end: int) -> tuple[int, int]:
        """Smallest original range whose normalization covers the given range."""
        return int(self._starts[norm_start]), int(self._ends[norm_end - 1])


def _fold_other(token: str, at: int, pieces: list[str], starts: list[int], ends: list[int]) -> None:
    """Fold a non-ASCII token one cluster at a time, keeping exact offsets."""
    folded = [(start, end, _fold_cluster(token[start:end])) for start, end in _clusters(token)]
    whole = _fold(token)
    if "".join(text for _, _, text in folded) != whole:
        # Normalization combined clusters (e.g. Hangul jamo): map as one block.
        folded = [(0, len(token), whole)]
    for start, end, text in folded:
        pieces.append(text)
        starts.extend([at + start] * len(text))
        ends.extend([at + end] * len(text))


@lru_cache(maxsize=65536)
def simple_fold(char: str) -> str | None:
    """The one character ``char`` folds to on its own, or None when it folds to more or
    fewer, or may join its neighbour into one visible character."""
    folded = _fold(char)
    if len(folded) != 1 or char == "\u200d" or char in _JOINERS or unicodedata.category(char).startswith("M"):
        return None
    return folded


@lru_cache(maxsize=16384)
def fold_word(word: str) -> tuple[str, tuple[int, ...] | None, tuple[int, ...] | None]:
    """A whitespace-free word with non-ASCII characters: its folded form and, per
    folded character, the range of the word it came from (None: one for one)."""
    chars = [simple_fold(char) for char in word]
    if None not in chars:
        # Each character folds alone to one character: the common case of curly
        # quotes, dashes and accented letters, unless folding the whole word joins them.
        whole = _fold(word)
        if "".join(chars) == whole:  # type: ignore[arg-type]
            return whole, None, None
    pieces: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    for match in _TOKEN.finditer(word):
        token, at = match.group(), match.start()
        if match.lastgroup == "ascii":
            pieces.append(token.lower())
            starts.extend(range(at, at + len(token)))
            ends.extend(range(at + 1, at + len(token) + 1))
        else:
            _fold_other(token, at, pieces, starts, ends)
    return "".join(pieces), tuple(starts), tuple(ends)


def _codes(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def _text(codes: np.ndarray) -> str:
    return codes.astype(np.uint32).tobytes().decode("utf-32-le", "surrogatepass")


class _Word(NamedTuple):
    """A word whose folding changed its length: where it sits and what it became."""

    start: int
    end: int
    folded: str
    starts: tuple[int, ...]
    ends: tuple[int, ...]


def normalize_with_map(text: str) -> tuple[str, OffsetMap]:
    """Normalized text (not stripped) and the map back to ``text``."""
    n = len(text)
    if not n:
        return "", OffsetMap(np.zeros(0, np.int64), np.zeros(0, np.int64))
    codes = _codes(text)
    others = np.flatnonzero(codes > 127)
    # ASCII whitespace is 9-13 and 28-32; a few non-ASCII characters are too.
    space = (codes <= 32) & ((codes >= 28) | ((codes >= 9) & (codes <= 13)))
    space[others] = _IS_SPACE[np.minimum(codes[others], len(_IS_SPACE) - 1)]
    folded = np.where(space, _SPACE, codes + _UPPER_TO_LOWER * ((codes >= 65) & (codes <= 90)))
    special = others[~space[others]]
    resized = _fold_words(text, special, space, folded) if special.size else []
    # A whitespace run becomes one space standing for the whole run, so every kept
    # character ends where the next one begins.
    kept_at = np.flatnonzero(np.concatenate(([True], ~(space[1:] & space[:-1]))))
    ends = np.append(kept_at[1:], n)
    if not resized:
        return _text(folded[kept_at]), OffsetMap(kept_at, ends)
    return _splice(_text(folded[kept_at]), kept_at, ends, resized)


def _fold_words(text: str, special: np.ndarray, space: np.ndarray, folded: np.ndarray) -> list[_Word]:
    """Fold every word that holds a non-ASCII character: in place in ``folded`` where the
    word keeps its length character for character, else returned for splicing."""
    word_starts = np.flatnonzero(~space & np.concatenate(([True], space[:-1])))
    word_ends = np.flatnonzero(~space & np.append(space[1:], True)) + 1
    words = np.unique(word_starts.searchsorted(special, "right") - 1)
    resized: list[_Word] = []
    at: list[int] = []
    same_length: list[str] = []
    for start, end in zip(word_starts[words].tolist(), word_ends[words].tolist()):
        word_text, starts, ends = fold_word(text[start:end])
        if starts is None or ends is None:
            at.extend(range(start, end))
            same_length.append(word_text)
        else:
            resized.append(_Word(start, end, word_text, starts, ends))
    folded[at] = _codes("".join(same_length))
    return resized


def _splice(bulk: str, kept_at: np.ndarray, ends: np.ndarray, resized: list[_Word]) -> tuple[str, OffsetMap]:
    """Put each resized word's folding in place of its characters in the bulk result."""
    pieces: list[str] = []
    starts: list[np.ndarray] = []
    stops: list[np.ndarray] = []
    done = 0
    for word in resized:
        upto, after = kept_at.searchsorted([word.start, word.end]).tolist()
        pieces += [bulk[done:upto], word.folded]
        starts += [kept_at[done:upto], np.array(word.starts, dtype=np.int64) + word.start]
        stops += [ends[done:upto], np.array(word.ends, dtype=np.int64) + word.start]
        done = after
    pieces.append(bulk[done:])
    starts.append(kept_at[done:])
    stops.append(ends[done:])
    return "".join(pieces), OffsetMap(np.concatenate(starts), np.concatenate(stops))


def normalize_text(text: str) -> str:
    """The form both texts are compared in by the normalized and fuzzy steps.

    NFKC, casefold, ASCII quotes and dashes, invisible format characters
    dropped, every whitespace run collapsed to one space, ends stripped.
    """
    if text.isascii():
        return " ".join(text.lower().split())
    # Words fold independently and whitespace runs become one space.
    return " ".join(word.lower() if word.isascii() else fold_word(word)[0] for word in text.split()).strip()
