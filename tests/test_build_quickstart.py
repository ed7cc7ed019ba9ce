"""The offline quickstart builds a position-aware BEIR folder, and a rerun resumes."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
from typer.testing import CliRunner

from builder.cli import app

runner = CliRunner()


def _build(tmp_path: Path, *extra: str):
    args = ["build", "quickstart", "--out", str(tmp_path / "out"), "--run-dir", str(tmp_path / "runs"), *extra]
    return runner.invoke(app, args)


def test_quickstart_builds_a_position_aware_beir_folder(tmp_path):
    result = _build(tmp_path)
    assert result.exit_code == 0, result.output
    out = tmp_path / "out"
    corpus = [json.loads(line) for line in (out / "corpus.jsonl").read_text().splitlines()]
    queries = [json.loads(line) for line in (out / "queries.jsonl").read_text().splitlines()]
    qrels = (out / "qrels" / "test.tsv").read_text().splitlines()
    assert len(corpus) == 36
    assert set(corpus[0]) == {"_id", "title", "text"}
    assert len(queries) >= 60
    assert qrels[0] == "query-id\tcorpus-id\tscore" and len(qrels) == len(queries) + 1
    texts = {d["_id"]: d["text"] for d in corpus}
    for q in queries:
        (span,) = q["spans"]
        assert texts[q["doc_id"]][span["start"] : span["end"]] == q["reference_texts"][0]
        assert 0 <= q["position_bin"] < 20 and q["position_tag"] in ("beginning", "middle", "end")
        assert q["pos_char_span"] == [[span["start"], span["end"]]]
    tags = {q["position_tag"] for q in queries}
    assert tags == {"beginning", "middle", "end"}
    stats = json.loads((out / "stats.json").read_text())
    assert stats["counts"]["queries"] == len(queries)


def test_rerun_resumes_every_stage_and_writes_identical_output(tmp_path):
    assert _build(tmp_path).exit_code == 0
    first = {p.name: p.read_bytes() for p in (tmp_path / "out").glob("*.jsonl")}
    again = _build(tmp_path)
    assert again.exit_code == 0
    assert again.output.count("loaded from checkpoint") == 4
    assert first == {p.name: p.read_bytes() for p in (tmp_path / "out").glob("*.jsonl")}


def test_changing_a_late_stage_reruns_only_that_stage(tmp_path):
    assert _build(tmp_path).exit_code == 0
    result = _build(tmp_path, "--set", "stages.localize_spans.positions.n_bins=10")
    assert result.exit_code == 0
    assert result.output.count("loaded from checkpoint") == 3
    bins = pl.read_parquet(tmp_path / "out" / "queries.parquet")["position_bin"]
    assert bins.max() < 10


def test_limit_and_fresh(tmp_path):
    result = _build(tmp_path, "--limit", "30", "--set", "stages.sample_by_length.n_docs=10", "--fresh")
    assert result.exit_code == 0, result.output
    assert pl.read_parquet(tmp_path / "out" / "corpus.parquet").height == 10
    drops = pl.read_parquet(tmp_path / "out" / "drops.parquet")
    assert (
        drops.filter(pl.col("reason") == "not_sampled").height
        + drops.filter(pl.col("stage") == "01_sample_by_length").height
    ) > 0


def test_a_failure_while_writing_leaves_the_previous_output_untouched(tmp_path, monkeypatch):
    import builder.publish.outputs

    assert _build(tmp_path).exit_code == 0
    before = (tmp_path / "out" / "queries.jsonl").read_bytes()

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(builder.publish.outputs, "publish_outputs", broken)  # the runner imports it to write
    result = _build(tmp_path, "--set", "stages.sample_by_length.n_docs=10")
    assert result.exit_code == 1 and "error: disk full" in result.output
    assert (tmp_path / "out" / "queries.jsonl").read_bytes() == before
    assert (tmp_path / "out" / "README.md").exists()


def test_quickstart_on_ray_writes_what_the_local_build_writes(tmp_path, ray_local):
    local = _build(tmp_path / "local")
    assert local.exit_code == 0
    result = _build(tmp_path / "ray", "--executor", "ray")
    assert result.exit_code == 0, result.output
    # The load's progress line counts the same documents on Ray.
    assert "00_load: read 79, kept 78, dropped 1 (" in result.output
    assert "00_load: read 79, kept 78, dropped 1 (" in local.output
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv", "drops.parquet", "corpus.parquet"):
        assert (tmp_path / "ray" / "out" / name).read_bytes() == (tmp_path / "local" / "out" / name).read_bytes(), name
