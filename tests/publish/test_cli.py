"""`build-bench stats DIR` on a built folder."""

from __future__ import annotations

import json

import typer
from typer.testing import CliRunner

from builder.publish.cli import stats_command
from tests.publish.conftest import mini_run_stats

app = typer.Typer()
app.command()(stats_command)


def test_stats_prints_tables_and_writes_stats_json_and_plots(mini_folder):
    result = CliRunner().invoke(app, [str(mini_folder)], terminal_width=160)
    assert result.exit_code == 0, result.output
    for title in (
        "counts",
        "evidence position",
        "position tags",
        "query types",
        "languages",
        "removed rows by stage and reason",
        "LLM usage",
    ):
        assert title in result.output
    assert "not_sampled" in result.output and "llm_failed" in result.output
    stats = json.loads((mini_folder / "stats.json").read_text())
    assert stats["stages"] == mini_run_stats()["stages"]  # the run records survive a refresh
    assert stats["recipe"] == "mini" and stats["counts"]["queries"] == 5
    assert stats["positions"]["tags"] == {"beginning": 2, "middle": 1, "end": 2}
    assert sorted(p.name for p in (mini_folder / "plots").glob("*.png")) == [
        "length_histogram.png",
        "position_by_length.png",
        "position_histogram.png",
    ]
    assert not (mini_folder / "README.md").exists()  # stats alone leaves the card to the build


def test_stats_on_a_folder_that_is_not_a_build_exits_2(tmp_path):
    result = CliRunner().invoke(app, [str(tmp_path)])
    assert result.exit_code == 2
    assert "not a built benchmark folder" in " ".join(result.output.split())
