"""Hostile source files through a real build: counted drops in the load stage, or one line."""

from __future__ import annotations

import json

import polars as pl
import pytest
from typer.testing import CliRunner

from builder.cli import app

runner = CliRunner()
STAGES = """stages:
  - sample_by_length: {buckets: [0, 256, 512, 1024, 2048, 4096], weights: [3, 2, 2, 2, 1], n_docs: 8}
  - generate_queries: {mode: extractive, questions_per_call: 3}
  - localize_spans: {positions: {length_edges: [256, 512, 1024]}}
"""


@pytest.fixture
def wide(monkeypatch):
    from builder import cli

    # Rich wraps at the terminal width; a wide one shows whether the message itself is one line.
    monkeypatch.setattr(cli.err, "width", 1000)


def _build(recipe):
    out, runs = recipe.parent / "out", recipe.parent / "runs"
    return runner.invoke(app, ["build", str(recipe), "--out", str(out), "--run-dir", str(runs), "--limit", "20"])


def test_load_stage_counts_every_hostile_row_by_reason(tmp_path, write_recipe):
    (tmp_path / "docs.jsonl").write_bytes(
        b"".join(
            [
                b"\xef\xbb\xbf"
                + json.dumps({"id": "bom", "text": "first line after a byte order mark"}).encode()
                + b"\n",
                b'{"id": "latin1", "text": "caf\xe9"}\n',
                b'{"id": "surrogate", "text": "lone \\ud800"}\n',
                json.dumps({"id": "tab\tid", "text": "tab"}).encode() + b"\n",
                json.dumps({"id": ["list"], "text": "list"}).encode() + b"\n",
                b"\n{broken\n",
            ]
        )
    )
    recipe = write_recipe(
        "name: hostile\nsources:\n  - {type: python_docs}\n"
        "  - {type: jsonl, path: docs.jsonl, id_prefix: 'j:'}\ntokenizer: {kind: words}\n" + STAGES
    )
    result = _build(recipe)
    assert result.exit_code == 0, result.output
    load = json.loads(next((tmp_path / "runs").rglob("00_load/stats.json")).read_text())
    assert load["dropped"] == {"invalid_utf8": 1, "invalid_unicode": 1, "bad_id": 2, "malformed_json": 1}
    assert (load["docs_in"], load["docs_out"]) == (26, 21)  # 20 python docs, the BOM row, 5 drops
    drops = pl.read_parquet(tmp_path / "out" / "drops.parquet").filter(pl.col("stage") == "00_load")
    assert sorted(drops.select("id", "reason").rows()) == [
        ("j:line:2", "invalid_utf8"),
        ("j:line:4", "bad_id"),
        ("j:line:5", "bad_id"),
        ("j:line:7", "malformed_json"),
        ("j:surrogate", "invalid_unicode"),
    ]


def test_a_corrupt_parquet_source_is_one_line_naming_the_file(tmp_path, write_recipe, wide):
    (tmp_path / "docs.parquet").write_bytes(b"PAR1 definitely not a parquet file")
    recipe = write_recipe("name: corrupt\nsources: [{type: parquet, path: docs.parquet}]\n" + STAGES)
    result = _build(recipe)
    assert result.exit_code == 1
    (line,) = [x for x in result.output.splitlines() if x.startswith("error:")]
    assert "docs.parquet" in line
    assert "Traceback" not in result.output


def test_unmapped_parquet_columns_name_the_mapping(tmp_path, write_recipe, wide):
    pl.DataFrame({"doc": ["a"], "body": ["one two three"]}).write_parquet(tmp_path / "docs.parquet")
    recipe = write_recipe("name: unmapped\nsources: [{type: parquet, path: docs.parquet}]\n" + STAGES)
    result = _build(recipe)
    assert result.exit_code == 1
    (line,) = [x for x in result.output.splitlines() if x.startswith("error:")]
    assert "docs.parquet" in line and "field mapping: id → 'id', text → 'text'" in line
    assert "columns found: 'body', 'doc'" in line
    assert "Traceback" not in result.output
