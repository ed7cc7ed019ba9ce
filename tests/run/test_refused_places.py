"""`validate` refuses the output folders the build refuses (`/`, `.`), naming the recipe
line, and `--from` refuses an empty folder instead of growing from nothing."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from builder.cli import app

runner = CliRunner()
TINY = """name: tiny
seed: 1
output: {dir: 'WHERE'}
sources: [{type: python_docs, domain: python}]
tokenizer: {kind: words}
stages:
  - sample_by_length: {buckets: [0, 4096], weights: [1], n_docs: 4}
  - generate_queries: {mode: extractive, questions_per_call: 2}
  - localize_spans: {}
"""


@pytest.mark.parametrize("where", ["/", "."])
def test_validate_refuses_an_output_dir_the_build_refuses(write_recipe, tmp_path, monkeypatch, where):
    recipe = write_recipe(TINY.replace("WHERE", where))
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["validate", str(recipe)])
    assert result.exit_code == 2, result.output
    assert "recipe.yaml:3: output.dir: output folder" in result.output, result.output
    assert "ok" not in result.output.split()


def test_validate_accepts_a_new_output_dir(write_recipe, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["validate", str(write_recipe(TINY.replace("WHERE", "out/tiny")))])
    assert result.exit_code == 0, result.output


def test_an_empty_folder_is_refused_as_from(write_recipe, tmp_path):
    recipe = write_recipe(TINY.replace("WHERE", str(tmp_path / "x")))
    (tmp_path / "empty").mkdir()
    result = runner.invoke(
        app,
        [
            "build",
            str(recipe),
            "--run-dir",
            str(tmp_path / "runs"),
            "--out",
            str(tmp_path / "new"),
            "--from",
            str(tmp_path / "empty"),
        ],
    )
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "not a built release" in lines[0], result.output
    assert not (tmp_path / "new").exists() and list((tmp_path / "empty").iterdir()) == []
