"""Frozen reference copy (see tests/textutil/legacy/__init__.py). The normalized view of a text that reference matching compares in, with a map from
every normalized offset back to the original characters it came from."""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from functools import lru_cache

__all__ = ["OffsetMap", "normalize_text", "normalize_with_map"]

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

# Three token kinds, so that ordinary ASCII text is handled in bulk:
# - ascii: printable ASCII words joined by single spaces, not directly followed
#   by a non-ASCII character (which might be a mark that attaches to it);
# - space: any other whitespace run;
# - other: one character followed by non-ASCII characters, handled per cluster.
_TOKEN = re.compile(
    r"(?P<ascii>[!-~]+(?: [!-~]+)*(?![^\s\x00-\x7f]))"
    r"|(?P<space>\s+)"
    r"|(?P<other>\S[^\s\x00-\x7f]*)"
)


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

    Each segment covers a run of normalized characters. In a linear segment the
    k-th normalized character came from exactly one original character; in a
    block segment every normalized character stands for the whole original
    range (a ligature, a composed accent, a collapsed whitespace run).
    """

    def __init__(self) -> None:
        self._norm_starts: list[int] = []
        self._orig_starts: list[int] = []
        self._orig_ends: list[int] = []
        self._linear: list[bool] = []
        self._norm_end = 0

    def add_linear(self, orig_start: int, length: int) -> None:
        if self._linear and self._linear[-1] and self._orig_ends[-1] == orig_start:
            self._orig_ends[-1] += length
        else:
            self._append(orig_start, orig_start + length, linear=True)
        self._norm_end += length

    def add_block(self, orig_start: int, orig_end: int, norm_length: int) -> None:
        if norm_length:
            self._append(orig_start, orig_end, linear=False)
            self._norm_end += norm_length

    def _append(self, orig_start: int, orig_end: int, *, linear: bool) -> None:
        self._norm_starts.append(self._norm_end)
        self._orig_starts.append(orig_start)
        self._orig_ends.append(orig_end)
        self._linear.append(linear)

    def _char_range(self, norm_index: int) -> tuple[int, int]:
        seg = bisect_right(self._norm_starts, norm_index) - 1
        if not self._linear[seg]:
            return self._orig_starts[seg], self._orig_ends[seg]
        orig = self._orig_starts[seg] + norm_index - self._norm_starts[seg]
        return orig, orig + 1

    def to_original(self, norm_start: int, norm_end: int) -> tuple[int, int]:
        """Smallest original range whose normalization covers the given range."""
        return self._char_range(norm_start)[0], self._char_range(norm_end - 1)[1]


def _add_other_token(token: str, orig_start: int, pieces: list[str], offsets: OffsetMap) -> None:
    """Fold a non-ASCII token one cluster at a time, keeping exact offsets."""
    folded = [(start, end, _fold_cluster(token[start:end])) for start, end in _clusters(token)]
    whole = _fold(token)
    if "".join(text for _, _, text in folded) != whole:
        # Normalization combined clusters (e.g. Hangul jamo): map as one block.
        pieces.append(whole)
        offsets.add_block(orig_start, orig_start + len(token), len(whole))
        return
    for start, end, text in folded:
        pieces.append(text)
        if end - start == 1 and len(text) == 1:
            offsets.add_linear(orig_start + start, 1)
        else:
            offsets.add_block(orig_start + start, orig_start + end, len(text))


def normalize_with_map(text: str) -> tuple[str, OffsetMap]:
    """Normalized text (not stripped) and the map back to ``text``."""
    pieces: list[str] = []
    offsets = OffsetMap()
    for match in _TOKEN.finditer(text):
        token, start = match.group(), match.start()
        if match.lastgroup == "ascii":
            pieces.append(token.lower())
            offsets.add_linear(start, len(token))
        elif match.lastgroup == "space":
            pieces.append(" ")
            offsets.add_block(start, match.end(), 1)
        else:
            _add_other_token(token, start, pieces, offsets)
    return "".join(pieces), offsets


def normalize_text(text: str) -> str:
    """The form both texts are compared in by the normalized and fuzzy steps.

    NFKC, casefold, ASCII quotes and dashes, invisible format characters
    dropped, every whitespace run collapsed to one space, ends stripped.
    """
    return normalize_with_map(text)[0].strip()
