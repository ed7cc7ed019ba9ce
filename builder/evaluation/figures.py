"""Per-query scores -> the report's figures, each with its n and a bootstrap interval.

A figure is `{"value", "n", "ci_low", "ci_high"}`. Groups (position groups, 20-bin
relative positions, length buckets, the model-window split) carry `n` and `small`
(fewer queries than the minimum group size); a small group's figures get no interval
(`ci_low`/`ci_high` None and `no_interval` saying why): a percentile bootstrap of a few
queries is too narrow, down to zero width at n 2. A PSI carries `small` when its min or
max group is small, and `null`: the PSI over the groups large enough, with its
permutation null (psi_null.py). PSI gets no bootstrap interval of its own: a min/max
statistic's resamples sit above it, so its percentile interval is biased upward and
left out 0 on every null set tried; its uncertainty is the null's (`above_null_median_ci`).

Length buckets average either over queries (`queries`) or over the means of the
bucket's position bins that hold queries (`bins`, PosIR's way); the choice is named in
the report.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import polars as pl

from builder.evaluation.intervals import BootstrapSettings, Partition, bootstrap_group_means, interval, psi_values
from builder.evaluation.metrics import METRICS, N_BINS, group_universe, natural_key
from builder.evaluation.psi_null import null_settings, psi_with_null

Averaging = Literal["queries", "bins"]
AVERAGINGS: tuple[Averaging, ...] = ("queries", "bins")
VISIBILITY = ("visible", "beyond", "unknown")


class Figures:
    """Every partition of one retriever's scores, resampled together."""

    def __init__(self, scores: pl.DataFrame, groupings: list[str], settings: BootstrapSettings) -> None:
        self.settings = settings
        self.labels: dict[str, list[object]] = {}
        codes: dict[str, np.ndarray] = {"overall": np.zeros(scores.height, dtype=np.int64)}
        self.labels["overall"] = ["all"]
        for column in [*groupings, "rel_bin", "length_bucket", "visibility"]:
            if column in scores.columns and scores[column].null_count() < scores.height:
                codes[column] = self._codes(scores, column)
        if "length_bucket" in codes and "rel_bin" in codes:
            bins, buckets = codes["rel_bin"], codes["length_bucket"]
            width = len(self.labels["rel_bin"])
            codes["length_bin"] = np.where((bins >= 0) & (buckets >= 0), buckets * width + bins, -1)
            self.labels["length_bin"] = list(range(len(self.labels["length_bucket"]) * width))
        visible = scores["visibility"].to_numpy() == "visible" if "visibility" in codes else None
        if visible is not None and not visible.all():  # the window table shows visible-only groups
            for column in groupings:
                codes[f"visible/{column}"] = np.where(visible, codes[column], -1)
                self.labels[f"visible/{column}"] = self.labels[column]
        partitions = {k: Partition(v, len(self.labels[k])) for k, v in codes.items()}
        self.counts = {k: np.bincount(v[v >= 0], minlength=partitions[k].size) for k, v in codes.items()}
        values = scores.select(METRICS).fill_null(0.0).to_numpy().astype(float)
        self.codes, self.ndcg = codes, values[:, 0]
        self.point, self.resampled = bootstrap_group_means(values, partitions, settings)

    def _codes(self, scores: pl.DataFrame, column: str) -> np.ndarray:
        values = scores[column].to_list()
        if column == "visibility":
            universe: list[object] = list(VISIBILITY)
        elif column == "length_bucket":
            universe = sorted({v for v in values if v is not None}, key=natural_key)
        else:
            universe = group_universe(column, values)
        self.labels[column] = universe
        index = {label: i for i, label in enumerate(universe)}
        return np.array([-1 if v is None else index[v] for v in values], dtype=np.int64)

    def has(self, partition: str) -> bool:
        return partition in self.point

    def figure(self, point: float, distribution: np.ndarray, n: int, small: bool = False) -> dict:
        value = None if not np.isfinite(point) else float(point)
        if small and n:
            return {
                "value": value,
                "n": int(n),
                "ci_low": None,
                "ci_high": None,
                "no_interval": f"{n} queries, fewer than --min-group {self.settings.min_group}",
            }
        low, high = interval(distribution, self.settings.confidence)
        return {"value": value, "n": int(n), "ci_low": low, "ci_high": high}

    def group(self, partition: str, k: int) -> dict:
        n = int(self.counts[partition][k])
        # The whole set is not a group: its interval stands whatever its size.
        small = n < self.settings.min_group
        return {
            "n": n,
            "small": small,
            **{
                m: self.figure(
                    self.point[partition][k, j], self.resampled[partition][:, k, j], n, small and partition != "overall"
                )
                for j, m in enumerate(METRICS)
            },
        }

    def overall(self) -> dict:
        row = self.group("overall", 0)
        return {"n": row["n"], **{m: row[m] for m in METRICS}}

    def grouping(self, partition: str) -> dict:
        """Each group's figures and the PSI over nDCG@10 of the groups that hold queries."""
        groups = [{"group": label, **self.group(partition, k)} for k, label in enumerate(self.labels[partition])]
        counts = self.counts[partition]
        psi = self.psi(self.point[partition][:, 0], counts, self.labels[partition])
        psi["null"] = psi_with_null(
            self.ndcg,
            self.codes[partition],
            self.labels[partition],
            null_settings(self.settings),
            self.codes.get("length_bucket"),
        )
        return {
            "groups": groups,
            "psi": psi,
            "groups_with_queries": int((counts > 0).sum()),
            "empty_groups": int((counts == 0).sum()),
            "small_groups": int(((counts > 0) & (counts < self.settings.min_group)).sum()),
        }

    def psi(self, means: np.ndarray, counts: np.ndarray, labels: list[object]) -> dict:
        """PSI over the groups that hold queries (no interval: see the module's docstring)."""
        present = counts > 0
        point = float(psi_values(means))
        out: dict = {"value": point if np.isfinite(point) else None, "n": int(counts.sum())}
        if out["value"] is None:
            return {**out, "small": False, "min_group": None, "max_group": None}
        shown = np.where(present, means, np.nan)
        low, high = int(np.nanargmin(shown)), int(np.nanargmax(shown))
        small = bool(min(counts[low], counts[high]) < self.settings.min_group)
        return {**out, "small": small, "min_group": labels[low], "max_group": labels[high]}

    def length_buckets(self, averaging: Averaging) -> dict[str, dict]:
        """Per bucket: its figures under `averaging` and the PSI over its position bins."""
        if not self.has("length_bucket"):
            return {}
        out = {}
        width = len(self.labels.get("rel_bin", [])) or N_BINS
        for k, label in enumerate(self.labels["length_bucket"]):
            n = int(self.counts["length_bucket"][k])
            entry: dict = {"n": n, "small": n < self.settings.min_group}
            if self.has("length_bin"):
                cells = slice(k * width, (k + 1) * width)
                point, resampled = self.point["length_bin"][cells], self.resampled["length_bin"][:, cells]
                counts = self.counts["length_bin"][cells]
                bins = list(range(width))
                entry["psi_bins"] = self.psi(point[:, 0], counts, bins)
                in_bucket = self.codes["length_bucket"] == k
                entry["psi_bins"]["null"] = psi_with_null(
                    self.ndcg, np.where(in_bucket, self.codes["rel_bin"], -1), bins, null_settings(self.settings)
                )
                entry["bins_with_queries"], entry["empty_bins"] = int((counts > 0).sum()), int((counts == 0).sum())
            else:
                entry["psi_bins"], entry["bins_with_queries"], entry["empty_bins"] = None, 0, N_BINS
            # Without relative positions there are no bins to average: the bucket averages queries.
            entry["averaging"] = averaging if self.has("length_bin") else "queries"
            if entry["averaging"] == "bins":
                entry.update(
                    {
                        m: self.figure(_nanmean(point[:, j]), _nanmean(resampled[..., j], axis=-1), n, entry["small"])
                        for j, m in enumerate(METRICS)
                    }
                )
            else:
                entry.update(
                    {
                        m: self.figure(
                            self.point["length_bucket"][k, j],
                            self.resampled["length_bucket"][:, k, j],
                            n,
                            entry["small"],
                        )
                        for j, m in enumerate(METRICS)
                    }
                )
            out[str(label)] = entry
        return out

    def visibility(self) -> dict[str, dict]:
        if not self.has("visibility"):
            return {v: {"n": 0} for v in VISIBILITY}
        return {str(label): self.group("visibility", k) for k, label in enumerate(self.labels["visibility"])}


def _nanmean(values: np.ndarray, axis: int | None = None) -> np.ndarray | float:
    """Mean over the bins that hold queries; NaN where none does."""
    finite = np.isfinite(values)
    total = np.where(finite, values, 0.0).sum(axis=axis)
    count = finite.sum(axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return total / count
