"""Runner guarantees: the in == out + dropped invariant, plan estimates, the stage list."""

from __future__ import annotations

import polars as pl
import pytest
from typer.testing import CliRunner

from builder.bench import Bench
from builder.cli import app
from builder.run.invariants import InvariantError, check_invariants
from builder.stages.sample_by_length import SampleByLength, SampleParams

runner = CliRunner()
STAGE = SampleByLength(SampleParams(n_docs=1))


def _bench() -> Bench:
    return Bench.of(
        pl.DataFrame({"doc_id": ["a", "b"], "text": ["x", "y"]}),
        pl.DataFrame({"query_id": ["q"], "text": ["?"], "doc_id": ["a"]}),
        pl.DataFrame({"query_id": ["q"], "doc_id": ["a"], "score": [1]}),
    )


def test_a_recorded_drop_passes_and_is_counted():
    before = _bench()
    after = before.drop_docs({"b": "too_short"}, "01_x")
    stats = check_invariants(before, after, STAGE, "01_x")
    assert stats.docs_in == 2 and stats.docs_out == 1 and stats.dropped == {"too_short": 1}


def test_a_silent_loss_is_refused():
    before = _bench()
    after = before.replace(corpus=before.corpus.filter(pl.col("doc_id") == "a"))
    with pytest.raises(InvariantError, match="vanished without a drop reason"):
        check_invariants(before, after, STAGE, "01_x")


def test_dangling_qrels_and_duplicate_ids_are_refused():
    before = _bench()
    dangling = before.replace(qrels=pl.DataFrame({"query_id": ["q"], "doc_id": ["zz"], "score": [1]}))
    with pytest.raises(InvariantError, match="qrels point at removed"):
        check_invariants(before, dangling, STAGE, "01_x")
    doubled = before.replace(corpus=pl.concat([before.corpus, before.corpus]))
    with pytest.raises(InvariantError, match="duplicate doc_id"):
        check_invariants(before, doubled, STAGE, "01_x")


@pytest.fixture
def wide(monkeypatch):
    from builder import cli

    monkeypatch.setattr(cli.out, "width", 200)


def test_plan_lists_stages_models_and_llm_calls(write_recipe, wide):
    path = write_recipe(
        "name: p\nsources: [{type: python_docs}]\n"
        "models: {gen: {model: tiny-model, base_url: 'http://127.0.0.1:9/v1'}}\n"
        "stages:\n  - sample_by_length: {buckets: [0, 100000], weights: [1], n_docs: 10}\n"
        "  - summarize: {llm: gen}\n  - generate_queries: {llm: gen, calls_per_doc: 2}\n"
        "  - localize_spans: {llm: gen}\n"
    )
    result = runner.invoke(app, ["plan", str(path)])
    assert result.exit_code == 0, result.output
    rows = [line.replace("│", " ").split() for line in result.output.splitlines()]
    lines = {r[0]: " ".join(r) + " " for r in rows if r and r[0][:2].isdigit()}
    assert "gen (tiny-model)" in lines["02_summarize"]
    assert " 10 " in lines["02_summarize"]  # ten documents -> ten summary calls
    assert " 20 " in lines["03_generate_queries"]  # two calls per document
    assert "total" in result.output
    assert "executor: local (this process)" in result.output
    ray_plan = runner.invoke(app, ["plan", str(path), "--executor", "ray", "--set", "executor.address=auto"])
    if ray_plan.exit_code == 0:  # with the ray extra; without it validation names the install
        assert "executor: ray on auto, 256 rows per task" in ray_plan.output
    else:
        assert ray_plan.exit_code == 2 and "[ray]" in ray_plan.output and "not installed" in ray_plan.output


def test_stages_command_lists_every_stage_with_params(wide):
    result = runner.invoke(app, ["stages"])
    assert result.exit_code == 0
    for name in ("sample_by_length", "summarize", "generate_queries", "localize_spans"):
        assert name in result.output
    assert "n_docs" in result.output and "fuzzy_min_score" in result.output


def test_missing_local_file_is_one_clear_line(write_recipe):
    path = write_recipe(
        "name: m\nsources: [{type: jsonl, path: nowhere.jsonl}]\nstages: [{sample_by_length: {n_docs: 1}}]\n"
    )
    result = runner.invoke(app, ["build", str(path), "--run-dir", str(path.parent / "runs")])
    # Preflight names the recipe line before anything runs.
    assert result.exit_code == 2
    assert f"{path}:2: sources.0.path: input not found: nowhere.jsonl" in result.output
    assert "Traceback" not in result.output


def test_rows_made_and_dropped_at_once_are_counted_as_added():
    # A generation stage: two queries made, a failed call's placeholder made and dropped.
    before = Bench.of(pl.DataFrame({"doc_id": ["a"], "text": ["x"]}))
    made = pl.DataFrame({"query_id": ["q1", "q2", "call-3"], "text": ["?", "?", None], "doc_id": ["a"] * 3})
    grown = before.replace(queries=made, qrels=made.select("query_id", "doc_id", pl.lit(1).alias("score")))
    after = grown.drop_queries({"call-3": "llm_call_failed"}, "02_generate_queries")
    record = check_invariants(before, after, STAGE, "02_generate_queries")
    assert (record.queries_in, record.queries_added, record.queries_out, record.queries_dropped) == (0, 3, 2, 1)
    assert record.queries_in + record.queries_added == record.queries_out + record.queries_dropped


def test_a_row_dropped_but_still_present_is_refused():
    before = _bench()
    drops = pl.DataFrame({"stage": ["01_x"], "kind": ["doc"], "id": ["a"], "reason": ["gone"]})
    with pytest.raises(InvariantError, match="dropped and kept"):
        check_invariants(before, before.replace(drops=drops), STAGE, "01_x")
