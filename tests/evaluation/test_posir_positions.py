"""PosIR's position definitions in `eval`, against figures worked out by hand.

PosIR: relative position = midpoint of the evidence span / document characters; 20 bins
closed on the right with the first including 0; length buckets by document tokens
[0, 512], (512, 1024], (1024, 1536], (1536, inf); PSI over the bins that hold queries.
"""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pytest

from builder.evaluation.data import load_eval_data
from builder.evaluation.evaluate import analyze
from builder.evaluation.positions import posir_bin
from builder.evaluation.retrievers import Retrieval

INV_LOG3 = 1 / math.log2(3)  # nDCG@10 of a relevant document ranked 2nd
# Five queries over five 1000-character documents:
#   query  span        midpoint  rel    PosIR bin   tokens  bucket  rank  nDCG@10
#   q1     [0, 0]         0      0.00   0           512     Q1      1     1
#   q2     [80, 120]    100      0.10   1 (not 2)   300     Q1      2     0.6309
#   q3     [60, 100]     80      0.08   1           513     Q2      3     0.5
#   q4     [500, 600]   550      0.55   10          1024    Q2      1     1
#   q5     [900, 1000]  950      0.95   18 (not 19) 1537    Q4      2     0.6309
SPANS = {"q1": [0, 0], "q2": [80, 120], "q3": [60, 100], "q4": [500, 600], "q5": [900, 1000]}
TOKENS = {"q1": 512, "q2": 300, "q3": 513, "q4": 1024, "q5": 1537}
RANK = {"q1": 1, "q2": 2, "q3": 3, "q4": 1, "q5": 2}


def posir_folder(root: Path) -> Path:
    """One `posir/<lang>/<domain>/` folder as the PosIR layout writes it."""
    folder = root / "posir" / "eng-Latn" / "web"
    (folder / "qrels").mkdir(parents=True)
    ids = list(SPANS)
    docs = [f"d{q[1:]}" for q in ids]
    pl.DataFrame({"_id": docs, "title": [""] * 5, "text": ["x" * 1000] * 5}).write_parquet(folder / "corpus.parquet")
    pl.DataFrame(
        {
            "_id": ids,
            "text": [f"query {q}" for q in ids],
            "doc_id": docs,
            # build-bench's own fields, start-based and left-closed, which PosIR's replace:
            "rel_pos": [SPANS[q][0] / 1000 for q in ids],
            "length_bucket": ["Q1"] * 5,
            "pos_char_span": [SPANS[q] for q in ids],
            "pos_char_length": [1000] * 5,
            "pos_token_length": [TOKENS[q] for q in ids],
        }
    ).write_parquet(folder / "queries.parquet")
    pl.DataFrame({"query-id": ids, "corpus-id": docs, "score": [1] * 5}).write_parquet(
        folder / "qrels" / "test.parquet"
    )
    return folder


def run() -> dict[str, dict[str, float]]:
    """Every query's document at its rank in the table above, behind other documents."""
    out = {}
    for q, rank in RANK.items():
        others = [d for d in ("d1", "d2", "d3", "d4", "d5") if d != f"d{q[1:]}"][: rank - 1]
        ranked = [*others, f"d{q[1:]}"]
        out[q] = {d: 1.0 - i / 10 for i, d in enumerate(ranked)}
    return out


@pytest.mark.parametrize(
    ("rel", "expected"),
    [(0.0, 0), (0.05, 0), (0.0500001, 1), (0.1, 1), (0.55, 10), (0.95, 18), (0.9500001, 19), (1.0, 19)],
)
def test_posir_bins_are_closed_on_the_right_and_the_first_holds_zero(rel, expected):
    assert posir_bin(rel) == expected


def test_posir_layout_folder_is_scored_with_posir_definitions(tmp_path):
    data = load_eval_data(posir_folder(tmp_path))
    assert data.positions == "posir"
    queries = data.queries.sort("query_id")
    assert queries["rel_pos"].to_list() == pytest.approx([0.0, 0.1, 0.08, 0.55, 0.95])
    assert queries["position_bin"].to_list() == [0, 1, 1, 10, 18]
    assert queries["length_bucket"].to_list() == ["Q1", "Q1", "Q2", "Q2", "Q4"]
    section = analyze(data, Retrieval(run=run()))
    bins = {g["group"]: g["ndcg@10"]["value"] for g in section["relative_bins"]["groups"] if g["n"]}
    # bin 0: q1 = 1; bin 1: (q2 + q3) / 2 = (0.6309 + 0.5) / 2 = 0.5654648767857288;
    # bin 10: q4 = 1; bin 18: q5 = 0.6309. PSI over these four = 1 - 0.56546 / 1.
    assert bins == pytest.approx({0: 1.0, 1: 0.5654648767857288, 10: 1.0, 18: INV_LOG3})
    assert section["relative_bins"]["psi"]["value"] == pytest.approx(0.4345351232142712)
    assert section["relative_bins"]["empty_groups"] == 16
    buckets = section["length_buckets"]
    assert sorted(buckets) == ["Q1", "Q2", "Q4"]
    # Q1: bins 0 (1) and 1 (0.6309) -> 1 - 0.6309; Q2: bins 1 (0.5) and 10 (1) -> 0.5; Q4: one bin -> 0.
    assert buckets["Q1"]["psi_bins"]["value"] == pytest.approx(1 - INV_LOG3)
    assert buckets["Q2"]["psi_bins"]["value"] == pytest.approx(0.5)
    assert buckets["Q4"]["psi_bins"]["value"] == 0.0


def test_native_definitions_stay_selectable(tmp_path):
    data = load_eval_data(posir_folder(tmp_path), positions="native")
    assert data.positions == "native"
    queries = data.queries.sort("query_id")
    # The dataset's own start-based rel_pos, binned closed on the left.
    assert queries["rel_pos"].to_list() == pytest.approx([0.0, 0.08, 0.06, 0.5, 0.9])
    section = analyze(data, Retrieval(run=run()))
    assert [g["group"] for g in section["relative_bins"]["groups"] if g["n"]] == [0, 1, 10, 18]
    assert list(section["length_buckets"]) == ["Q1"]


def test_eval_command_takes_the_definition_and_reports_it(tmp_path):
    from typer.testing import CliRunner

    from tests.evaluation.test_eval_cli import app

    folder = posir_folder(tmp_path)
    result = CliRunner().invoke(app, ["eval", str(folder), "-r", "bm25", "--json", "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert '"positions": "posir"' in result.stdout
    native = CliRunner().invoke(
        app, ["eval", str(folder), "-r", "bm25", "--positions", "native", "--json", "--out", str(tmp_path / "o")]
    )
    assert native.exit_code == 0 and '"positions": "native"' in native.stdout
    bad = CliRunner().invoke(app, ["eval", str(folder), "-r", "bm25", "--positions", "posIR"])
    assert bad.exit_code == 2 and "expected one of native, posir" in bad.output
