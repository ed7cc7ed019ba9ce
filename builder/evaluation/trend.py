"""The position trend of one retriever: the least-squares slope and the Spearman correlation
of per-query nDCG@10 against rel_pos, each with a 95 % interval from the paired percentile
bootstrap over queries that eval's other intervals use (the same draws as
`scipy.stats.bootstrap` with the same seed, see intervals.py). A set smaller than
`min_group` gets no interval, as a small group does; a figure that cannot be computed
(no positions, one position for all, one score for all) comes with the reason.

A resample can leave a figure undefined (it drew one position, or one score, for all its
queries); scipy then returns no interval at all. Here the count of such resamples is
reported (`slope_undefined`, `spearman_undefined`) and shown beside the interval, which
comes from the resamples that gave a value; when they are more than 1 - confidence of
all resamples (5 % at 95 %), the interval is refused with the reason: the undefined
resamples then outnumber both tails together, so where they would have fallen decides
where the interval ends."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import polars as pl
from scipy import stats

from builder.evaluation.intervals import BootstrapSettings, draws, interval
from builder.evaluation.metrics import NDCG


def position_trend(scores: pl.DataFrame, bootstrap: BootstrapSettings | None = None) -> dict[str, Any]:
    """`n`, `slope`, `spearman`, their intervals (`slope_ci`, `spearman_ci`: [low, high] or
    None) and `why_none`: the reason for each figure that is None."""
    if "rel_pos" not in scores.columns:
        return _none(0, "no rel_pos")
    part = scores.drop_nulls("rel_pos").drop_nulls(NDCG)
    x, y = part["rel_pos"].to_numpy().astype(float), part[NDCG].to_numpy().astype(float)
    if x.size < 2:
        return _none(int(x.size), f"{x.size} queries with a position")
    if np.ptp(x) == 0:
        return _none(int(x.size), f"every query has rel_pos {x[0]:.3f}")
    out: dict[str, Any] = {"n": int(x.size), "slope": float(_slopes(x[None], y[None])[0]), "why_none": {}}
    if np.ptp(y) == 0:
        out.update(spearman=None, spearman_ci=None)
        out["why_none"]["spearman"] = f"every query has nDCG@10 {y[0]:.3f}"
    else:
        out["spearman"] = float(stats.spearmanr(x, y).statistic)
    small = bootstrap is None or x.size < bootstrap.min_group
    out["no_interval"] = small
    if small:
        out["slope_ci"] = None
        if out["spearman"] is not None:
            out["spearman_ci"] = None
        return out
    assert bootstrap is not None
    slopes, rhos = _resampled(x, y, bootstrap)
    out.update(resamples=bootstrap.resamples, refused_interval={})
    for name, resampled in (("slope", slopes), ("spearman", rhos)):
        if out[name] is None:
            continue
        undefined = int(np.sum(~np.isfinite(resampled)))
        out[f"{name}_undefined"] = undefined
        if undefined > (1 - bootstrap.confidence) * resampled.size:
            out[f"{name}_ci"] = None
            out["refused_interval"][name] = (
                f"{undefined} of {resampled.size} resamples undefined (one position or one score drawn), more "
                f"than the {1 - bootstrap.confidence:.0%} the interval's tails hold"
            )
        else:
            out[f"{name}_ci"] = list(interval(resampled, bootstrap.confidence))
    return out


def _none(n: int, why: str) -> dict[str, Any]:
    return {
        "n": n,
        "slope": None,
        "spearman": None,
        "slope_ci": None,
        "spearman_ci": None,
        "no_interval": True,
        "why_none": {"slope": why, "spearman": why},
    }


def _resampled(x: np.ndarray, y: np.ndarray, bootstrap: BootstrapSettings) -> tuple[np.ndarray, np.ndarray]:
    """Slope and Spearman of every resample; NaN where a resample drew one position or one score."""
    slopes, rhos = [], []
    for index in draws(x.size, bootstrap.resamples, bootstrap.seed):
        xs, ys = x[index], y[index]
        slopes.append(_slopes(xs, ys))
        rhos.append(_pearson(stats.rankdata(xs, axis=-1), stats.rankdata(ys, axis=-1)))
    return np.concatenate(slopes), np.concatenate(rhos)


def _slopes(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    dx, dy = x - x.mean(axis=-1, keepdims=True), y - y.mean(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (dx * dy).sum(axis=-1) / (dx * dx).sum(axis=-1)


def _pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    dx, dy = x - x.mean(axis=-1, keepdims=True), y - y.mean(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return (dx * dy).sum(axis=-1) / np.sqrt((dx * dx).sum(axis=-1) * (dy * dy).sum(axis=-1))
