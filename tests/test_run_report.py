"""The end-of-run summary: per-stage table, kept share by position third, skew warnings."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from builder.bench import Bench
from builder.records.stage_record import StageRecord
from builder.run.report import print_run_summary
from builder.run.runner import RunResult


def _stage(label: str, kept: dict | None) -> StageRecord:
    return StageRecord(
        stage=label,
        docs_in=3,
        docs_out=3,
        queries_in=9,
        queries_out=6,
        dropped={"contrast_not_higher:mini": 3},
        figures={"kept_by_third": kept} if kept is not None else {},
    )


def test_summary_shows_kept_by_third_and_warns_on_skew(tmp_path):
    skewed = {
        "beginning": {"in": 3, "kept": 3, "share": 1.0},
        "middle": {"in": 3, "kept": 2, "share": 0.667},
        "end": {"in": 3, "kept": 1, "share": 0.333},
    }
    result = RunResult(
        Bench.of(), Path("out"), tmp_path, [_stage("01_generate_queries", None), _stage("02_span_contrast", skewed)]
    )
    console = Console(record=True, width=400)
    print_run_summary(console, result)
    text = console.export_text()
    # One third a line, so a narrow terminal wraps between thirds.
    for third in ("beginning 3/3 (100%)", "middle 2/3 (67%)", "end 1/3 (33%)"):
        assert third in text
    assert "02_span_contrast kept position thirds unevenly (67 points apart)" in text
    assert "01_generate_queries kept" not in text


def test_summary_prints_stage_warnings_and_large_removals(tmp_path):
    from builder.records.run_warnings import run_warnings

    fn = StageRecord(
        stage="04_false_negatives",
        docs_in=58,
        docs_out=12,
        docs_dropped=46,
        queries_in=158,
        queries_out=34,
        queries_dropped=124,
        warnings=["removed 79% of the documents"],
    )
    sampled = StageRecord(
        stage="01_sample_by_length",
        docs_in=79,
        docs_out=36,
        docs_dropped=43,
        queries_in=0,
        queries_out=0,
        queries_dropped=0,
    )
    generated = StageRecord(
        stage="02_generate_queries",
        docs_in=36,
        docs_out=36,
        queries_in=0,
        queries_added=10,
        queries_out=4,
        queries_dropped=6,
    )
    contrast = StageRecord(
        stage="05_span_contrast",
        docs_in=12,
        docs_out=12,
        docs_dropped=0,
        queries_in=34,
        queries_out=10,
        queries_dropped=24,
    )
    assert run_warnings([sampled, generated, fn, contrast]) == [
        "02_generate_queries removed 60% of the queries it had (6 of 10)",
        "04_false_negatives: removed 79% of the documents",  # its own warning, at its own threshold
        "05_span_contrast removed 71% of the queries it had (24 of 34)",
    ]
    console = Console(record=True, width=400)
    print_run_summary(console, RunResult(Bench.of(), Path("out"), tmp_path, [sampled, generated, fn, contrast]))
    text = console.export_text()
    assert "warning: 05_span_contrast removed 71% of the queries it had (24 of 34)" in text
    assert "0→4 (+10 new)" in text


def test_documents_outside_the_length_buckets_are_warned_of_with_the_top_reason():
    from builder.records.run_warnings import run_warnings

    # The case: 24 of 30 manual pages longer than the last bucket edge.
    outside = StageRecord(
        stage="01_sample_by_length",
        docs_in=30,
        docs_out=6,
        docs_dropped=24,
        queries_in=0,
        queries_out=0,
        queries_dropped=0,
        dropped={"outside_length_buckets": 20, "too_many_words": 4},
    )
    # Left out by choice (more eligible documents than n_docs): no warning.
    chosen = StageRecord(
        stage="01_sample_by_length",
        docs_in=79,
        docs_out=36,
        docs_dropped=43,
        queries_in=0,
        queries_out=0,
        queries_dropped=0,
        dropped={"not_sampled": 43},
    )
    # 40 % of the queries: over the default 30 %, and the commonest reason is named.
    spans = StageRecord(
        stage="03_localize_spans",
        docs_in=6,
        docs_out=6,
        queries_in=10,
        queries_out=6,
        queries_dropped=4,
        dropped={"span_not_found": 3, "empty_quote": 1},
    )
    assert run_warnings([outside, chosen, spans]) == [
        "01_sample_by_length removed 80% of the documents it had (24 of 30); top reason: outside_length_buckets (20)",
        "03_localize_spans removed 40% of the queries it had (4 of 10); top reason: span_not_found (3)",
    ]
    # A recipe's own share (kept in each record by the runner) moves the line.
    lenient = spans.model_copy(update={"figures": {"warn_removed_above": 0.5}})
    assert run_warnings([lenient]) == []


def test_the_recipe_sets_the_warning_share_and_the_runner_records_it(write_recipe, tmp_path):
    import json

    from typer.testing import CliRunner

    from builder.cli import app

    recipe = write_recipe(
        "name: narrow\nwarn_removed_above: 0.2\nsources: [{type: python_docs}]\n"
        "tokenizer: {kind: words}\nstages:\n"
        "  - sample_by_length: {buckets: [0, 300], weights: [1], n_docs: 500}\n"
    )
    result = CliRunner().invoke(
        app,
        ["build", str(recipe), "--out", str(tmp_path / "out"), "--run-dir", str(tmp_path / "runs"), "--allow-empty"],
    )
    assert result.exit_code == 0, result.output
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    (sampled,) = [s for s in stats["stages"] if s["stage"] == "01_sample_by_length"]
    assert sampled["warn_removed_above"] == 0.2
    dropped = sampled["docs_dropped"]
    line = (
        f"01_sample_by_length removed {dropped / 78:.0%} of the documents it had ({dropped} of 78); "
        f"top reason: outside_length_buckets ({dropped})"
    )
    assert line in stats["warnings"]
    assert line in " ".join(result.output.split())
    assert line in (tmp_path / "out" / "README.md").read_text()


def test_a_120_column_summary_breaks_no_word_inside_a_cell(tmp_path):
    kept = {
        "beginning": {"in": 30, "kept": 20, "share": 0.667},
        "middle": {"in": 30, "kept": 15, "share": 0.5},
        "end": {"in": 30, "kept": 10, "share": 0.333},
    }
    fn = StageRecord(
        stage="04_false_negatives",
        docs_in=1580,
        docs_out=1212,
        docs_dropped=368,
        queries_in=1580,
        queries_out=1034,
        queries_dropped=546,
        docs_added=0,
        dropped={"false_negative_confirmed": 500, "span_beyond_window:contrast_b": 46},
        figures={"kept_by_third": kept},
        llm={"calls": 1234, "cache_hits": 56789, "retries": 3},
        seconds=1234.5,
    )
    generated = StageRecord(
        stage="02_generate_queries",
        docs_in=1580,
        docs_out=1580,
        queries_in=0,
        queries_added=4740,
        queries_out=1580,
        queries_dropped=3160,
        dropped={"question_in_other_language": 3000, "duplicate_question": 160},
    )
    console = Console(record=True, width=120)
    print_run_summary(console, RunResult(Bench.of(), Path("out"), tmp_path, [generated, fn]))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 120
    words = {w for line in text.splitlines() for w in line.replace("│", " ").replace("┃", " ").split()}
    for whole in (
        "04_false_negatives",
        "02_generate_queries",
        "false_negative_confirmed",
        "span_beyond_window:contrast_b",
        "question_in_other_language",
        "1580→1212",
        "0→1580",
        "(+4740",
        "beginning",
        "56789",
        "1234.5",
    ):
        assert whole in words, f"{whole} is broken inside its cell:\n{text}"
