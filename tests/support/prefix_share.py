"""How much of the prompt text a prefix cache could serve: for each request in the order
they were sent, the longest prefix it shares with any earlier request.

This is what vLLM's automatic prefix caching, llama.cpp's prompt cache and the hosted
APIs' prompt caching reuse (with an unbounded cache; a real one also evicts).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence


def request_text(messages: Sequence[Mapping[str, object]]) -> str:
    """A request's prompt as a chat template lays it out: each message's role, then its text."""
    return "".join(f"<{m.get('role', '')}>\n{m.get('content', '')}\n" for m in messages)


def _common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix, found by halving (string comparison runs in C)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def shared_prefixes(texts: Sequence[str]) -> list[int]:
    """Per text: the longest prefix it shares with any text before it.

    Among earlier texts kept in sorted order, the longest common prefix with a new text is
    reached at one of its two sorted neighbours.
    """
    seen: list[str] = []
    out = []
    for text in texts:
        at = bisect.bisect_left(seen, text)
        best = max((_common_prefix(text, seen[i]) for i in (at - 1, at) if 0 <= i < len(seen)), default=0)
        out.append(best)
        seen.insert(at, text)
    return out


def prefix_share(texts: Sequence[str]) -> float:
    """Share of all characters that a prefix cache could serve (0 when there is no text)."""
    total = sum(len(t) for t in texts)
    return sum(shared_prefixes(texts)) / total if total else 0.0
