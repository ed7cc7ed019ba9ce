"""`--limit` is part of what was run: stats.json, the card's Inputs table (which says how
many rows of the pinned file were read) and `diff` all record it."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from builder.cli import app
from tests.conftest import FIXTURES

ARTICLES = FIXTURES / "my_domain" / "short_articles.jsonl"  # 40 rows
RECIPE = f"""
name: limited
seed: 2
card: {{license: cc-by-4.0}}
sources: [{{type: jsonl, path: "{ARTICLES}", lang: en, domain: web}}]
tokenizer: {{kind: words}}
stages:
  - sample_by_length: {{buckets: [0, 1000], weights: [1], n_docs: 100}}
  - generate_queries: {{mode: extractive, questions_per_call: 3}}
  - localize_spans: {{}}
"""
runner = CliRunner()


def _build(recipe: Path, out: Path, *args: str) -> None:
    done = runner.invoke(app, ["build", str(recipe), "--out", str(out), "--run-dir", str(out.parent / "runs"), *args])
    assert done.exit_code == 0, done.output


def test_limit_is_in_stats_the_card_and_the_diff(tmp_path: Path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE, encoding="utf-8")
    cut, whole = tmp_path / "cut", tmp_path / "whole"
    _build(recipe, cut, "--limit", "30")
    _build(recipe, whole)

    stats = json.loads((cut / "stats.json").read_text(encoding="utf-8"))
    assert stats["limit"] == 30
    assert stats["inputs"]["limit"] == 30
    assert stats["inputs"]["sources"][0]["rows_read"] == 30
    whole_stats = json.loads((whole / "stats.json").read_text(encoding="utf-8"))
    assert "limit" not in whole_stats and "limit" not in whole_stats["inputs"]
    assert "rows_read" not in whole_stats["inputs"]["sources"][0]

    card = (cut / "README.md").read_text(encoding="utf-8")
    assert "read its first 30 of 40 rows (`--limit 30`)" in card
    assert "`--limit 30`: each source was read only up to its first 30 rows" in card
    assert "--limit" not in (whole / "README.md").read_text(encoding="utf-8")

    diffed = runner.invoke(app, ["diff", str(cut), str(whole), "--json"])
    assert diffed.exit_code == 0, diffed.output
    changes = {c["input"]: (c["old"], c["new"]) for c in json.loads(diffed.output)["inputs"]}
    assert changes["limit"] == (30, None)
    said = runner.invoke(app, ["diff", str(cut), str(whole)]).output
    assert "input limit: 30 → None" in said
