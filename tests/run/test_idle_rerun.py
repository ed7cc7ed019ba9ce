"""A rerun with nothing to do: it reads no table, leaves a current output folder untouched
and imports no heavy library (polars included); any change still rewrites."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from builder.bench import Bench
from builder.cli import app
from tests.fixtures.scripted_llm import scripted_llm

runner = CliRunner()
TINY = """name: tiny
description: first words
seed: 1
sources: [{type: jsonl, path: docs.jsonl}]
tokenizer: {kind: words}
stages:
  - sample_by_length: {buckets: [0, 4096], weights: [1], n_docs: 3}
  - generate_queries: {mode: extractive, questions_per_call: 2}
  - localize_spans: {}
"""
LLM = """name: tiny_llm
seed: 1
sources: [{type: python_docs}]
models:
  gen: {model: scripted, base_url: "BASE"}
stages:
  - sample_by_length: {buckets: [0, 100000], weights: [1], n_docs: 2}
  - generate_queries: {llm: gen, questions_per_call: 1}
  - localize_spans: {llm: gen}
"""
HEAVY = (
    "polars",
    "pyarrow",
    "openai",
    "datasets",
    "pandas",
    "matplotlib",
    "torch",
    "sentence_transformers",
    "scipy",
    "asyncio",
    "numpy",
    "rapidfuzz",
)


@pytest.fixture
def recipe(write_recipe) -> Path:
    path = write_recipe(TINY)
    words = ["river", "castle", "engine", "garden", "market", "violin", "harbor", "forest", "signal"]
    lines = []
    for i in range(4):
        text = " ".join(f"The {words[(i + k) % 9]} number {k} was noted in chapter {i}{k}." for k in range(12))
        lines.append(json.dumps({"id": f"d{i}", "text": text}))
    (path.parent / "docs.jsonl").write_text("\n".join(lines) + "\n")
    return path


def _build(recipe: Path) -> str:
    root = recipe.parent
    result = runner.invoke(app, ["build", str(recipe), "--run-dir", str(root / "runs"), "--out", str(root / "out")])
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def _state(folder: Path) -> dict[str, tuple[int, int]]:
    """(inode, mtime) of the folder and of everything in it."""
    return {str(p.relative_to(folder)): (p.stat().st_ino, p.stat().st_mtime_ns) for p in [folder, *folder.rglob("*")]}


def test_a_current_output_is_not_rewritten(recipe: Path) -> None:
    _build(recipe)
    out = recipe.parent / "out"
    before = _state(out)
    text = _build(recipe)
    assert "already holds this output" in text and "nothing written" in text
    assert "qrels already in" in text
    assert _state(out) == before


def test_a_changed_recipe_or_an_edited_output_file_is_written_again(recipe: Path) -> None:
    _build(recipe)
    out = recipe.parent / "out"
    recipe.write_text(TINY.replace("first words", "second words"))
    first = _state(out)
    text = _build(recipe)
    assert "nothing written" not in text
    assert "unchanged, loaded from checkpoint" in text  # the stages were reused; only the output changed
    assert _state(out)["."] != first["."]
    assert "second words" in (out / "README.md").read_text()

    (out / "queries.jsonl").write_text("")
    assert "nothing written" not in _build(recipe)
    assert (out / "queries.jsonl").read_text()


def test_a_rerun_reads_the_tables_it_needs_and_no_other(recipe: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _build(recipe)
    read: list[str] = []
    load = Bench.load.__func__  # type: ignore[attr-defined]

    def spy(cls: type[Bench], folder: Path) -> Bench:
        read.append(Path(folder).name)
        return load(cls, folder)

    monkeypatch.setattr(Bench, "load", classmethod(spy))
    _build(recipe)
    assert read == []  # the output is current: nothing to write, so no table to read

    recipe.write_text(TINY.replace("first words", "other words"))
    _build(recipe)
    assert read == ["03_localize_spans"]  # the card changes: the last stage's tables are written again

    read.clear()

    read.clear()
    recipe.write_text(TINY.replace("localize_spans: {}", "localize_spans: {fuzzy_min_score: 95}"))
    _build(recipe)
    assert read == ["02_generate_queries"]


def _imported_by_a_rerun(recipe: Path) -> str:
    """The heavy libraries a fresh `build` process imports."""
    root = recipe.parent
    code = (
        "import sys\nfrom builder.cli import main\n"
        f"try:\n    main(['build', {str(recipe)!r}, '--run-dir', {str(root / 'runs')!r}, "
        f"'--out', {str(root / 'out')!r}])\n"
        "except SystemExit as exit:\n    assert not exit.code, exit.code\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2]), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=root, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_an_idle_rerun_imports_no_heavy_library(recipe: Path) -> None:
    _build(recipe)
    assert _imported_by_a_rerun(recipe) == "[]"


def test_an_idle_rerun_of_an_llm_build_loads_no_client(write_recipe, fake_openai) -> None:
    # A build starts loading its LLM client on a thread as soon as a stage has to run;
    # a rerun with every stage done must not.
    srv = fake_openai(responder=scripted_llm)
    recipe = write_recipe(LLM.replace("BASE", srv.base_url))
    _build(recipe)
    assert srv.request_count > 0
    assert _imported_by_a_rerun(recipe) == "[]"


def test_last_tables_that_do_not_parse_are_moved_aside_and_recomputed(recipe: Path) -> None:
    _build(recipe)
    out = recipe.parent / "out"
    clean = (out / "queries.jsonl").read_bytes()
    stage = next((recipe.parent / "runs" / "tiny").iterdir()) / "03_localize_spans"
    (stage / "queries.parquet").write_bytes(b"not parquet")
    stamp = json.loads((stage / "checkpoint.json").read_text())
    stamp["files"]["queries.parquet"] = hashlib.sha256(b"not parquet").hexdigest()  # the stamp agrees
    (stage / "checkpoint.json").write_text(json.dumps(stamp))
    text = _build(recipe)
    assert "03_localize_spans: checkpoint damaged" in text
    assert (stage.parent / "03_localize_spans.damaged").is_dir()
    assert (out / "queries.jsonl").read_bytes() == clean
