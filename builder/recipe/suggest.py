""" "Did you mean …" hints for names a recipe gets wrong."""

from __future__ import annotations

import difflib


def did_you_mean(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
