"""Bootstrap intervals, small groups and the named definitions, on cases worked by hand
and against scipy.stats.bootstrap on the same data and seed."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy import stats

from builder.bench import SPAN_DTYPE
from builder.evaluation.data import load_eval_data
from builder.evaluation.evaluate import analyze
from builder.evaluation.figures import Figures
from builder.evaluation.intervals import BootstrapSettings, Partition, bootstrap_group_means, interval
from builder.evaluation.report import figure_text
from builder.evaluation.retrievers import Retrieval
from tests.evaluation.test_posir_positions import posir_folder, run


def _scores(ndcg: list[float], **columns: list) -> pl.DataFrame:
    n = len(ndcg)
    return pl.DataFrame(
        {
            "query_id": [f"q{i}" for i in range(n)],
            "ndcg@10": ndcg,
            "recall@100": [1.0] * n,
            "visibility": ["visible"] * n,
            **columns,
        }
    )


def test_equal_scores_give_a_zero_width_interval():
    overall = Figures(_scores([0.5] * 7), [], BootstrapSettings(resamples=200)).overall()
    assert overall["ndcg@10"] == {"value": 0.5, "n": 7, "ci_low": 0.5, "ci_high": 0.5}


def test_two_queries_span_both_scores():
    # Resampling {0, 1} twice gives means 0, 0.5, 1 with chances 1/4, 1/2, 1/4: the 2.5th
    # percentile is 0 and the 97.5th is 1 (a quarter of the resamples sit at each end).
    figure = Figures(_scores([0.0, 1.0]), [], BootstrapSettings(resamples=1000)).overall()["ndcg@10"]
    assert figure == {"value": 0.5, "n": 2, "ci_low": 0.0, "ci_high": 1.0}


def test_overall_mean_interval_equals_scipy_bootstrap():
    values = np.random.default_rng(3).random(57)
    settings = BootstrapSettings(resamples=500, seed=11)
    point, resampled = bootstrap_group_means(values[:, None], {"all": Partition(np.zeros(57, dtype=int), 1)}, settings)
    ours = interval(resampled["all"][:, 0, 0], 0.95)
    theirs = stats.bootstrap(
        (values,), np.mean, n_resamples=500, method="percentile", rng=np.random.default_rng(11)
    ).confidence_interval
    assert point["all"][0, 0] == pytest.approx(values.mean())
    assert ours == pytest.approx((theirs.low, theirs.high), abs=1e-12)


def test_group_mean_interval_equals_scipy_paired_bootstrap():
    # A group's mean under a draw of all queries: scipy resamples (score, group) pairs together.
    rng = np.random.default_rng(5)
    values, groups = rng.random(80), rng.integers(0, 2, 80)
    _, resampled = bootstrap_group_means(
        values[:, None], {"g": Partition(groups, 2)}, BootstrapSettings(resamples=400, seed=2)
    )

    def mean_of_group_one(x: np.ndarray, g: np.ndarray) -> float:
        return x[g == 1].mean()

    theirs = stats.bootstrap(
        (values, groups),
        mean_of_group_one,
        paired=True,
        vectorized=False,
        n_resamples=400,
        method="percentile",
        rng=np.random.default_rng(2),
    ).confidence_interval
    assert interval(resampled["g"][:, 1, 0], 0.95) == pytest.approx((theirs.low, theirs.high), abs=1e-12)


def test_psi_small_groups_and_what_psi_rests_on():
    # Group "a": 5 queries at 1.0, group "b": 5 at 0.5: PSI 1 - 0.5 / 1 = 0.5, with no
    # bootstrap interval of its own (its uncertainty is read from the null).
    scores = _scores([1.0] * 5 + [0.5] * 5, setting=["a"] * 5 + ["b"] * 5)
    grouping = Figures(scores, ["setting"], BootstrapSettings(resamples=1000, min_group=5)).grouping("setting")
    psi = dict(grouping["psi"])
    null = psi.pop("null")
    assert psi == {"value": 0.5, "n": 10, "small": False, "min_group": "b", "max_group": "a"}
    assert (null["value"], null["groups"]) == (0.5, ["a", "b"])
    assert [g["small"] for g in grouping["groups"]] == [False, False]
    small = Figures(scores, ["setting"], BootstrapSettings(resamples=100, min_group=6)).grouping("setting")
    assert small["psi"]["small"] is True and small["small_groups"] == 2
    assert [(g["n"], g["small"]) for g in small["groups"]] == [(5, True), (5, True)]


def test_small_groups_get_no_interval_and_say_why():
    scores = _scores([1.0, 0.0, 1.0, 0.5, 0.5], setting=["a", "a", "a", "b", "b"])
    groups = Figures(scores, ["setting"], BootstrapSettings(resamples=100, min_group=3)).grouping("setting")["groups"]
    assert groups[0]["ndcg@10"]["ci_low"] is not None and "no_interval" not in groups[0]["ndcg@10"]
    assert groups[1]["ndcg@10"] == {
        "value": 0.5,
        "n": 2,
        "ci_low": None,
        "ci_high": None,
        "no_interval": "2 queries, fewer than --min-group 3",
    }
    assert figure_text(groups[1]["ndcg@10"]) == "0.500 (n 2: no interval)"


def test_a_zero_width_interval_is_not_printed_as_certain():
    assert figure_text({"value": 1.0, "n": 104, "ci_low": 1.0, "ci_high": 1.0}) == "1.000 (no spread)"
    assert figure_text({"value": 0.5, "n": 40, "ci_low": 0.4, "ci_high": 0.6}) == "0.500 [0.400, 0.600]"


def test_length_bucket_averaging_over_queries_or_bin_means():
    # Bucket Q1: three queries at 1.0 in bin 0, one at 0.0 in bin 10.
    # Over queries: 3 / 4 = 0.75. Over bin means: (1.0 + 0.0) / 2 = 0.5.
    scores = _scores([1.0, 1.0, 1.0, 0.0], length_bucket=["Q1"] * 4, rel_bin=[0, 0, 0, 10])
    figures = Figures(scores, [], BootstrapSettings(resamples=50))
    assert figures.length_buckets("queries")["Q1"]["ndcg@10"]["value"] == 0.75
    assert figures.length_buckets("bins")["Q1"]["ndcg@10"]["value"] == 0.5
    assert figures.length_buckets("bins")["Q1"]["n"] == 4
    no_bins = Figures(_scores([1.0, 0.0], length_bucket=["Q1", "Q1"]), [], BootstrapSettings(resamples=10))
    assert no_bins.length_buckets("bins")["Q1"]["averaging"] == "queries"  # nothing to average by bin


def test_anchor_moves_queries_between_bins(tmp_path):
    # test_posir_positions' table: midpoints put the queries in bins 0, 1, 1, 10, 18; span
    # starts 0, 80, 60, 500, 900 of 1000 characters put them in bins 0, 1, 1, 9, 17.
    folder = posir_folder(tmp_path)
    occupied = {}
    for anchor in ("midpoint", "start"):
        data = load_eval_data(folder, anchor=anchor)
        section = analyze(data, Retrieval(run=run()), BootstrapSettings(resamples=20))
        occupied[anchor] = [g["group"] for g in section["relative_bins"]["groups"] if g["n"]]
        assert data.anchor == anchor
    assert occupied == {"midpoint": [0, 1, 10, 18], "start": [0, 1, 9, 17]}
    assert load_eval_data(folder).anchor == "midpoint"  # PosIR's own choice for its layout


def test_native_anchor_recomputes_rel_pos_and_the_dataset_bins(tmp_path):
    # One 100-character document, evidence at [0, 100) in it: start 0 -> bin 0; midpoint 50 -> 0.5 -> bin 10.
    folder = tmp_path / "built"
    folder.mkdir()
    pl.DataFrame({"doc_id": ["d1"], "title": [""], "text": ["y" * 100]}).write_parquet(folder / "corpus.parquet")
    spans = pl.Series("spans", [[{"start": 0, "end": 100, "method": "exact", "score": 1.0}]], dtype=SPAN_DTYPE)
    pl.DataFrame(
        {"query_id": ["q1"], "text": ["y"], "doc_id": ["d1"], "rel_pos": [0.0], "position_bin": [0]}
    ).with_columns(spans).write_parquet(folder / "queries.parquet")
    pl.DataFrame({"query_id": ["q1"], "doc_id": ["d1"], "score": [1]}).write_parquet(folder / "qrels.parquet")
    start, midpoint = load_eval_data(folder), load_eval_data(folder, anchor="midpoint")
    assert (start.anchor, start.queries["rel_pos"][0], start.queries["position_bin"][0]) == ("start", 0.0, 0)
    assert (midpoint.queries["rel_pos"][0], midpoint.queries["position_bin"][0]) == (0.5, 10)
