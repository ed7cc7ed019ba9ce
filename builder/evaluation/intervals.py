"""Paired bootstrap over queries: every figure of one resample comes from the same draw.

A resample draws n query rows with replacement, exactly as `scipy.stats.bootstrap` draws
them (`rng.integers(0, n, (resamples, n))` from `numpy.random.default_rng(seed)`), so an
interval of a plain mean equals scipy's percentile interval on the same data and seed.
By hand rather than through scipy because all figures (group means, their PSI, bin means
inside length buckets) and all retrievers must share each draw, and a group may be
missing from a resample (that resample then gives no value for it and is left out of
its interval).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np

# Rows of query indices drawn at once: bounds memory on large query sets.
_CELLS_PER_BATCH = 4_000_000


@dataclass(frozen=True)
class BootstrapSettings:
    resamples: int = 1000
    seed: int = 0
    confidence: float = 0.95
    min_group: int = 30  # groups with fewer queries are marked small and get no interval
    # Shuffles of the permutation tests (paired tests, PSI's null): 9999 puts the two-sided
    # floor at 2/10000, so even 20 Holm-corrected tests can reach 0.004.
    permutations: int = 9999
    psi_small_groups: bool = False  # take groups below min_group into PSI and its null

    def describe(self) -> dict[str, object]:
        return {
            "method": "paired percentile bootstrap over queries",
            "resamples": self.resamples,
            "seed": self.seed,
            "confidence": self.confidence,
            "min_group": self.min_group,
        }


def draws(n: int, resamples: int, seed: int) -> Iterator[np.ndarray]:
    """Batches of resampled row indices, shape (batch, n), in scipy.stats.bootstrap's order."""
    rng = np.random.default_rng(seed)
    batch = max(1, min(resamples, _CELLS_PER_BATCH // max(n, 1)))
    for start in range(0, resamples, batch):
        yield rng.integers(0, n, (min(batch, resamples - start), n))


@dataclass(frozen=True)
class Partition:
    """Rows split into `size` groups: `codes[i]` is row i's group, -1 for rows left out."""

    codes: np.ndarray
    size: int


def group_means(values: np.ndarray, partitions: Mapping[str, Partition], index: np.ndarray) -> dict[str, np.ndarray]:
    """Mean of each value column per group under each row of `index` (shape (b, n));
    returns arrays of shape (b, groups, columns), NaN where a group drew no row."""
    b = index.shape[0]
    drawn = values[index]  # (b, n, columns)
    rows = np.arange(b)[:, None]
    out = {}
    for name, part in partitions.items():
        codes = part.codes[index]
        keep = codes >= 0
        flat = (rows * part.size + codes)[keep]
        counts = np.bincount(flat, minlength=b * part.size).astype(float)
        sums = np.stack(
            [np.bincount(flat, weights=drawn[..., j][keep], minlength=b * part.size) for j in range(values.shape[1])],
            axis=-1,
        )
        with np.errstate(invalid="ignore", divide="ignore"):
            means = sums / counts[:, None]
        means[counts == 0] = np.nan
        out[name] = means.reshape(b, part.size, values.shape[1])
    return out


def bootstrap_group_means(
    values: np.ndarray, partitions: Mapping[str, Partition], settings: BootstrapSettings
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Point estimates (groups, columns) and resampled means (resamples, groups, columns)."""
    n = values.shape[0]
    point = {k: v[0] for k, v in group_means(values, partitions, np.arange(n)[None, :]).items()}
    batches: dict[str, list[np.ndarray]] = {k: [] for k in partitions}
    for index in draws(n, settings.resamples, settings.seed):
        for name, means in group_means(values, partitions, index).items():
            batches[name].append(means)
    return point, {k: np.concatenate(v) for k, v in batches.items()}


def interval(distribution: np.ndarray, confidence: float) -> tuple[float | None, float | None]:
    """Percentile interval over the resamples that gave a value (as scipy's 'percentile')."""
    finite = distribution[np.isfinite(distribution)]
    if finite.size == 0:
        return None, None
    alpha = (1 - confidence) / 2
    low, high = np.quantile(finite, [alpha, 1 - alpha])
    return float(low), float(high)


def psi_values(means: np.ndarray) -> np.ndarray:
    """PSI = 1 - min/max over the groups that hold queries, along the last axis;
    NaN where no group does or the best group scores 0."""
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows: no group drawn
        low, high = np.nanmin(means, axis=-1), np.nanmax(means, axis=-1)
        out = 1.0 - low / high
    return np.where(high > 0, out, np.nan)
