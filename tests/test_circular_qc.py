"""Issue #24's circular case end to end: BM25 filters false negatives in the build, then
`eval --retriever bm25` scores the result; the build records its QC scorers and eval
warns next to that retriever's figures (and only that one's)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from builder.cli import app
from builder.evaluation.circular import circular_notes
from builder.evaluation.retrievers import parse_spec
from tests.conftest import FIXTURES

runner = CliRunner()
RECIPE = FIXTURES / "circular" / "bm25_false_negatives.yaml"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("circular")
    result = runner.invoke(app, ["build", str(RECIPE), "--run-dir", str(root / "runs"), "--out", str(root / "out")])
    assert result.exit_code == 0, result.output
    return root / "out"


def test_the_build_records_its_qc_scorers_and_warnings(built):
    stats = json.loads((built / "stats.json").read_text(encoding="utf-8"))
    assert stats["qc_scorers"] == [{"stage": "04_false_negatives", "name": "bm25", "backend": "bm25", "model": None}]
    assert stats["warnings"][:2] == [
        "04_false_negatives: false-negative removal took 33% of the documents (4 of 12; warn_above 5%)",
        "04_false_negatives: false-negative removal took 36% of the queries (12 of 33; warn_above 5%)",
    ]
    card = (built / "README.md").read_text(encoding="utf-8")
    warnings = card.split("## Warnings", 1)[1].split("\n## ", 1)[0]
    for text in stats["warnings"]:
        assert f"- {text}" in warnings
    assert "| `04_false_negatives` | `bm25` | bm25 | - |" in card


def test_eval_of_the_qc_scorer_warns_beside_its_figures(built, tmp_path):
    result = runner.invoke(
        app, ["eval", str(built), "--retriever", "bm25", "--out", str(tmp_path), "--cache-dir", str(tmp_path / "cache")]
    )
    assert result.exit_code == 0, result.output
    assert (
        "warning: bm25: circular QC: 04_false_negatives judged with bm25 [bm25], which is this retriever"
    ) in " ".join(result.output.split())
    report = json.loads((tmp_path / "eval.json").read_text(encoding="utf-8"))
    assert report["retrievers"]["bm25"]["circular_qc"] == [
        "circular QC: 04_false_negatives judged with bm25 [bm25], which is this retriever; its figures are "
        "biased in its favour"
    ]


def test_only_retrievers_that_are_a_qc_scorer_are_named():
    scorers = [
        {"stage": "05_span_contrast", "name": "m3", "backend": "flag", "model": "BAAI/bge-reranker-v2-m3"},
        {"stage": "06_false_negatives", "name": "recall", "backend": "bi_encoder", "model": "BAAI/bge-m3"},
    ]
    specs = [
        parse_spec(s)
        for s in (
            "bm25",
            "flag:BAAI/bge-m3",
            "st:/models/BAAI/bge-m3",
            "st:intfloat/e5-base",
            "rerank:bm25+flag:BAAI/bge-reranker-v2-m3",
        )
    ]
    notes = circular_notes(specs, scorers)
    assert sorted(notes) == ["flag:BAAI/bge-m3", "rerank:bm25+flag:BAAI/bge-reranker-v2-m3", "st:/models/BAAI/bge-m3"]
    assert "05_span_contrast judged with m3" in notes["rerank:bm25+flag:BAAI/bge-reranker-v2-m3"][0]


def test_a_folder_below_the_build_finds_its_stage_records(tmp_path):
    from builder.evaluation.circular import recorded_scorers

    stages = [{"stage": "06_false_negatives", "qc_scorers": [{"name": "bm25", "backend": "bm25", "model": None}]}]
    (tmp_path / "fra-Latn").mkdir()
    (tmp_path / "fra-Latn" / "stats.json").write_text(json.dumps({"language": "fra-Latn", "stages": stages}))
    (tmp_path / "posir" / "fra-Latn" / "general").mkdir(parents=True)
    (tmp_path / "stats.json").write_text(
        json.dumps({"qc_scorers": [{"stage": "06_false_negatives", "name": "x", "backend": "bm25", "model": None}]})
    )
    assert recorded_scorers(tmp_path / "fra-Latn") == [
        {"stage": "06_false_negatives", "name": "bm25", "backend": "bm25", "model": None}
    ]
    assert [s["name"] for s in recorded_scorers(tmp_path / "posir" / "fra-Latn" / "general")] == ["x"]
