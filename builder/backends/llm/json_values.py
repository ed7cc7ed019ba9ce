"""Finding the JSON values in a model's free text, in one linear pass with bounded nesting.

Answers come from models and from the cache, so they can be anything: megabytes of
brackets, unclosed strings, prose around the JSON. One scan over the structural
characters finds every balanced `{...}` / `[...]` stretch; only those are decoded, and
never one nested deeper than `MAX_DEPTH`, so the decoder cannot hit the recursion limit.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

# Far deeper than any answer a prompt asks for, far shallower than the recursion limit.
MAX_DEPTH = 100

# Spans tried before giving up: an answer follows at most a little bracketed prose.
MAX_TRIES = 1000

_TOKEN = re.compile(r'[][{}",\\]')
_OPENER_OF = {"}": "{", "]": "["}


@dataclass(slots=True)
class _Span:
    """A bracketed stretch of the text; `children` are the closed spans directly inside it."""

    start: int
    opener: str
    end: int = -1
    usable: bool = True
    children: list[_Span] = field(default_factory=list)


@dataclass
class Scan:
    """What one pass over an answer found."""

    text: str
    spans: list[_Span]
    trailing_commas: list[int]
    too_deep: bool

    def values(self) -> Iterator[Any]:
        """Decoded top-level values, last first; a span that does not decode yields its children."""
        todo = list(self.spans)
        for _ in range(MAX_TRIES):
            if not todo:
                return
            span = todo.pop()
            ok, value = self._decode(span)
            if ok:
                yield value
            else:
                todo.extend(span.children)

    def _decode(self, span: _Span) -> tuple[bool, Any]:
        if not span.usable:
            return False, None
        try:
            return True, json.loads(self.text[span.start : span.end])
        except ValueError:
            pass
        lo = bisect.bisect_left(self.trailing_commas, span.start)
        hi = bisect.bisect_left(self.trailing_commas, span.end)
        if lo == hi:
            return False, None
        cuts = [span.start - 1, *self.trailing_commas[lo:hi], span.end]
        variant = "".join(self.text[a + 1 : b] for a, b in zip(cuts, cuts[1:]))
        try:
            return True, json.loads(variant)
        except ValueError:
            return False, None


def scan_json(text: str) -> Scan:
    """Find the balanced bracket spans of `text`, tracking strings inside them."""
    top: list[_Span] = []
    stack: list[_Span] = []
    commas: list[int] = []
    overflow = 0  # openers past MAX_DEPTH, counted but not tracked
    poisoned = 0  # the bottom `poisoned` frames enclose something too deep to decode
    too_deep = in_string = False
    comma = skip = -1
    for match in _TOKEN.finditer(text):
        i, ch = match.start(), match.group()
        if i < skip or not (stack or ch in "{["):
            continue  # an escaped character, or prose outside any bracket
        if in_string:
            if ch == "\\":
                skip = i + 2
            elif ch == '"':
                in_string = False
            continue
        if ch == ",":
            comma = i
            continue
        if ch in "}]" and comma >= 0 and not text[comma + 1 : i].strip():
            commas.append(comma)
        comma = -1
        if ch == '"':
            in_string = True
        elif ch in "{[":
            if len(stack) < MAX_DEPTH:
                stack.append(_Span(i, ch))
            else:
                overflow += 1
                poisoned = len(stack)
                too_deep = True
        elif ch in "}]":
            if overflow:
                overflow -= 1
                continue
            span = stack.pop()
            span.end = i + 1
            span.usable = _OPENER_OF[ch] == span.opener and len(stack) >= poisoned
            poisoned = min(poisoned, len(stack))
            (stack[-1].children if stack else top).append(span)
    # Spans closed inside a bracket that never closed are top-level too; they come in text order.
    for frame in stack:
        top.extend(frame.children)
    return Scan(text, top, commas, too_deep)
