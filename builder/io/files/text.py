"""Cleaning converted text and joining its pieces into one document with a location map.

Cleaning happens piece by piece before the pieces are joined, so every offset in the map,
and every span later found in the text, indexes the text that is published.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

PIECE_SEPARATOR = "\n\n"
# A word broken at a line end by a hyphen ("instal-\nlation"), joined when a lower-case
# letter follows: a capital or a digit after the break is more likely a real compound.
_BROKEN_WORD = re.compile(r"(?<=[^\W\d_])-[ \t]*\n[ \t]*(?=[a-zß-öø-ÿ])")
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
PREAMBLE = "(before the first heading)"


@dataclass(frozen=True)
class Piece:
    """A run of text and where it sits in the file: `kind` is page, heading or paragraph;
    `number` the page or paragraph number (1-based) or the section's ordinal."""

    kind: str
    label: str
    number: int
    text: str


def clean(text: str) -> str:
    """Mojibake and broken characters fixed (ftfy: curly quotes and full-width forms are left
    as they are), soft hyphens removed, words hyphenated across a line break joined."""
    import ftfy

    text = ftfy.fix_text(text, ftfy.TextFixerConfig(uncurl_quotes=False, fix_character_width=False))
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\u00ad", "")
    return _BROKEN_WORD.sub("", text)


def assemble(pieces: list[Piece]) -> tuple[str, list[dict[str, Any]]]:
    """The cleaned pieces joined by a blank line, and per kept piece its character range in
    that text ({start, end, kind, label, number}); pieces left empty by cleaning are skipped."""
    parts: list[str] = []
    locations: list[dict[str, Any]] = []
    at = 0
    for piece in pieces:
        body = clean(piece.text).strip()
        if not body:
            continue
        if parts:
            at += len(PIECE_SEPARATOR)
        parts.append(body)
        locations.append(
            {"start": at, "end": at + len(body), "kind": piece.kind, "label": piece.label, "number": piece.number}
        )
        at += len(body)
    return PIECE_SEPARATOR.join(parts), locations


def heading_sections(text: str) -> list[Piece]:
    """Markdown cut at its ATX headings (`#` to `######`, not inside code fences): each
    section, heading line included, labelled with its heading path ("Setup > Linux")."""
    sections: list[Piece] = []
    trail: list[tuple[int, str]] = []
    lines: list[str]
    label, lines, fenced = PREAMBLE, [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        found = None if fenced else _HEADING.match(line)
        if found:
            if "".join(lines).strip():
                sections.append(Piece("heading", label, len(sections) + 1, "\n".join(lines)))
            level, title = len(found.group(1)), found.group(2).strip()
            trail = [(lv, t) for lv, t in trail if lv < level] + [(level, title)]
            label, lines = " > ".join(t for _, t in trail), []
        lines.append(line)
    if "".join(lines).strip():
        sections.append(Piece("heading", label, len(sections) + 1, "\n".join(lines)))
    return sections


def first_heading(text: str) -> str | None:
    """The first level-one heading of Markdown text, outside code fences."""
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        found = None if fenced else _HEADING.match(line)
        if found and len(found.group(1)) == 1:
            return found.group(2).strip()
    return None


def paragraphs(text: str) -> list[Piece]:
    """Plain text cut at blank lines, each run of lines one numbered paragraph."""
    runs = [p for p in re.split(r"\n[ \t]*\n", text.replace("\r\n", "\n")) if p.strip()]
    return [Piece("paragraph", f"paragraph {n}", n, p) for n, p in enumerate(runs, start=1)]
