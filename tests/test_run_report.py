"""The end-of-run summary: per-stage table, kept share by position third, skew warnings."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from builder.bench import Bench
from builder.run.report import print_run_summary
from builder.run.runner import RunResult
from builder.run.stage_record import StageRecord


def _stage(label: str, kept: dict | None) -> StageRecord:
    return StageRecord(stage=label, docs_in=3, docs_out=3, queries_in=9, queries_out=6,
                       dropped={"contrast_not_higher:mini": 3},
                       figures={"kept_by_third": kept} if kept is not None else {})


def test_summary_shows_kept_by_third_and_warns_on_skew(tmp_path):
    skewed = {"beginning": {"in": 3, "kept": 3, "share": 1.0}, "middle": {"in": 3, "kept": 2, "share": 0.667},
              "end": {"in": 3, "kept": 1, "share": 0.333}}
    result = RunResult(Bench.of(), Path("out"), tmp_path, [_stage("01_generate_queries", None),
                                                           _stage("02_span_contrast", skewed)])
    console = Console(record=True, width=400)
    print_run_summary(console, result)
    text = console.export_text()
    assert "beginning 3/3 (100%) · middle 2/3 (67%) · end 1/3 (33%)" in text
    assert "02_span_contrast kept position thirds unevenly (67 points apart)" in text
    assert "01_generate_queries kept" not in text
