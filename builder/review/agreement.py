"""Agreement between reviewers beyond chance: Cohen's kappa for two, Fleiss' kappa for
any number, each over the items every reviewer in question judged."""

from __future__ import annotations

from collections.abc import Sequence


def cohens_kappa(first: Sequence[str], second: Sequence[str]) -> float | None:
    """None where chance agreement is total (both always gave the same one answer)."""
    n = len(first)
    categories = sorted(set(first) | set(second))
    observed = sum(a == b for a, b in zip(first, second)) / n
    expected = sum((first.count(c) / n) * (second.count(c) / n) for c in categories)
    return None if expected == 1 else (observed - expected) / (1 - expected)


def fleiss_kappa(ratings: Sequence[Sequence[str]]) -> float | None:
    """`ratings[item]` holds every reviewer's answer for that item (the same number each)."""
    raters = len(ratings[0])
    categories = sorted({answer for row in ratings for answer in row})
    counts = [[row.count(c) for c in categories] for row in ratings]
    total = len(ratings) * raters
    shares = [sum(row[j] for row in counts) / total for j in range(len(categories))]
    per_item = [(sum(x * x for x in row) - raters) / (raters * (raters - 1)) for row in counts]
    observed = sum(per_item) / len(per_item)
    expected = sum(p * p for p in shares)
    return None if expected == 1 else (observed - expected) / (1 - expected)
