"""Numbered span markers that travel through a translation.

Before a document goes to the translator, every reference span is wrapped in a pair of
numbered markers (`⟦1⟧ … ⟦/1⟧`). The model is told to keep them around the translation
of the same words; where they land in its answer gives the span in the target text.
The bracket characters are rare mathematical symbols that no tokenizer splits into
something else; a document that already contains them gets another pair of brackets.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

STYLES = (("⟦", "⟧"), ("⟪", "⟫"), ("⦃", "⦄"), ("⟬", "⟭"))

Tag = tuple[int, bool]  # (marker number, is the closing marker)


@dataclass(frozen=True)
class MarkerStyle:
    left: str
    right: str

    def tag(self, n: int, closing: bool = False) -> str:
        return f"{self.left}{'/' if closing else ''}{n}{self.right}"


@cache
def _pattern(style: MarkerStyle) -> re.Pattern[str]:
    # Models sometimes put spaces inside a marker; those still count.
    return re.compile(f"{re.escape(style.left)}\\s*(/?)\\s*(\\d+)\\s*{re.escape(style.right)}")


def pick_style(*texts: str) -> MarkerStyle | None:
    """The first bracket pair that none of the texts contains (None: every pair collides)."""
    for left, right in STYLES:
        if not any(left in t or right in t for t in texts):
            return MarkerStyle(left, right)
    return None


def mark(
    text: str, start: int, end: int, spans: Mapping[int, tuple[int, int]], style: MarkerStyle
) -> tuple[str, Counter[Tag]]:
    """`text[start:end]` with the markers of every span boundary inside it.

    An opening marker belongs to the piece holding the span's first character, a closing
    one to the piece holding its last. At one position closings come before openings,
    and nested spans open outer-first and close inner-first.
    """
    inserts: list[tuple[int, int, int, int, bool]] = []
    for n, (s, e) in spans.items():
        if start <= s < end:
            inserts.append((s, 1, -e, n, False))
        if start < e <= end:
            inserts.append((e, 0, -s, n, True))
    inserts.sort()
    out, at = [], start
    for pos, _, _, n, closing in inserts:
        out += [text[at:pos], style.tag(n, closing)]
        at = pos
    out.append(text[at:end])
    return "".join(out), Counter((n, closing) for _, _, _, n, closing in inserts)


def strip_tags(text: str, style: MarkerStyle) -> tuple[str, list[tuple[int, Tag]]]:
    """Remove every marker; return the clean text and where each marker stood in it."""
    clean: list[str] = []
    found: list[tuple[int, Tag]] = []
    at = size = 0
    for m in _pattern(style).finditer(text):
        clean.append(text[at : m.start()])
        size += m.start() - at
        found.append((size, (int(m.group(2)), m.group(1) == "/")))
        at = m.end()
    clean.append(text[at:])
    return "".join(clean), found


def piece_problem(answer: str, expected: Counter[Tag], style: MarkerStyle) -> str | None:
    """Why the markers in one translated piece are unusable, or None when they are fine."""
    _, found = strip_tags(answer, style)
    got = Counter(tag for _, tag in found)
    missing = sorted(expected - got)
    extra = sorted(got - expected)
    if missing or extra:
        parts = ([f"missing {', '.join(style.tag(*t) for t in missing)}"] if missing else []) + (
            [f"unexpected or repeated {', '.join(style.tag(*t) for t in extra)}"] if extra else []
        )
        return "; ".join(parts)
    where = {tag: pos for pos, tag in found}
    for (n, closing), pos in where.items():
        if not closing and (n, True) in where and where[(n, True)] < pos:
            return f"{style.tag(n, True)} comes before {style.tag(n)}"
    return None


def spans_from_tags(text: str, tags: list[tuple[int, Tag]]) -> tuple[dict[int, tuple[int, int]], set[int]]:
    """Span per marker number in the clean text (whitespace trimmed), and the numbers that
    are lost: not exactly one opening and one closing, in order, around some text."""
    opens: dict[int, list[int]] = {}
    closes: dict[int, list[int]] = {}
    for pos, (n, closing) in tags:
        (closes if closing else opens).setdefault(n, []).append(pos)
    spans: dict[int, tuple[int, int]] = {}
    broken: set[int] = set()
    for n in set(opens) | set(closes):
        o, c = opens.get(n, []), closes.get(n, [])
        if len(o) != 1 or len(c) != 1 or o[0] >= c[0]:
            broken.add(n)
            continue
        s, e = o[0], c[0]
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if s == e:
            broken.add(n)
        else:
            spans[n] = (s, e)
    return spans, broken
