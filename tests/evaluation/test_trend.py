"""The position trend (slope and Spearman of nDCG@10 on rel_pos): 95 % intervals drawn as
eval's other intervals are (scipy.stats.bootstrap's paired percentile bootstrap, same seed),
and a reason in place of a figure that cannot be computed."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy import stats

from builder.evaluation.intervals import BootstrapSettings
from builder.evaluation.report import trend_text
from builder.evaluation.trend import position_trend

N = 40
REL = np.linspace(0.0, 0.975, N)
NDCG = np.clip(1.0 - REL + 0.3 * np.sin(np.arange(N) * 1.7), 0.0, 1.0)  # falls with depth, with noise


def _slope(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    mx, my = x.mean(axis=axis, keepdims=True), y.mean(axis=axis, keepdims=True)
    return ((x - mx) * (y - my)).sum(axis=axis) / ((x - mx) ** 2).sum(axis=axis)


def _scipy(statistic, vectorized: bool) -> tuple[float, float]:
    result = stats.bootstrap(
        (REL, NDCG),
        statistic,
        paired=True,
        vectorized=vectorized,
        n_resamples=1000,
        confidence_level=0.95,
        method="percentile",
        random_state=np.random.default_rng(0),
    )
    return result.confidence_interval.low, result.confidence_interval.high


def test_slope_and_spearman_get_the_interval_scipy_gives():
    trend = position_trend(pl.DataFrame({"rel_pos": REL, "ndcg@10": NDCG}), BootstrapSettings())
    assert trend["n"] == N
    assert trend["slope"] == pytest.approx(_slope(REL, NDCG))
    assert trend["spearman"] == pytest.approx(stats.spearmanr(REL, NDCG).statistic)
    assert trend["slope_ci"] == pytest.approx(_scipy(_slope, True))
    assert trend["spearman_ci"] == pytest.approx(_scipy(lambda x, y: stats.spearmanr(x, y).statistic, False))
    low, high = trend["spearman_ci"]
    assert trend_text(trend, "spearman") == f"{trend['spearman']:.3f} [{low:.3f}, {high:.3f}]"


def test_a_figure_that_cannot_be_computed_says_why():
    same = pl.DataFrame({"rel_pos": REL, "ndcg@10": [1.0] * N})  # every query found at rank 1
    trend = position_trend(same, BootstrapSettings())
    assert trend["spearman"] is None and trend["spearman_ci"] is None
    assert trend["why_none"]["spearman"] == "every query has nDCG@10 1.000"
    assert trend_text(trend, "spearman") == "n/a: every query has nDCG@10 1.000"
    assert trend["slope"] == 0.0
    flat = position_trend(pl.DataFrame({"rel_pos": [0.5] * N, "ndcg@10": NDCG}), BootstrapSettings())
    assert trend_text(flat, "slope") == "n/a: every query has rel_pos 0.500"
    assert trend_text(position_trend(pl.DataFrame({"ndcg@10": NDCG})), "spearman") == "n/a: no rel_pos"


def test_a_small_set_gets_no_interval_as_small_groups_do():
    few = pl.DataFrame({"rel_pos": REL[:5], "ndcg@10": NDCG[:5]})
    trend = position_trend(few, BootstrapSettings())
    assert trend["slope_ci"] is None
    assert trend_text(trend, "slope") == f"{trend['slope']:.3f} (n 5: no interval)"


def _undefined_by_hand(y: np.ndarray, resamples: int = 1000, seed: int = 0) -> int:
    """Resamples (scipy.stats.bootstrap's draws) that drew one score for every query."""
    index = np.random.default_rng(seed).integers(0, y.size, (resamples, y.size))
    drawn = y[index]
    return int(np.sum(drawn.min(axis=1) == drawn.max(axis=1)))


def test_undefined_resamples_are_counted_beside_the_interval():
    # 35 queries found first and 5 missed: a resample that drew none of the 5 has one score
    # for all, so its Spearman is undefined (scipy's interval is then NaN altogether).
    y = np.array([1.0] * 35 + [0.0] * 5)
    undefined = _undefined_by_hand(y)
    assert 0 < undefined <= 50  # (35/40)^40 of 1000 resamples: about 5
    trend = position_trend(pl.DataFrame({"rel_pos": REL, "ndcg@10": y}), BootstrapSettings())
    assert trend["spearman_undefined"] == undefined and trend["slope_undefined"] == 0
    index = np.random.default_rng(0).integers(0, N, (1000, N))
    rhos = np.array([stats.spearmanr(REL[i], y[i]).statistic if np.ptp(y[i]) else np.nan for i in index])
    assert trend["spearman_ci"] == pytest.approx(list(np.quantile(rhos[np.isfinite(rhos)], [0.025, 0.975])))
    low, high = trend["spearman_ci"]
    assert trend_text(trend, "spearman") == (
        f"{trend['spearman']:.3f} [{low:.3f}, {high:.3f}] ({undefined} of 1000 resamples undefined)"
    )
    assert "undefined" not in trend_text(trend, "slope")


def test_an_interval_whose_undefined_resamples_outnumber_its_tails_is_refused():
    y = np.array([1.0] * 38 + [0.0] * 2)
    undefined = _undefined_by_hand(y)
    assert undefined > 50  # (38/40)^40 of 1000: about 128
    with pytest.warns(Warning):  # scipy warns and gives NaN for the whole interval
        ci = stats.bootstrap(
            (REL, y),
            lambda a, b: stats.spearmanr(a, b).statistic,
            paired=True,
            vectorized=False,
            n_resamples=1000,
            method="percentile",
            random_state=np.random.default_rng(0),
        ).confidence_interval
    assert np.isnan(ci.low) and np.isnan(ci.high)
    trend = position_trend(pl.DataFrame({"rel_pos": REL, "ndcg@10": y}), BootstrapSettings())
    assert trend["spearman_ci"] is None and trend["spearman_undefined"] == undefined
    assert trend_text(trend, "spearman") == (
        f"{trend['spearman']:.3f} (no interval: {undefined} of 1000 resamples undefined (one position or one "
        "score drawn), more than the 5% the interval's tails hold)"
    )
