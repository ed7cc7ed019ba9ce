"""TREC run files and the per-query table: read back by pytrec_eval, they give eval's own
nDCG@10 per query; Judged@10 and missing queries by hand."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from builder.evaluation.metrics import NDCG, per_query_scores
from builder.evaluation.runs import judged_at, run_file_name, run_lines, run_summary, write_run
from tests.evaluation.test_eval_cli import _eval, built  # noqa: F401  (the fixture)

pytrec_eval = pytest.importorskip("pytrec_eval", reason="pip install pytrec-eval-terrier (dev extra)")


def _read_run(path: Path) -> dict[str, dict[str, float]]:
    run: dict[str, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        qid, _, doc, _, score, _ = line.split()
        run.setdefault(qid, {})[doc] = float(score)
    return run


def test_run_lines_rank_ties_as_eval_does_with_six_decimals():
    run = {"q1": {"d1": 0.5, "d3": 0.5, "d2": 1.25}, "q2": {}}
    assert run_lines(run, ["q2", "q1"], "bm 25") == [
        "q1 Q0 d2 1 1.250000 bm_25",
        "q1 Q0 d3 2 0.500000 bm_25",
        "q1 Q0 d1 3 0.500000 bm_25",
    ]
    assert run_file_name("rerank:bm25+st:pkg:x/model") == "rerank_bm25_st_pkg_x_model.run"


def test_judged_at_10_and_missing_queries_by_hand():
    qrels = {"q1": {"d1": 1, "d2": 0}, "q2": {"d9": 1}, "q3": {"d1": 1}}
    run = {"q1": {f"d{i}": float(20 - i) for i in range(1, 15)}, "q2": {"d9": 1.0}}
    table = judged_at(qrels, run)
    # q1: d1 and d2 judged in its top 10 -> 2/10; q2 retrieved one document, judged: 1/1
    # (over what was retrieved, as ir_measures counts); q3 retrieved nothing: 0, missing.
    assert table.rows() == [("q1", 0.2, False), ("q2", 1.0, False), ("q3", 0.0, True)]
    assert run_summary(qrels, run) == {"judged@10": pytest.approx(0.4), "queries_missing": 1, "queries_judged": 3}


def test_judged_at_10_equals_ir_measures_per_query_and_on_average():
    ir_measures = pytest.importorskip("ir_measures", reason="pip install ir-measures==0.4.3 to compare with it")
    rng = np.random.default_rng(5)
    docs = [f"d{i}" for i in range(40)]
    qrels = {f"q{j}": {docs[k]: int(rng.integers(0, 3)) for k in rng.choice(40, 6, replace=False)} for j in range(30)}
    # Runs of 1 to 25 documents (many under 10); two judged queries get no run. Scores
    # without ties: ir_measures' Judged orders tied scores by id ascending, trec_eval (and
    # eval, and the run file) descending.
    run = {
        q: {d: float(rng.random()) for d in rng.choice(docs, int(rng.integers(1, 26)), replace=False)}
        for q in list(qrels)[2:]
    }
    ours = judged_at(qrels, run)
    measure = ir_measures.parse_measure("Judged@10")
    theirs = {m.query_id: m.value for m in ir_measures.iter_calc([measure], qrels, run)}
    assert dict(ours.select("query_id", "judged@10").iter_rows()) == {
        q: pytest.approx(v, abs=1e-12) for q, v in theirs.items()
    }
    assert run_summary(qrels, run)["judged@10"] == pytest.approx(
        ir_measures.calc_aggregate([measure], qrels, run)[measure], abs=1e-12
    )


def test_pytrec_eval_on_the_written_run_gives_evals_ndcg_per_query(tmp_path: Path):
    rng = np.random.default_rng(2)
    docs = [f"d{i}" for i in range(30)]
    qrels = {f"q{j}": {docs[k]: int(rng.integers(1, 3)) for k in rng.choice(30, 3, replace=False)} for j in range(12)}
    # Scores on a grid of 0.25: many ties, which the file must keep in eval's order.
    run = {q: {d: float(rng.integers(0, 8)) / 4 for d in rng.choice(docs, 20, replace=False)} for q in qrels}
    path = write_run(tmp_path / "x.run", run, list(qrels), "x")
    theirs = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(_read_run(path))
    ours = dict(per_query_scores(qrels, run).select("query_id", NDCG).iter_rows())
    assert ours == {q: pytest.approx(theirs[q]["ndcg_cut_10"], abs=1e-12) for q in qrels}


def test_eval_writes_a_run_per_retriever_and_the_per_query_table(built: Path, tmp_path: Path):  # noqa: F811
    _eval(
        str(built),
        "-r",
        "bm25",
        "--out",
        str(tmp_path / "o"),
        "--runs-dir",
        str(tmp_path / "runs"),
        "--resamples",
        "20",
        "--permutations",
        "99",
    )
    report = json.loads((tmp_path / "o" / "eval.json").read_text())
    summary = report["retrievers"]["bm25"]["run"]
    assert summary["file"] == str(tmp_path / "runs" / "bm25.run") and summary["queries_missing"] == 0
    table = pl.read_csv(tmp_path / "runs" / "per_query.tsv", separator="\t")
    assert table.height == 16 and {"retriever", "query_id", "position_tag", NDCG, "judged@10"} <= set(table.columns)
    qrels = {q: {d: int(s)} for q, d, s in pl.read_parquet(built / "qrels.parquet").iter_rows()}
    theirs = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(_read_run(tmp_path / "runs" / "bm25.run"))
    assert dict(table.select("query_id", NDCG).iter_rows()) == {
        q: pytest.approx(theirs[q]["ndcg_cut_10"], abs=1e-12) for q in qrels
    }
    assert summary["judged@10"] == pytest.approx(table["judged@10"].mean())
