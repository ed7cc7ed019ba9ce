"""Paired tests between retrievers evaluated on the same queries, per position group.

Each pair of retrievers (A listed before B) is compared on per-query nDCG@10 with a
paired randomization test: under the null hypothesis A's and B's scores of a query are
exchangeable, so the sign of each query's difference is flipped at random
(`scipy.stats.permutation_test`, `permutation_type="samples"`; exact when 2**n is within
the resamples). The statistic is the mean difference A - B; p is two-sided.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import polars as pl
from scipy import stats

from builder.evaluation.intervals import BootstrapSettings
from builder.evaluation.metrics import NDCG, group_universe

TEST_NAME = "paired randomization test (scipy.stats.permutation_test, permutation_type='samples'), two-sided"


def paired_randomization(a: np.ndarray, b: np.ndarray, settings: BootstrapSettings) -> dict:
    """n, mean difference A - B and the two-sided p of a paired randomization test."""
    n = len(a)
    if n == 0:
        return {"n": 0, "mean_difference": None, "p": None}
    difference = float(np.mean(a - b))
    if n == 1 or np.all(a == b):
        # One query: both signs are as extreme as the observed one; no differences: nothing to flip.
        return {"n": n, "mean_difference": difference, "p": 1.0}
    result = stats.permutation_test(
        (a, b), lambda x, y, axis: np.mean(x - y, axis=axis), permutation_type="samples", vectorized=True,
        n_resamples=settings.resamples, alternative="two-sided", rng=np.random.default_rng(settings.seed))
    return {"n": n, "mean_difference": difference, "p": float(result.pvalue)}


def compare_retrievers(scores: dict[str, pl.DataFrame], partitions: list[str], settings: BootstrapSettings) -> list[dict]:
    """One entry per pair of retrievers: the test overall and in each group of each partition."""
    out = []
    for first, second in combinations(scores, 2):
        joined = scores[first].select("query_id", *partitions, pl.col(NDCG).alias("_a")).join(
            scores[second].select("query_id", pl.col(NDCG).alias("_b")), on="query_id", how="inner")
        a, b = joined["_a"].to_numpy(), joined["_b"].to_numpy()
        entry: dict = {"a": first, "b": second, "metric": NDCG, "difference": "A - B", "test": TEST_NAME,
                       "overall": paired_randomization(a, b, settings), "groupings": {}}
        for column in partitions:
            values = joined[column].to_list()
            rows = []
            for group in group_universe(column, values):
                mask = np.array([v == group for v in values], dtype=bool)
                result = paired_randomization(a[mask], b[mask], settings)
                rows.append({"group": group, **result, "small": result["n"] < settings.min_group})
            entry["groupings"][column] = rows
        out.append(entry)
    return out
