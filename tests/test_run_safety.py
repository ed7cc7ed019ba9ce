"""A build never destroys what it did not write: output folder checks, locks, left-overs,
and two builds started at the same moment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from builder.cli import app
from builder.run.locks import FileLock, out_lock_path
from tests.conftest import REPO

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


def _build(recipe: Path, out: Path | str, *extra: str):
    runs = recipe.parent / "runs"
    return runner.invoke(app, ["build", str(recipe), "--run-dir", str(runs), "--out", str(out), *extra])


@pytest.fixture
def recipe(write_recipe) -> Path:
    return write_recipe(TINY)


def test_a_foreign_non_empty_folder_is_refused_before_any_work(recipe, tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    result = _build(recipe, mine)
    assert result.exit_code == 2, result.output
    assert "did not write" in result.output and "--overwrite" in result.output
    assert (mine / "thesis.tex").read_text() == "years of work"
    assert not (tmp_path / "runs" / "tiny").exists() or not any((tmp_path / "runs").rglob("*.parquet"))
    forced = _build(recipe, mine, "--overwrite")
    assert forced.exit_code == 0, forced.output
    assert not (mine / "thesis.tex").exists() and (mine / "corpus.jsonl").exists()


def test_an_empty_folder_and_an_earlier_output_are_replaced(recipe, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    assert _build(recipe, out).exit_code == 0
    assert (out / ".build-bench").is_file()
    (out / "stale.txt").write_text("from an earlier build")
    again = _build(recipe, out)
    assert again.exit_code == 0, again.output
    assert not (out / "stale.txt").exists()


@pytest.mark.parametrize("where", ["file", ".", "/", "cwd_parent", "run_root"])
def test_paths_the_swap_would_destroy_are_refused_up_front(recipe, tmp_path, monkeypatch, where):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    (tmp_path / "a_file").write_text("keep")
    out = {
        "file": tmp_path / "a_file",
        ".": Path("."),
        "/": Path("/"),
        "cwd_parent": tmp_path,
        "run_root": tmp_path / "runs",
    }[where]
    if where == "run_root":
        (tmp_path / "runs").mkdir()
    result = _build(recipe, out)
    assert result.exit_code == 2, result.output
    assert "error:" in result.output and "Traceback" not in result.output
    assert (tmp_path / "a_file").read_text() == "keep"
    assert not any(tmp_path.rglob("*.parquet"))


@pytest.mark.parametrize("mock", [False, True], ids=["real", "mock"])
@pytest.mark.parametrize("where", ["/", "."])
def test_a_recipe_output_dir_the_swap_would_destroy_is_refused_in_one_line(
    write_recipe, tmp_path, monkeypatch, where, mock
):
    recipe = write_recipe(TINY.replace("seed: 1\n", f"seed: 1\noutput: {{dir: '{where}'}}\n"))
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(
        app, ["build", str(recipe), "--run-dir", str(tmp_path / "runs"), *(["--mock-llm"] if mock else [])]
    )
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: output folder"), result.output
    assert not any(tmp_path.rglob("*.parquet"))


def test_a_held_lock_names_its_holder(recipe, tmp_path):
    out = tmp_path / "out"
    lock = FileLock(out_lock_path(out), "output folder")
    lock.acquire(wait=False)
    try:
        result = _build(recipe, out)
    finally:
        lock.release()
    assert result.exit_code == 2, result.output
    assert f"process {os.getpid()}" in result.output and "--wait" in result.output
    assert _build(recipe, out).exit_code == 0


def test_left_overs_of_a_killed_run_are_cleaned_and_a_lost_output_restored(recipe, tmp_path):
    out = tmp_path / "out"
    assert _build(recipe, out).exit_code == 0
    # A kill between the two renames of the output swap: only the hidden old copy is left.
    os.replace(out, tmp_path / ".out.old-4242")
    (tmp_path / ".out.tmp-4242-abcd").mkdir()
    run_dir = next((tmp_path / "runs" / "tiny").iterdir())
    (run_dir / ".01_sample_by_length.tmp-4242-beef").mkdir()
    result = _build(recipe, out)
    assert result.exit_code == 0, result.output
    assert "restored out" in result.output
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".out")) == [".out.lock"]
    assert not list(run_dir.glob(".*.tmp-*"))
    assert (out / "corpus.jsonl").exists()


def _spawn(recipe: Path, root: Path) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-c",
        "from builder.cli import main; main()",
        str(recipe),
        "--run-dir",
        str(root / "runs"),
        "--out",
        str(root / "out"),
    ]
    return subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}
    )


def test_two_builds_at_once_give_one_whole_output_or_a_clean_refusal(recipe, tmp_path):
    assert _build(recipe, tmp_path / "clean").exit_code == 0
    expected = sorted(p.relative_to(tmp_path / "clean").as_posix() for p in (tmp_path / "clean").rglob("*"))
    for attempt in range(3):  # each process pays a cold start; three rounds keep this test fast
        root = tmp_path / f"race{attempt}"
        pair = [_spawn(recipe, root), _spawn(recipe, root)]
        codes = []
        for proc in pair:
            _, err = proc.communicate(timeout=120)
            codes.append(proc.returncode)
            assert "Traceback" not in err, err
            if proc.returncode == 2:
                assert "in use by process" in err
        assert sorted(codes) in ([0, 0], [0, 2]), codes
        got = sorted(p.relative_to(root / "out").as_posix() for p in (root / "out").rglob("*"))
        assert got == expected
