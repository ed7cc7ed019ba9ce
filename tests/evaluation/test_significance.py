"""Paired tests: retrievers compared per position group (randomization test) and ColDeR's
probe t-tests, against hand-worked values and scipy.stats.ttest_rel."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from builder.evaluation.data import EvalData, load_eval_data
from builder.evaluation.evaluate import evaluate
from builder.evaluation.intervals import BootstrapSettings
from builder.evaluation.multiple import apply_holm, holm_adjust, p_text
from builder.evaluation.probes import paired_t, probe_tests, with_roles
from builder.evaluation.retrievers import parse_spec
from builder.evaluation.significance import compare_retrievers, difference_interval, paired_randomization
from tests.evaluation.test_every_kind_of_set import probe_like


def test_randomization_p_on_a_hand_case():
    # Differences 1, 2, 3: the 2**3 = 8 sign flips (exact, fewer than the resamples) give
    # means +-2, +-4/3, +-2/3, +-0; |mean| >= 2 happens for all-plus and all-minus: p = 2/8.
    result = paired_randomization(np.array([2.0, 3.0, 4.0]), np.array([1.0, 1.0, 1.0]), BootstrapSettings())
    assert result == {
        "n": 3,
        "mean_difference": 2.0,
        "p": pytest.approx(0.25),
        "exact": True,
        "at_floor": False,
        "testable": True,
    }
    # p 1 by construction: nothing to flip, or one query. Untestable, so kept out of Holm.
    same = paired_randomization(np.ones(4), np.ones(4), BootstrapSettings())
    assert (same["p"], same["testable"]) == (1.0, False)
    assert paired_randomization(np.array([]), np.array([]), BootstrapSettings())["p"] is None
    one = paired_randomization(np.array([0.5]), np.array([0.0]), BootstrapSettings())
    assert (one["p"], one["testable"]) == (1.0, False)


def test_compare_retrievers_per_group_pairs_queries_by_id():
    a = pl.DataFrame(
        {
            "query_id": ["q1", "q2", "q3", "q4"],
            "ndcg@10": [1.0, 1.0, 1.0, 0.5],
            "position_tag": ["beginning", "beginning", "beginning", "end"],
        }
    )
    b = a.with_columns(pl.Series("ndcg@10", [0.0, 0.0, 0.0, 0.5])).reverse()  # same queries, other order
    (entry,) = compare_retrievers({"A": a, "B": b}, ["position_tag"], BootstrapSettings(min_group=2))
    assert (entry["a"], entry["b"]) == ("A", "B") and "permutation_test" in entry["test"]
    begin, middle, end = entry["groupings"]["position_tag"]
    assert {k: begin[k] for k in ("group", "n", "mean_difference", "p", "small")} == {
        "group": "beginning",
        "n": 3,
        "mean_difference": 1.0,
        "p": pytest.approx(0.25),
        "small": False,
    }
    # Family: the testable groups only. Middle has no queries and end one query with no
    # difference (p 1 by construction): beginning stands alone, its p uncorrected.
    assert (begin["p_holm"], begin["family_size"], begin["family"]) == (pytest.approx(0.25), 1, "A vs B: position_tag")
    assert entry["overall"]["family"] == "overall" and entry["overall"]["family_size"] == 1
    assert middle["n"] == 0 and middle["p"] is None
    assert (end["mean_difference"], end["p"], end["small"], end["p_holm"]) == (0.0, 1.0, True, None)
    assert (end["difference_ci"], end["no_interval"]) == (None, "1 queries, fewer than --min-group 2")
    assert begin["difference_ci"] == [1.0, 1.0] and "no_interval" not in begin
    assert entry["overall"]["mean_difference"] == 0.75


def test_paired_t_matches_ttest_rel_and_hand_values():
    first, second = np.array([3.0, 4.0, 5.0]), np.array([1.0, 3.0, 2.0])
    # Differences 2, 1, 3: mean 2, sd 1, t = 2 / (1 / sqrt 3) = 3.4641, d = 2 / 1.
    result = paired_t(first, second)
    reference = stats.ttest_rel(first, second)
    assert result["t"] == pytest.approx(2 * math.sqrt(3)) == pytest.approx(reference.statistic)
    assert result["p"] == pytest.approx(reference.pvalue)
    assert (result["n"], result["mean_difference"], result["cohens_d"]) == (3, 2.0, 2.0)
    assert paired_t(first, first)["t"] is None  # no spread


def test_probe_direction_follows_the_paper():
    # A is the paper's D1. Moving evidence is reported as R(D_i) - R(D_1), the rest as R(D1) - R(D2).
    rows = {
        "query_id": ["q1", "q2", "q3"] * 2,
        "setting": ["position_i"] * 3 + ["brevity"] * 3,
        "doc_a": ["a1", "a2", "a3", "s1", "s2", "s3"],
        "doc_b": ["b1", "b2", "b3", "l1", "l2", "l3"],
        "score_a": [3.0, 4.0, 5.0] * 2,
        "score_b": [1.0, 3.0, 2.0] * 2,
    }
    variants = {
        "variant_a": ["pos01"] * 3 + ["evidence_only"] * 3,
        "variant_b": ["pos04"] * 3 + ["evidence_and_rest"] * 3,
    }
    brevity, moving = probe_tests(pl.DataFrame({**rows, **variants}))
    assert moving["difference"] == "R(pos04) - R(pos01)"
    assert moving["t"] == pytest.approx(-2 * math.sqrt(3)) and moving["share_first_higher"] == 0.0
    assert brevity["difference"] == "R(evidence_only) - R(evidence_and_rest)"
    assert brevity["t"] == pytest.approx(2 * math.sqrt(3)) and brevity["cohens_d"] == 2.0


def test_a_shared_document_takes_its_role_from_the_id_made_for_the_query(tmp_path: Path):
    # q1's answer-present document had the same text as q1's evidence-first one of another
    # setting; the build kept "q2-evidence_first" for both and lists q1's id under it.
    pl.DataFrame(
        {
            "doc_id": ["q2-evidence_first", "q1-answer_absent"],
            "variant": ["evidence_first", "answer_absent"],
            "same_text_ids": [["q1-answer_present"], []],
        }
    ).write_parquet(tmp_path / "corpus.parquet")
    data = EvalData(tmp_path, "f" * 64, pl.DataFrame(), pl.DataFrame(), {}, 0)
    pairs = pl.DataFrame(
        {
            "query_id": ["q1", "q2"],
            "doc_a": ["q2-evidence_first", "q2-evidence_first"],
            "doc_b": ["q1-answer_absent", "elsewhere"],
        }
    )
    roles = with_roles(pairs, data)
    assert roles.select("variant_a", "variant_b").rows() == [
        ("answer_present", "answer_absent"),
        ("evidence_first", None),
    ]


def test_eval_runs_the_probe_tests_and_compares_retrievers(tmp_path: Path):
    folder = probe_like(tmp_path)
    queries = pl.read_parquet(folder / "queries.parquet")
    # Each query compares its own document (A) with the next one (B).
    docs = queries["doc_id"].to_list()
    pl.DataFrame(
        {"query_id": queries["query_id"], "setting": queries["setting"], "doc_a": docs, "doc_b": docs[1:] + docs[:1]}
    ).write_parquet(folder / "pairs.parquet")
    data = load_eval_data(folder)
    length = {"length": lambda name: lambda query, texts: [float(len(t)) for t in texts]}
    specs = [parse_spec("bm25"), parse_spec("rerank:bm25+length")]
    report = evaluate(data, specs, tmp_path / "cache", rerankers=length, bootstrap=BootstrapSettings(resamples=100))
    probes = report["retrievers"]["rerank:bm25+length"]["probes"]
    # The reranker scores a document by its length: check each test against ttest_rel on lengths.
    corpus = data.corpus.frame()
    text = dict(zip(corpus["doc_id"], corpus["text"].str.len_chars()))
    variant = dict(
        zip(pl.read_parquet(folder / "corpus.parquet")["doc_id"], pl.read_parquet(folder / "corpus.parquet")["variant"])
    )
    pairs = pl.read_parquet(folder / "pairs.parquet")
    expected: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for setting, a, b in pairs.select("setting", "doc_a", "doc_b").iter_rows():
        # The paper's direction: R(D_i) - R(D_1) for moving evidence, R(D1) - R(D2) otherwise.
        first, second = (b, a) if setting == "position_i" else (a, b)
        key = (setting, f"R({variant[first]}) - R({variant[second]})")
        expected.setdefault(key, []).append((text[first], text[second]))
    assert {(p["setting"], p["difference"]): p["n"] for p in probes} == {k: len(v) for k, v in expected.items()}
    for probe in probes:
        first, second = np.array(expected[probe["setting"], probe["difference"]], dtype=float).T
        if probe["n"] > 1 and np.any(first != second):
            assert probe["t"] == pytest.approx(stats.ttest_rel(first, second).statistic)
            assert probe["p"] == pytest.approx(stats.ttest_rel(first, second).pvalue)

    # The pair scores are cached with the run: a second eval does not score again.
    def refuse(name):
        raise AssertionError("the probe pairs were scored again")

    again = evaluate(
        data, specs, tmp_path / "cache", rerankers={"length": refuse}, bootstrap=BootstrapSettings(resamples=100)
    )
    assert again["retrievers"]["rerank:bm25+length"]["probes"] == probes
    (comparison,) = report["comparisons"]
    assert (comparison["a"], comparison["b"]) == ("bm25", "rerank:bm25+length")
    assert list(comparison["groupings"]) == ["setting", "variant", "rel_bin"]
    assert report["retrievers"]["bm25"]["notes"] == []


def test_holm_matches_statsmodels_and_a_hand_case():
    # Sorted 0.01, 0.03, 0.04 of 3 tests: 3 x 0.01 = 0.03, 2 x 0.03 = 0.06, max(1 x 0.04, 0.06) = 0.06.
    assert holm_adjust([0.01, 0.04, None, 0.03]) == [
        pytest.approx(0.03),
        pytest.approx(0.06),
        None,
        pytest.approx(0.06),
    ]
    ps = list(np.random.default_rng(0).random(12) ** 3)
    assert holm_adjust(ps) == pytest.approx(list(multipletests(ps, method="holm")[1]))
    tests = [{"p": 0.01}, {"p": None}, {"p": 0.02}, {"p": 1.0, "testable": False}]
    apply_holm(tests, "probe position_i")
    # The untestable test (p 1 by construction) is no member: 2 tests, not 3.
    assert [t["p_holm"] for t in tests] == [pytest.approx(0.02), None, pytest.approx(0.02), None]
    assert {t["family_size"] for t in tests} == {2}


def test_a_p_at_the_floor_of_the_shuffles_prints_as_a_bound():
    # 20 queries, all A above B: no random flip reaches the observed mean, so p = 2 / (99 + 1).
    result = paired_randomization(np.ones(20), np.zeros(20), BootstrapSettings(permutations=99))
    assert (result["p"], result["exact"], result["at_floor"]) == (pytest.approx(0.02), False, True)
    assert p_text(result["p"], result["at_floor"]) == "≤ 0.02"
    assert p_text(0.25) == "0.250" and p_text(0.0004) == "4.0e-04"
    exact = paired_randomization(np.ones(5), np.zeros(5), BootstrapSettings(permutations=99))
    assert (exact["p"], exact["exact"], exact["at_floor"]) == (pytest.approx(2 / 32), True, False)
    assert BootstrapSettings().permutations == 9999 and 20 * 2 / (9999 + 1) < 0.01  # 20 corrected tests
    # Over 1,023 queries 2.0 ** n overflowed before a single flip (the pooled grid: 1,400).
    large = paired_randomization(np.ones(1400), np.zeros(1400), BootstrapSettings(permutations=99))
    assert (large["exact"], large["at_floor"]) == (False, True)


def test_difference_interval_equals_scipy_bootstrap_and_effect_size_by_hand():
    rng = np.random.default_rng(4)
    a, b = rng.random(41), rng.random(41)
    settings = BootstrapSettings(resamples=500, seed=9)
    ours = difference_interval(a, b, settings)
    theirs = stats.bootstrap(
        (a - b,), np.mean, n_resamples=500, method="percentile", rng=np.random.default_rng(9)
    ).confidence_interval
    assert ours["difference_ci"] == pytest.approx([theirs.low, theirs.high], abs=1e-12)
    assert ours["effect_size"] == pytest.approx(np.mean(a - b) / np.std(a - b, ddof=1))
    # Differences 1, 2, 3: mean 2, sd 1: d_z = 2.
    assert difference_interval(np.array([2.0, 3.0, 4.0]), np.ones(3), settings)["effect_size"] == pytest.approx(2.0)
    assert difference_interval(np.ones(3), np.ones(3), settings)["effect_size"] is None


def test_probe_positions_are_one_family():
    rows = {
        "query_id": ["q1", "q2", "q3"] * 2,
        "setting": ["position_i"] * 6,
        "doc_a": ["a1", "a2", "a3"] * 2,
        "doc_b": ["b1", "b2", "b3", "c1", "c2", "c3"],
        "score_a": [3.0, 4.0, 5.0] * 2,
        "score_b": [1.0, 3.0, 2.0, 2.0, 3.5, 4.0],
        "variant_a": ["pos01"] * 6,
        "variant_b": ["pos02"] * 3 + ["pos03"] * 3,
    }
    first, second = probe_tests(pl.DataFrame(rows))
    expected = multipletests([first["p"], second["p"]], method="holm")[1]
    assert (first["p_holm"], second["p_holm"]) == (pytest.approx(expected[0]), pytest.approx(expected[1]))
    assert first["family"] == "probe position_i" and first["family_size"] == 2


def test_a_paired_test_over_more_than_a_thousand_queries_does_not_overflow():
    # 2.0 ** 1100 is out of a float's range: eval crashed comparing two retrievers on 1,127 queries.
    rng = np.random.default_rng(0)
    a, b = rng.random(1100), rng.random(1100)
    result = paired_randomization(a, b, BootstrapSettings(permutations=99))
    assert result["n"] == 1100 and result["exact"] is False and 0 < result["p"] <= 1
