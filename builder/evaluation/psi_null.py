"""PSI against its own null: what PSI would a retriever with no position effect show here?

PSI = 1 - min/max of group means is a min/max statistic: with finite groups it is above 0
even when position does not matter, and the more groups and the fewer queries in each,
the further above. Its null distribution is taken by shuffling the position labels among
the queries (within each length bucket, so document length stays where it was) and
recomputing PSI each time. Reported beside the observed PSI:

- `p`: (1 + shuffles with PSI >= observed) / (1 + shuffles), one-sided; `at_floor` when
  no shuffle reached the observed PSI, so p is the least the shuffles can give,
  1 / (1 + shuffles), and is shown as `≤` that;
- `null_median` and `null_p95`: the median and 95th percentile of the null;
- `above_null_median`: observed PSI - null median, the part of PSI that a retriever
  without a position effect would not show on these queries (negative when PSI is under
  it; not clipped at 0, so it is not biased upward under the null);
- `above_null_median_ci`: its 95 % interval from the permutation distribution,
  [observed - null 97.5th percentile, observed - null 2.5th percentile]. It assumes that
  PSI scatters around its own centre as the null scatters around its median (a shift);
  under the null that holds by construction, so the interval covers 0 exactly when the
  observed PSI lies within the null's central 95 % (checked on shuffled labels in the
  tests). A percentile bootstrap of PSI itself is not offered: a min/max statistic's
  resamples sit above it, and its interval left out 0 on every null set tried.

On very large sets the shuffles are capped (`shuffles_for`; the count used is reported).
Only groups with at least `min_group` queries take part (their queries are shuffled
among them) unless small groups are asked for; the groups left out are named.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from builder.evaluation.intervals import BootstrapSettings, psi_values
from builder.evaluation.multiple import p_text

# Cells (shuffles x queries) handled at once: bounds memory on large query sets.
_CELLS_PER_BATCH = 4_000_000
# Cells one null may take in all: past it, large sets get fewer shuffles (never under
# MIN_SHUFFLES, whose floor of 0.001 is enough for a p that is not corrected further).
_CELLS_PER_NULL = 200_000_000
MIN_SHUFFLES = 999


def shuffles_for(n: int, asked: int) -> int:
    """The shuffles a null over `n` queries gets: `asked`, fewer on very large sets."""
    return min(asked, max(MIN_SHUFFLES, _CELLS_PER_NULL // max(n, 1)))


@dataclass(frozen=True)
class NullSettings:
    permutations: int = 9999
    seed: int = 0
    min_group: int = 30
    include_small: bool = False  # take groups below min_group into the PSI as well


def null_settings(bootstrap: BootstrapSettings) -> NullSettings:
    """The null's settings from the bootstrap's: same seed, group floor and shuffle count."""
    return NullSettings(bootstrap.permutations, bootstrap.seed, bootstrap.min_group, bootstrap.psi_small_groups)


def stratified_shuffles(codes: np.ndarray, strata: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` rows of `codes`, each shuffled within every stratum (shape (count, n))."""
    out = np.empty((count, len(codes)), dtype=codes.dtype)
    for stratum in np.unique(strata):
        rows = np.flatnonzero(strata == stratum)
        out[:, rows] = rng.permuted(np.broadcast_to(codes[rows], (count, len(rows))), axis=1)
    return out


