"""A full disk under --out or --run-dir ends a build with one line naming the folder and
the space left, never a traceback. A real 64 KiB tmpfs is used where this process may
mount one (root); the unit tests below cover each way a writer reports a full disk."""

from __future__ import annotations

import errno
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from builder.cli import app
from builder.run.disk_full import disk_full

runner = CliRunner()
TINY = """name: tiny
seed: 1
sources: [{type: python_docs, domain: python}]
tokenizer: {kind: words}
stages:
  - sample_by_length: {buckets: [0, 4096], weights: [1], n_docs: 4}
  - generate_queries: {mode: extractive, questions_per_call: 2}
  - localize_spans: {}
"""


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    place = tmp_path / "tiny_disk"
    place.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(place)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a 64 KiB tmpfs here (needs root): {mounted.stderr.strip()[:120]}")
    try:
        yield place
    finally:
        subprocess.run(["umount", str(place)], check=False)


def _one_line(result) -> str:
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.output
    return lines[0]


@pytest.mark.parametrize("option", ["--out", "--run-dir"])
def test_a_full_disk_is_one_line_naming_the_folder(write_recipe, tmp_path, tiny_disk, option):
    recipe = write_recipe(TINY)
    folders = {"--out": tmp_path / "out", "--run-dir": tmp_path / "runs"}
    folders[option] = tiny_disk / option.strip("-")
    result = runner.invoke(
        app, ["build", str(recipe), "--out", str(folders["--out"]), "--run-dir", str(folders["--run-dir"])]
    )
    line = _one_line(result)
    assert f"no space left for {option} {folders[option]}" in line
    assert "free on its file system" in line


def _named(exc: BaseException, tmp_path: Path) -> str:
    full = disk_full(exc, {"--out": tmp_path / "out", "--run-dir": tmp_path / "runs"})
    assert full is not None
    return str(full)


def test_each_way_a_writer_says_the_disk_is_full_is_recognised(tmp_path):
    in_runs = OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "runs" / "x" / "a.parquet"))
    assert f"--run-dir {tmp_path / 'runs'}" in _named(in_runs, tmp_path)
    polars_says = pl.exceptions.ComputeError("parquet: underlying IO error: No space left on device (os error 28)")
    assert "no space left for" in _named(polars_says, tmp_path)
    try:
        try:
            raise sqlite3.OperationalError("database or disk is full")
        except sqlite3.OperationalError as error:
            raise RuntimeError("could not write LLM answers to the cache") from error
    except RuntimeError as cache_says:
        assert "no space left for" in _named(cache_says, tmp_path)
    assert disk_full(OSError(errno.EACCES, "Permission denied"), {"--out": tmp_path}) is None
    assert disk_full(ValueError("bad value"), {"--out": tmp_path}) is None
