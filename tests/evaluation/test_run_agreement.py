"""eval's run files read by ranx and ir_measures give eval's own nDCG@10 and Recall@100,
per query and as the mean, on a built set where BM25 is far from perfect and the qrels
are graded (0, 1 and 2)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import polars as pl
import pytest

from builder.publish.beir import write_beir
from tests.evaluation.test_eval_cli import _eval
from tests.evaluation.tiny_bench import tiny_bench

ranx = pytest.importorskip("ranx", reason="pip install ranx==0.3.21 (not an extra of build-bench)")
ir_measures = pytest.importorskip("ir_measures", reason="pip install ir-measures==0.4.3 (not an extra of build-bench)")

# Words of the filler every document shares: BM25 now ranks other documents above some positives.
VAGUE = " town hall market roads"


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    bench = tiny_bench()
    queries = bench.queries.with_columns(pl.col("text") + VAGUE)
    n = queries.height
    # Each query also judges a second document relevant (grade 2) and a third not relevant (grade 0).
    extra = pl.DataFrame(
        {
            "query_id": queries["query_id"].to_list() * 2,
            "doc_id": [f"d{(i + 5) % n:02d}" for i in range(n)] + [f"d{(i + 9) % n:02d}" for i in range(n)],
            "score": [2] * n + [0] * n,
        }
    )
    folder = write_beir(
        bench.replace(queries=queries, qrels=pl.concat([bench.qrels, extra])),
        tmp_path_factory.mktemp("agree") / "bench",
    )
    _eval(str(folder), "-r", "bm25", "--resamples", "20", "--permutations", "99", "--out", str(folder / "eval"))
    return folder


def _qrels(folder: Path) -> dict[str, dict[str, int]]:
    """The BEIR qrels file as the snippet on the docs' evaluation page reads it."""
    qrels: dict[str, dict[str, int]] = {}
    with open(folder / "qrels" / "test.tsv", newline="") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    return qrels


def _evals(folder: Path) -> tuple[dict, dict[str, tuple[float, float]]]:
    report = json.loads((folder / "eval" / "eval.json").read_text())
    table = pl.read_csv(folder / "eval" / "per_query.tsv", separator="\t", schema_overrides={"query_id": pl.Utf8})
    return report["retrievers"]["bm25"]["overall"], {
        q: (n, r) for q, n, r in table.select("query_id", "ndcg@10", "recall@100").iter_rows()
    }


def test_the_set_is_not_trivial(evaluated: Path):
    overall, per_query = _evals(evaluated)
    assert 0.2 < overall["ndcg@10"]["value"] < 0.9 and len({n for n, _ in per_query.values()}) > 5


def test_ranx_reads_evals_figures(evaluated: Path):
    overall, per_query = _evals(evaluated)
    qrels = ranx.Qrels(_qrels(evaluated))
    run = ranx.Run.from_file(str(evaluated / "eval" / "bm25.run"), kind="trec")
    means = ranx.evaluate(qrels, run, ["ndcg@10", "recall@100"])
    assert means == {
        "ndcg@10": pytest.approx(overall["ndcg@10"]["value"], abs=1e-9),
        "recall@100": pytest.approx(overall["recall@100"]["value"], abs=1e-9),
    }
    ranx.evaluate(qrels, run, ["ndcg@10", "recall@100"], return_mean=False)
    theirs = {q: (run.scores["ndcg@10"][q], run.scores["recall@100"][q]) for q in per_query}
    assert per_query == {q: pytest.approx(v, abs=1e-9) for q, v in theirs.items()}


def test_ir_measures_reads_evals_figures(evaluated: Path):
    overall, per_query = _evals(evaluated)
    qrels = _qrels(evaluated)
    measures = [ir_measures.nDCG @ 10, ir_measures.R @ 100]
    run = list(ir_measures.read_trec_run(str(evaluated / "eval" / "bm25.run")))
    means = ir_measures.calc_aggregate(measures, qrels, run)
    assert {str(m): v for m, v in means.items()} == {
        "nDCG@10": pytest.approx(overall["ndcg@10"]["value"], abs=1e-9),
        "R@100": pytest.approx(overall["recall@100"]["value"], abs=1e-9),
    }
    theirs: dict[str, dict[str, float]] = {}
    for metric in ir_measures.iter_calc(measures, qrels, run):
        theirs.setdefault(metric.query_id, {})[str(metric.measure)] = metric.value
    assert per_query == {q: pytest.approx((v["nDCG@10"], v["R@100"]), abs=1e-9) for q, v in theirs.items()}
