"""Paired tests between retrievers evaluated on the same queries, per position group.

Each pair of retrievers (A listed before B) is compared on per-query nDCG@10 with a
paired randomization test: under the null hypothesis A's and B's scores of a query are
exchangeable, so the sign of each query's difference is flipped at random
(`scipy.stats.permutation_test`, `permutation_type="samples"`; exact when 2**n is within
the shuffles). The statistic is the mean difference A - B; p is two-sided. Beside it: a
paired bootstrap interval of the mean difference (the draws of intervals.py, so equal to
`scipy.stats.bootstrap` on the differences) and the standardized effect d_z = mean
difference / standard deviation of the differences. Tests are Holm-corrected within
their family (multiple.py): the overall tests of all pairs; the groups of one grouping
for one pair; a group of one query, or whose scores do not differ, is untestable and
left out of its family.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import polars as pl
from scipy import stats

from builder.evaluation.intervals import BootstrapSettings, draws, interval
from builder.evaluation.metrics import NDCG, group_universe
from builder.evaluation.multiple import apply_holm

# Cells (shuffles x queries) scipy handles at once: bounds memory on large query sets.
_CELLS_PER_BATCH = 4_000_000

TEST_NAME = "paired randomization test (scipy.stats.permutation_test, permutation_type='samples'), two-sided"


def paired_randomization(a: np.ndarray, b: np.ndarray, settings: BootstrapSettings) -> dict:
    """n, mean difference A - B and the two-sided p of a paired randomization test; `exact`
    when every sign flip was enumerated, else `at_floor` when p is the least the shuffles
    can give (2 / (shuffles + 1)); `testable` False where p is 1 by construction (one
    query, or no differences), which keeps the test out of its Holm family."""
    n = len(a)
    if n == 0:
        return {"n": 0, "mean_difference": None, "p": None, "exact": None, "at_floor": False, "testable": False}
    difference = float(np.mean(a - b))
    if n == 1 or np.all(a == b):
        # One query: both signs are as extreme as the observed one; no differences: nothing to flip.
        return {"n": n, "mean_difference": difference, "p": 1.0, "exact": True, "at_floor": False, "testable": False}
    exact = 2**n <= settings.permutations  # integers: 2.0 ** n overflows past 1,023 queries
    result = stats.permutation_test(
        (a, b),
        lambda x, y, axis: np.mean(x - y, axis=axis),
        permutation_type="samples",
        vectorized=True,
        n_resamples=settings.permutations,
        alternative="two-sided",
        rng=np.random.default_rng(settings.seed),
        batch=max(1, _CELLS_PER_BATCH // n),
    )
    p = float(result.pvalue)
    floor = 2 / (settings.permutations + 1)
    return {
        "n": n,
        "mean_difference": difference,
        "p": p,
        "exact": exact,
        "at_floor": not exact and p <= floor * (1 + 1e-9),
        "testable": True,
    }


def difference_interval(a: np.ndarray, b: np.ndarray, settings: BootstrapSettings) -> dict:
    """Paired percentile bootstrap interval of mean(A - B) and d_z = mean / sd of A - B."""
    difference = a - b
    n = len(difference)
    if n < 2:
        return {"difference_ci": None, "effect_size": None}
    means = np.concatenate([difference[index].mean(axis=1) for index in draws(n, settings.resamples, settings.seed)])
    spread = float(difference.std(ddof=1))
    effect = float(difference.mean() / spread) if spread > 1e-12 else None
    return {"difference_ci": list(interval(means, settings.confidence)), "effect_size": effect}


def paired_test(a: np.ndarray, b: np.ndarray, settings: BootstrapSettings) -> dict:
    """The randomization test with the interval of the difference and the effect size."""
    return {**paired_randomization(a, b, settings), **difference_interval(a, b, settings)}


def compare_retrievers(
    scores: dict[str, pl.DataFrame], partitions: list[str], settings: BootstrapSettings
) -> list[dict]:
    """One entry per pair of retrievers: the test overall and in each group of each partition."""
    out = []
    for first, second in combinations(scores, 2):
        joined = (
            scores[first]
            .select("query_id", *partitions, pl.col(NDCG).alias("_a"))
            .join(scores[second].select("query_id", pl.col(NDCG).alias("_b")), on="query_id", how="inner")
        )
        a, b = joined["_a"].to_numpy(), joined["_b"].to_numpy()
        entry: dict = {
            "a": first,
            "b": second,
            "metric": NDCG,
            "difference": "A - B",
            "test": TEST_NAME,
            "overall": paired_test(a, b, settings),
            "groupings": {},
        }
        for column in partitions:
            values = joined[column].to_list()
            rows = []
            for group in group_universe(column, values):
                mask = np.array([v == group for v in values], dtype=bool)
                result = paired_test(a[mask], b[mask], settings)
                small = result["n"] < settings.min_group
                if small and result["n"]:
                    # As for the groups' own figures: a few queries' bootstrap interval is too narrow.
                    result.update(
                        difference_ci=None,
                        no_interval=f"{result['n']} queries, fewer than --min-group {settings.min_group}",
                    )
                rows.append({"group": group, **result, "small": small})
            apply_holm(rows, f"{first} vs {second}: {column}")
            entry["groupings"][column] = rows
        out.append(entry)
    apply_holm([entry["overall"] for entry in out], "overall")
    return out
