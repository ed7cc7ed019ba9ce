"""A damaged built folder given to `diff`, `stats`, `eval` or `push`: one line naming the
file at fault, exit 2, never a traceback, and never a wrong answer (a folder whose
columns were renamed is not "every query removed")."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from builder.cli import app
from builder.publish.beir import write_beir
from tests.publish.conftest import mini_bench, mini_run_stats

runner = CliRunner()
TABLES = ("corpus", "queries", "qrels")


def _damage(path: Path, kind: str) -> None:
    if kind == "truncated":
        path.write_bytes(path.read_bytes()[:200])
    elif kind == "missing":
        path.unlink()
    elif kind == "random bytes":
        path.write_bytes(os.urandom(3000))
    else:  # columns renamed
        frame = pl.read_parquet(path)
        frame.rename({c: f"{c}_v2" for c in frame.columns}).write_parquet(path)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_beir(mini_bench(), tmp_path_factory.mktemp("good") / "mini", stats=mini_run_stats())


def _damaged(built: Path, tmp_path: Path, table: str, kind: str) -> Path:
    folder = tmp_path / "damaged"
    shutil.copytree(built, folder)
    _damage(folder / f"{table}.parquet", kind)
    return folder


KINDS = ("truncated", "missing", "random bytes", "columns renamed")


def _one_line_error(result, table: str) -> None:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert f"{table}.parquet" in lines[0]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("table", TABLES)
def test_diff_names_the_damaged_file(built, tmp_path, table, kind):
    folder = _damaged(built, tmp_path, table, kind)
    result = runner.invoke(app, ["diff", str(built), str(folder)])
    _one_line_error(result, table)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("table", TABLES)
def test_stats_names_the_damaged_file(built, tmp_path, table, kind):
    folder = _damaged(built, tmp_path, table, kind)
    result = runner.invoke(app, ["stats", str(folder)])
    _one_line_error(result, table)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("table", TABLES)
def test_push_names_the_damaged_file(built, tmp_path, table, kind):
    folder = _damaged(built, tmp_path, table, kind)
    result = runner.invoke(app, ["push", str(folder), "--repo", "someone/bench", "--dry-run"])
    _one_line_error(result, table)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("table", TABLES)
def test_eval_names_the_damaged_file(built, tmp_path, table, kind):
    folder = _damaged(built, tmp_path, table, kind)
    result = runner.invoke(app, ["eval", str(folder), "-r", "bm25"])
    _one_line_error(result, table)
    assert not (folder / "eval").exists()


def test_a_renamed_query_column_is_an_error_not_every_query_removed(built, tmp_path):
    folder = _damaged(built, tmp_path, "queries", "columns renamed")
    result = runner.invoke(app, ["diff", str(built), str(folder), "--json"])
    assert result.exit_code == 2
    assert "removed" not in result.output
    assert "query_id" in result.output  # the column it lacks is named
