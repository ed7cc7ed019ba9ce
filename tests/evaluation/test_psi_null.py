"""PSI against its permutation null: exact values from scipy.stats.permutation_test's full
enumeration, strata that hold, groups too small left out and named, and the null's
calibration (p near uniform, PSI above the null median centred on 0 and its interval
covering 0 about 95 % of the time when position does not matter)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy import stats

from builder.evaluation.figures import Figures
from builder.evaluation.intervals import BootstrapSettings
from builder.evaluation.psi_null import NullSettings, psi_null_text, psi_with_null, shuffles_for, stratified_shuffles
from builder.evaluation.report import psi_cell


def _psi(x: np.ndarray, y: np.ndarray, axis: int) -> np.ndarray:
    a, b = np.mean(x, axis=axis), np.mean(y, axis=axis)
    return 1 - np.minimum(a, b) / np.maximum(a, b)


def test_null_of_two_groups_agrees_with_scipys_exact_enumeration():
    # Five queries at 1.0 in group a, five at 0.5 in b: PSI 0.5. Of the 252 ways to split the
    # ten scores in two fives, 2 give PSI 0.5, the rest 1/3 or 1/8: exact p = 2/252, null
    # median 0.125 and 95th percentile 1/3.
    values, codes = np.array([1.0] * 5 + [0.5] * 5), np.array([0] * 5 + [1] * 5)
    exact = stats.permutation_test(
        (values[:5], values[5:]),
        _psi,
        permutation_type="independent",
        alternative="greater",
        n_resamples=np.inf,
        vectorized=True,
    )
    ours = psi_with_null(values, codes, ["a", "b"], NullSettings(permutations=9999, min_group=5))
    assert exact.pvalue == pytest.approx(2 / 252)
    assert ours["value"] == 0.5 and ours["groups"] == ["a", "b"] and ours["small_groups"] == []
    assert ours["p"] == pytest.approx(exact.pvalue, abs=0.003)
    assert ours["null_median"] == pytest.approx(np.median(exact.null_distribution)) == pytest.approx(0.125)
    assert ours["null_p95"] == pytest.approx(np.quantile(exact.null_distribution, 0.95)) == pytest.approx(1 / 3)
    # Above the null median: 0.5 - 0.125; its interval spans the observed PSI minus the
    # null's 97.5th and 2.5th percentiles (1/3 and 1/8: the null holds only 1/8, 1/3, 1/2).
    assert ours["above_null_median"] == pytest.approx(0.375)
    low, high = np.quantile(exact.null_distribution, [0.025, 0.975])
    assert ours["above_null_median_ci"] == pytest.approx([0.5 - high, 0.5 - low], abs=1e-12)
    assert ours["above_null_median_ci"] == pytest.approx([0.5 - 1 / 3, 0.5 - 0.125])


def test_shuffles_stay_within_their_stratum():
    codes = np.array([0, 1, 2, 0, 1, 2, 3, 3])
    strata = np.array([5, 5, 5, 9, 9, 9, 2, 2])
    shuffled = stratified_shuffles(codes, strata, 200, np.random.default_rng(0))
    for stratum in (5, 9, 2):
        rows = strata == stratum
        assert (np.sort(shuffled[:, rows], axis=1) == np.sort(codes[rows])).all()
    assert len({tuple(row) for row in shuffled}) > 20  # it does shuffle


def test_position_confounded_with_length_is_no_position_effect():
    # Each length bucket holds one position group: shuffling within buckets changes nothing,
    # so the whole PSI is explained by length: p = 1, nothing above the null median, and
    # every shuffle equal, so the interval is [0, 0].
    values = np.array([1.0, 1.0, 0.5, 0.5])
    result = psi_with_null(
        values,
        np.array([0, 0, 1, 1]),
        ["start", "end"],
        NullSettings(permutations=99, min_group=1),
        strata=np.array([0, 0, 1, 1]),
    )
    assert (result["value"], result["p"], result["null_median"], result["above_null_median"]) == (0.5, 1.0, 0.5, 0.0)
    assert result["above_null_median_ci"] == [0.0, 0.0] and result["at_floor"] is False


def test_groups_below_min_group_are_left_out_and_named():
    values = np.array([1.0] * 4 + [0.5] * 4 + [0.0])
    codes = np.array([0] * 4 + [1] * 4 + [2])
    left_out = psi_with_null(values, codes, [0, 1, 2], NullSettings(permutations=99, min_group=4))
    assert left_out["groups"] == [0, 1] and left_out["small_groups"] == [2] and left_out["value"] == 0.5
    assert psi_null_text(left_out).endswith("; left out, too small: 2")
    asked = psi_with_null(values, codes, [0, 1, 2], NullSettings(permutations=99, min_group=4, include_small=True))
    assert asked["groups"] == [0, 1, 2] and asked["value"] == 1.0 and asked["small_groups_included"] is True
    assert "includes groups under the minimum size: 2" in psi_null_text(asked)
    none = psi_with_null(values, codes, [0, 1, 2], NullSettings(permutations=99, min_group=5))
    assert none["value"] is None
    assert none["reason"] == "fewer than 2 groups of at least 5 queries (3 smaller group(s) left out)"
    assert psi_null_text(none).startswith("no PSI: fewer than 2 groups")


def test_p_is_near_uniform_and_psi_above_the_null_median_centred_on_0_under_shuffled_labels():
    # 300 sets where position cannot matter (scores drawn apart from the labels), 60 queries
    # in 3 groups: raw PSI sits well above 0; PSI above the null median centres on 0 (no
    # clipping at 0, so no upward bias), its interval covers 0 in about 95 % of the sets,
    # and p is uniform.
    rng = np.random.default_rng(1)
    ps, raw, above, covered = [], [], [], []
    for trial in range(300):
        values = rng.random(60)
        codes = rng.permutation(np.repeat([0, 1, 2], 20))
        result = psi_with_null(values, codes, [0, 1, 2], NullSettings(permutations=199, seed=trial, min_group=10))
        ps.append(result["p"])
        raw.append(result["value"])
        above.append(result["above_null_median"])
        low, high = result["above_null_median_ci"]
        covered.append(low <= 0 <= high)
    assert stats.kstest(ps, "uniform").pvalue > 0.05
    assert 0.02 <= np.mean(np.array(ps) <= 0.05) <= 0.09
    assert np.mean(raw) > 0.10  # PSI without its null reads "position bias" where there is none
    assert abs(np.median(above)) < 0.01 and abs(np.mean(above)) < np.mean(raw) / 10
    assert 0.92 <= np.mean(covered) <= 0.98


def test_a_p_no_shuffle_reaches_prints_as_at_most_its_floor():
    # 40 queries at 1.0 against 40 at 0.0: no shuffle of 9,999 comes near PSI 1, so p is
    # its floor 1 / 10,000, printed as a bound like the paired tests' p.
    values, codes = np.array([1.0] * 40 + [0.0] * 40), np.array([0] * 40 + [1] * 40)
    result = psi_with_null(values, codes, ["a", "b"], NullSettings(permutations=9999, min_group=30))
    assert result["p"] == pytest.approx(1 / 10_000) and result["at_floor"] is True
    assert "p ≤ 0.0001;" in psi_null_text(result) and "p 0.000" not in psi_null_text(result)
    assert psi_cell({"null": result}).endswith(", p ≤ 0.0001)")
    few = psi_with_null(values, codes, ["a", "b"], NullSettings(permutations=99, min_group=30))
    assert "p ≤ 0.01;" in psi_null_text(few)


def test_figures_attach_the_null_stratified_by_length_bucket():
    n = 40
    scores = pl.DataFrame(
        {
            "query_id": [f"q{i}" for i in range(n)],
            "ndcg@10": [1.0] * 20 + [0.5] * 20,
            "recall@100": [1.0] * n,
            "visibility": ["visible"] * n,
            "position_tag": ["beginning"] * 20 + ["end"] * 20,
            "length_bucket": ["short"] * 20 + ["long"] * 20,
        }
    )
    psi = Figures(scores, ["position_tag"], BootstrapSettings(resamples=50, permutations=99, min_group=10)).grouping(
        "position_tag"
    )["psi"]
    # Beginning queries are all short, end queries all long: length explains the whole PSI.
    assert psi["value"] == 0.5 and psi["null"]["value"] == 0.5
    assert (psi["null"]["p"], psi["null"]["above_null_median"]) == (1.0, 0.0)
    assert psi_cell(psi) == "0.500 (null 0.500, p 1.000)"
    # PSI's own percentile bootstrap interval is not in the default output.
    assert "ci_low" not in psi and "ci_high" not in psi and "interval" not in psi


def test_large_sets_get_fewer_shuffles_never_under_999():
    assert shuffles_for(104, 9999) == 9999
    assert shuffles_for(100_000, 9999) == 2000
    assert shuffles_for(10_000_000, 9999) == 999 and shuffles_for(10, 99) == 99
