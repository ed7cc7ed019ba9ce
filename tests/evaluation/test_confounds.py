"""Confounds of position: features per query by hand, standardized mean differences,
warnings that name the confound, PSI within overlap tertiles."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from builder.backends.rerankers import BM25Config
from builder.backends.rerankers.bm25 import stopwords
from builder.evaluation.confounds import (
    describe,
    overlap_psi_text,
    overlap_share,
    psi_by_overlap,
    query_features,
    question_type,
    smd,
)
from builder.evaluation.data import load_eval_data
from builder.evaluation.psi_null import NullSettings
from tests.evaluation.test_eval_cli import built  # noqa: F401  (the fixture)


def test_overlap_question_type_and_smd_by_hand():
    stop = stopwords(BM25Config())
    # Content words: which, goats, produce, blue, cheese, oskara; the span holds goats, cheese, oskara.
    span = "Brindle goats in Oskara make cheese."
    assert overlap_share("Which goats produce blue cheese in Oskara?", span, stop) == 0.5
    assert overlap_share("the a of", "anything", stop) is None  # no content word to find
    assert [question_type(q) for q in ("When was it?", "how many", "Name the city", "")] == [
        "when",
        "how",
        "other",
        "other",
    ]
    # Means 2 and 3, both variances 1: (2 - 3) / 1.
    assert smd(np.array([1.0, 2.0, 3.0]), np.array([2.0, 3.0, 4.0])) == pytest.approx(-1.0)
    assert smd(np.ones(3), np.ones(4)) is None and smd(np.ones(1), np.zeros(3)) is None


def _features(overlap: list[float], types: list[str]) -> pl.DataFrame:
    n = len(overlap)
    return pl.DataFrame(
        {
            "query_id": [f"q{i}" for i in range(n)],
            "overlap": overlap,
            "span_bm25": [1.0] * n,
            "span_words": [8] * n,
            "doc_words": [100] * n,
            "question_type": types,
        }
    )


def test_a_difference_above_0_2_is_a_warning_that_names_it():
    # beginning: overlap 0.9, 1.0, 0.9, 1.0; end: 0.5, 0.6, 0.5, 0.6 (both sd 0.0577): SMD +6.93.
    features = _features([0.9, 1.0, 0.9, 1.0, 0.5, 0.6, 0.5, 0.6], ["what"] * 8)
    labels = pl.Series(["beginning"] * 4 + ["end"] * 4)
    found = describe(features, labels, 4, "position_tag")
    assert [g["group"] for g in found["groups"]] == ["beginning", "end"]
    assert found["groups"][0]["overlap"]["mean"] == pytest.approx(0.95)
    assert found["groups"][0]["question_types"] == {"what": 1.0}
    assert found["warnings"] == [
        "position_tag beginning and end differ in overlap (standardized mean difference "
        "+6.93): PSI over position_tag measures it too"
    ]
    assert describe(features, labels, 5, "position_tag")["warnings"] == []  # groups too small to compare


def test_psi_within_overlap_tertiles():
    rng = np.random.default_rng(0)
    n = 90
    overlap = rng.random(n)
    scores = pl.DataFrame(
        {
            "query_id": [f"q{i}" for i in range(n)],
            "ndcg@10": overlap,
            "position_tag": rng.choice(["beginning", "middle", "end"], n).tolist(),
        }
    )
    strata = psi_by_overlap(
        scores, _features(overlap.tolist(), ["what"] * n), "position_tag", NullSettings(permutations=99, min_group=5)
    )
    assert [(t["tertile"], t["n"]) for t in strata] == [("low", 30), ("middle", 30), ("high", 30)]
    assert strata[0]["overlap_from"] == pytest.approx(overlap.min())
    assert strata[2]["overlap_to"] == pytest.approx(overlap.max())
    assert all(t["psi"]["groups"] == ["beginning", "middle", "end"] for t in strata)
    assert all(
        sum(t["group_n"].values()) == 30 and list(t["group_n"]) == ["beginning", "middle", "end"] for t in strata
    )


def test_a_tertile_too_small_for_psi_names_its_groups():
    tertile = {
        "tertile": "low",
        "overlap_from": 0.0,
        "overlap_to": 0.25,
        "n": 7,
        "group_n": {"beginning": 4, "middle": 0, "end": 3},
        "psi": {"value": None, "small_groups": ["beginning", "end"], "reason": "fewer than 2 groups of at least 5"},
    }
    assert overlap_psi_text(tertile, 5) == (
        "low overlap (0.000-0.250, n 7): no PSI: fewer than 2 groups of at least 5 queries (beginning: 4, end: 3)"
    )
    found = {
        **tertile,
        "psi": {
            "value": 0.2,
            "null_median": 0.1,
            "null_p95": 0.3,
            "p": 0.25,
            "at_floor": False,
            "above_null_median": 0.1,
            "above_null_median_ci": [-0.15, 0.18],
            "small_groups": [],
            "small_groups_included": False,
        },
    }
    assert overlap_psi_text(found, 5) == (
        "low overlap (0.000-0.250, n 7): 0.200 (null median 0.100, 95% 0.300; "
        "p 0.250; above the null median +0.100 [-0.150, +0.180])"
    )


def test_features_of_a_built_set(built: Path):  # noqa: F811
    features = query_features(load_eval_data(built)).sort("query_id")
    first = features.row(0, named=True)
    # q00: "When was the Varneck lighthouse painted crimson?" against its fact of 8 words, at the start.
    assert (first["span_words"], first["question_type"], first["overlap"]) == (8, "when", 0.8)
    assert first["span_bm25"] > 0 and features.height == 16
