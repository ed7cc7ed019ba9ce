"""Metric arithmetic on a hand-made run and qrels, with every expected value worked out."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from builder.evaluation.data import EvalData
from builder.evaluation.evaluate import analyze, visibility
from builder.evaluation.intervals import psi_values
from builder.evaluation.metrics import group_universe, per_query_scores
from builder.evaluation.retrievers import Retrieval

# Four queries, one relevant document each (relevance 1):
#   q1: d1 ranked 1st          -> nDCG@10 = 1/log2(2)              = 1.0
#   q2: d2 ranked 2nd          -> nDCG@10 = 1/log2(3)              = 0.6309297535714575
#   q3: d3 ranked 3rd          -> nDCG@10 = 1/log2(4)              = 0.5
#   q4: d4 never retrieved     -> nDCG@10 = 0, Recall@100 = 0
QRELS = {"q1": {"d1": 1}, "q2": {"d2": 1}, "q3": {"d3": 1}, "q4": {"d4": 1}}
RUN = {
    "q1": {"d1": 0.9, "d2": 0.5},
    "q2": {"d1": 0.9, "d2": 0.8, "d3": 0.1},
    "q3": {"d1": 0.9, "d2": 0.8, "d3": 0.7},
    "q4": {"d1": 0.9},
}
INV_LOG3 = 1 / math.log2(3)


def test_per_query_scores_match_hand_computed_values():
    scores = per_query_scores(QRELS, RUN)
    assert scores["query_id"].to_list() == ["q1", "q2", "q3", "q4"]
    assert scores["ndcg@10"].to_list() == pytest.approx([1.0, INV_LOG3, 0.5, 0.0])
    assert scores["recall@100"].to_list() == pytest.approx([1.0, 1.0, 1.0, 0.0])


def test_query_missing_from_the_run_scores_zero():
    scores = per_query_scores(QRELS, {"q1": RUN["q1"]})
    assert scores["ndcg@10"].to_list() == pytest.approx([1.0, 0.0, 0.0, 0.0])


def test_psi_leaves_empty_groups_out():
    # 1 - 0.4 / 0.8 = 0.5 over the two groups with queries; the NaN (empty) group is left out.
    values = psi_values(np.array([[0.8, np.nan, 0.4], [0.7, 0.7, np.nan], [0.0, 0.0, 0.0], [np.nan] * 3]))
    assert values[:2].tolist() == pytest.approx([0.5, 0.0])
    assert np.isnan(values[2])  # max must be positive
    assert np.isnan(values[3])  # no group holds a query


def test_group_universe_orders_char_buckets_and_completes_bins_and_tags():
    assert group_universe("char_bucket", ["500+", "100-200", "0-100"]) == ["0-100", "100-200", "500+"]
    assert group_universe("position_bin", [3]) == list(range(20))
    assert group_universe("position_tag", ["end"]) == ["beginning", "middle", "end"]


def _data() -> EvalData:
    queries = pl.DataFrame(
        {
            "query_id": ["q1", "q2", "q3", "q4"],
            "text": ["a", "b", "c", "d"],
            "doc_id": ["d1", "d2", "d3", "d4"],
            "position_tag": ["beginning", "beginning", "middle", None],
            "length_bucket": ["Q1", "Q1", "Q2", "Q2"],
            "rel_pos": [0.05, 0.3, 0.6, 0.9],
            "evidence_start": [0, 10, 60, None],
        }
    )
    corpus = pl.DataFrame({"doc_id": ["d1", "d2", "d3", "d4"], "title": [""] * 4, "text": ["x"] * 4})
    return EvalData(Path("."), "f" * 64, corpus, queries, QRELS, unjudged_queries=0)


def test_analyze_groups_psi_length_buckets_and_trend():
    section = analyze(_data(), Retrieval(run=RUN))
    # Overall: (1 + 0.6309 + 0.5 + 0) / 4 = 0.5327324383928644.
    assert section["overall"]["ndcg@10"]["value"] == pytest.approx(0.5327324383928644)
    tags = section["groupings"]["position_tag"]
    # beginning = (1 + 0.6309) / 2 = 0.8154648767857288, middle = 0.5, end has no query
    # (q4 carries no tag). PSI = 1 - 0.5 / 0.8154648767857288 = 0.38685280723454163.
    assert [g["ndcg@10"]["value"] for g in tags["groups"]] == pytest.approx([0.8154648767857288, 0.5, None])
    assert tags["psi"]["value"] == pytest.approx(0.38685280723454163)
    assert (tags["groups_with_queries"], tags["empty_groups"]) == (2, 1)
    # PosIR parity: rel_pos 0.05 -> bin 1, 0.3 -> bin 6 (Q1); 0.6 -> bin 12, 0.9 -> bin 18 (Q2).
    # Q1 PSI = 1 - 0.6309 / 1.0 = 0.36907024642854247 with 18 empty bins; Q2 PSI = 1 - 0 / 0.5 = 1.
    q1, q2 = section["length_buckets"]["Q1"], section["length_buckets"]["Q2"]
    assert q1["psi_bins"]["value"] == pytest.approx(0.36907024642854247)
    assert (q1["bins_with_queries"], q1["empty_bins"]) == (2, 18)
    assert q2["psi_bins"]["value"] == pytest.approx(1.0) and q2["ndcg@10"]["value"] == pytest.approx(0.25)
    # Slope: mean x = 0.4625, mean y = 0.53273; sum of (x - mx)(y - my) = -0.44627608,
    # sum of (x - mx)^2 = 0.406875, slope = -1.0968383040377556. nDCG falls at every step,
    # so the rank correlation is exactly -1.
    assert section["trend"]["slope"] == pytest.approx(-1.0968383040377556)
    assert section["trend"]["spearman"] == pytest.approx(-1.0)
    assert section["relative_bins"]["groups"][1]["ndcg@10"]["value"] == 1.0


def test_visibility_separates_evidence_beyond_the_window():
    # A 10-token window: d1 fits; d2 and d3 are cut at character 50; d4's offsets are unknown.
    retrieval = Retrieval(
        run=RUN, max_length=10, doc_tokens={"d1": 5, "d2": 20, "d3": 20, "d4": 20}, window_end={"d2": 50, "d3": 50}
    )
    data = _data()
    assert visibility(data, retrieval).to_list() == ["visible", "visible", "beyond", "unknown"]
    trunc = analyze(data, retrieval)["truncation"]
    assert trunc["positive_docs_over_limit"] == 3
    assert trunc["queries"]["visible"]["n"] == 2
    assert trunc["queries"]["visible"]["ndcg@10"]["value"] == pytest.approx(0.8154648767857288)
    assert trunc["queries"]["beyond"]["ndcg@10"]["value"] == pytest.approx(0.5)
    # Among visible queries only the beginning tag is left: PSI over one group is 0.
    assert trunc["visible_only"]["position_tag"]["psi"]["value"] == 0.0
    assert visibility(data, Retrieval(run=RUN)).to_list() == ["visible"] * 4  # no limit (bm25)