def shuffled_psis(
    values: np.ndarray, codes: np.ndarray, size: int, strata: np.ndarray, permutations: int, seed: int
) -> np.ndarray:
    """PSI of `values` under `permutations` stratified shuffles of the group `codes`."""
    rng = np.random.default_rng(seed)
    n = len(values)
    batch = max(1, min(permutations, _CELLS_PER_BATCH // max(n, 1)))
    out = []
    for start in range(0, permutations, batch):
        shuffled = stratified_shuffles(codes, strata, min(batch, permutations - start), rng)
        b = shuffled.shape[0]
        flat = (np.arange(b)[:, None] * size + shuffled).ravel()
        sums = np.bincount(flat, weights=np.broadcast_to(values, (b, n)).ravel(), minlength=b * size)
        counts = np.bincount(flat, minlength=b * size)
        with np.errstate(invalid="ignore", divide="ignore"):
            means = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan).reshape(b, size)
        out.append(psi_values(means))
    return np.concatenate(out) if out else np.empty(0)


def psi_with_null(
    values: np.ndarray,
    codes: np.ndarray,
    labels: Sequence[object],
    settings: NullSettings,
    strata: np.ndarray | None = None,
) -> dict:
    """The PSI over the groups that take part, with its permutation null.

    `codes[i]` is query i's group (an index into `labels`, -1 for none) and `strata[i]`
    its length bucket (shuffles stay within it); the result names the groups left out."""
    values = np.asarray(values, dtype=float)
    codes = np.asarray(codes, dtype=np.int64)
    strata = np.zeros(len(codes), dtype=np.int64) if strata is None else np.asarray(strata, dtype=np.int64)
    counts = np.bincount(codes[codes >= 0], minlength=len(labels))
    too_small = [labels[k] for k in range(len(labels)) if 0 < counts[k] < settings.min_group]
    taking_part = (counts > 0) & ((counts >= settings.min_group) | settings.include_small)
    out: dict = {
        "value": None,
        "p": None,
        "at_floor": False,
        "null_median": None,
        "null_p95": None,
        "above_null_median": None,
        "above_null_median_ci": None,
        "permutations": settings.permutations,
        "stratified_by": "length bucket",
        "groups": [labels[k] for k in np.flatnonzero(taking_part)],
        "small_groups": too_small,
        "small_groups_included": settings.include_small and bool(too_small),
        "reason": None,
    }
    if taking_part.sum() < 2:
        out["reason"] = (
            f"fewer than 2 groups of at least {settings.min_group} queries ({len(too_small)} smaller group(s) left out)"
        )
        return out
    rows = np.flatnonzero((codes >= 0) & taking_part[np.maximum(codes, 0)])
    kept_values, kept_codes, kept_strata = values[rows], codes[rows], strata[rows]
    observed = float(np.round(psi_values(_means(kept_values, kept_codes, len(labels))), 12))
    if not np.isfinite(observed):
        out["reason"] = "every group taking part scores 0"
        return out
    shuffles = shuffles_for(len(rows), settings.permutations)
    null = shuffled_psis(kept_values, kept_codes, len(labels), kept_strata, shuffles, settings.seed)
    # Rounded to 12 decimals: means of equal scores taken in another order differ in the
    # last bits, which would print a null of equal PSIs as -0.000.
    null = np.round(null[np.isfinite(null)], 12)
    # Ties within rounding count as reaching the observed value.
    reached = int(np.sum(null >= observed - 1e-12))
    out.update(value=observed, p=(1 + reached) / (1 + null.size), at_floor=reached == 0, permutations=shuffles)
    if null.size:
        median, p95, low, high = (float(q) for q in np.quantile(null, [0.5, 0.95, 0.025, 0.975]))
        out.update(
            null_median=median,
            null_p95=p95,
            above_null_median=observed - median,
            above_null_median_ci=[observed - high, observed - low],
        )
    return out


def _means(values: np.ndarray, codes: np.ndarray, size: int) -> np.ndarray:
    sums = np.bincount(codes, weights=values, minlength=size)
    counts = np.bincount(codes, minlength=size)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def above_median_text(null: dict, digits: int = 3) -> str:
    """`+0.007 [-0.067, +0.057]`: PSI above its null median with the interval."""
    low, high = null["above_null_median_ci"]
    return f"{null['above_null_median']:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}]"


def psi_null_text(null: dict | None, digits: int = 3) -> str:
    """`0.069 (null median 0.062, 95% 0.123; p 0.418; above the null median +0.007 [-0.067,
    +0.057])`, or why there is none."""
    if not null:
        return "-"
    if null["value"] is None:
        return f"no PSI: {null['reason']}"
    if null["null_median"] is None:
        return f"{null['value']:.{digits}f} (no null: every shuffle left a group without queries)"
    text = (
        f"{null['value']:.{digits}f} (null median {null['null_median']:.{digits}f}, 95% "
        f"{null['null_p95']:.{digits}f}; p {p_text(null['p'], null['at_floor'])}; above the null median "
        f"{above_median_text(null, digits)})"
    )
    if null["small_groups_included"]:
        text += f"; includes groups under the minimum size: {', '.join(map(str, null['small_groups']))}"
    elif null["small_groups"]:
        text += f"; left out, too small: {', '.join(map(str, null['small_groups']))}"
    return text
