"""Holm's correction within a family of tests, and p-values shown with their floor.

A family is the set of tests one question is answered by: two retrievers' overall
comparisons, every group of one grouping for one pair of retrievers, every position of
one ColDeR probe for one retriever. Holm's step-down adjustment
(`statsmodels.stats.multitest.multipletests(method="holm")`) controls the chance of any
false rejection within the family. A family holds the testable tests only: a test
without a p (no queries) or marked `testable: False` (one query, or no difference to
test, whose p is 1 by construction) is left out of it, gets no Holm p, and does not
count in `family_size`, so it cannot inflate the others' correction.

A randomized test cannot give a p below its floor (2 / (shuffles + 1) two-sided, as
scipy.stats.permutation_test computes it), so a p at the floor is shown as "≤ floor";
after Holm's correction that bound is multiplied with the rest.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def holm_adjust(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm-adjusted p-values in the same order; None stays None and is not counted."""
    from statsmodels.stats.multitest import multipletests

    present = [i for i, p in enumerate(pvalues) if p is not None]
    out: list[float | None] = [None] * len(pvalues)
    if present:
        adjusted = multipletests([pvalues[i] for i in present], method="holm")[1]
        for i, p in zip(present, adjusted):
            out[i] = float(p)
    return out


def apply_holm(tests: Sequence[dict], family: str) -> None:
    """Add `p_holm`, `family` and `family_size` (the testable tests with a p) to each test
    dict; a test whose raw p sits at its floor keeps `at_floor` for its adjusted p too."""
    adjusted = holm_adjust([t.get("p") if t.get("testable", True) else None for t in tests])
    size = sum(p is not None for p in adjusted)
    for test, p in zip(tests, adjusted):
        test.update(p_holm=p, family=family, family_size=size)


def p_text(value: float | None, at_floor: bool = False) -> str:
    """`0.042`, `3.1e-04`, or `≤ 0.0002` for a p that the number of shuffles cannot go under."""
    if value is None:
        return "-"
    shown = f"{value:.3f}" if value >= 0.001 else f"{value:.1e}"
    if at_floor and value < 1:
        # Rounded up, so the bound shown is never under the floor (1/1235 shows as 0.0009).
        shown = f"{math.ceil(value * 1e4 - 1e-9) / 1e4:.4f}".rstrip("0") if value >= 1e-4 else f"{value:.1e}"
        return f"≤ {shown}"
    return shown


def significance_mark(p_holm: float | None) -> str:
    """Marks of a Holm-adjusted p: ** below 0.01, * below 0.05."""
    if p_holm is None:
        return ""
    return "**" if p_holm < 0.01 else "*" if p_holm < 0.05 else ""
