"""A `--mock-llm` build ships its answers, marked mock: a mock build `--from` it reuses
them offline (the mock makes no new answer for an unchanged request), and a real build
refuses them in one line. Everything that names the models says the mock answered."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from builder.cli import app

RECIPE = """
name: mock_growth
seed: 5
card: {license: cc-by-4.0}
sources: [{type: python_docs, domain: python}]
models:
  gen: {model: some/model, base_url: "http://127.0.0.1:9/v1", max_concurrency: 2}
stages:
  - sample_by_length: {buckets: [200, 800, 4000], weights: [1, 1], n_docs: 4}
  - generate_queries: {llm: gen, questions_per_call: 2, calls_per_doc: 1}
  - localize_spans: {llm: gen, questions_per_call: 4}
  - llm_relevance: {llm: gen, min_grade: 1}
"""
runner = CliRunner()


@pytest.fixture
def recipe(tmp_path: Path) -> Path:
    path = tmp_path / "recipe.yaml"
    path.write_text(RECIPE, encoding="utf-8")
    return path


def _stage_llm(out: Path) -> dict[str, dict[str, int]]:
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    return {st["stage"]: st.get("llm") or {} for st in stats["stages"]}


def test_a_mock_build_ships_marked_answers_that_a_mock_build_reuses_and_a_real_one_refuses(recipe, tmp_path):
    v1 = tmp_path / "v1-mock"
    made = runner.invoke(app, ["build", str(recipe), "--mock-llm", "--out", str(v1), "--run-dir", str(tmp_path / "r1")])
    assert made.exit_code == 0, made.output
    answers = pl.read_parquet(v1 / "llm_answers.parquet")
    record = json.loads((v1 / "stats.json").read_text(encoding="utf-8"))["llm_answers"]
    assert record["mock"] is True and record["answers"] == answers.height > 0
    first = _stage_llm(v1)
    assert first["02_generate_queries"]["calls"] == 4 and first["02_generate_queries"]["cache_hits"] == 0

    # Elsewhere (a fresh run folder), offline: every answer comes from v1, none is made again.
    v2 = tmp_path / "v2-mock"
    grown = runner.invoke(
        app,
        ["build", str(recipe), "--mock-llm", "--from", str(v1), "--out", str(v2), "--run-dir", str(tmp_path / "r2")],
    )
    assert grown.exit_code == 0, grown.output
    assert f"{answers.height} answers (sha256 checked, made by the mock LLM)" in " ".join(grown.output.split())
    again = _stage_llm(v2)
    for label in ("02_generate_queries", "03_localize_spans"):
        assert again[label]["calls"] == 0
        assert again[label]["cache_hits"] == first[label]["calls"]
    assert (v2 / "queries.jsonl").read_text(encoding="utf-8") == (v1 / "queries.jsonl").read_text(encoding="utf-8")
    # A mock build writes no LLM cache where `build-bench cache` looks.
    assert not (tmp_path / "r1" / "llm_cache.sqlite").exists()

    real = runner.invoke(
        app,
        ["build", str(recipe), "--from", str(v1), "--out", str(tmp_path / "real"), "--run-dir", str(tmp_path / "r3")],
    )
    assert real.exit_code == 2
    said = real.output.strip()
    assert len(said.splitlines()) == 1, said
    assert "built with the mock LLM" in said and "--mock-llm" in said
    assert not (tmp_path / "real").exists()


def test_a_mock_build_is_named_mock_in_inputs_qc_scorers_card_and_cache(recipe, tmp_path):
    out, runs = tmp_path / "out-mock", tmp_path / "runs"
    made = runner.invoke(app, ["build", str(recipe), "--mock-llm", "--out", str(out), "--run-dir", str(runs)])
    assert made.exit_code == 0, made.output
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    named = "build-bench mock LLM (standing in for some/model)"
    assert stats["inputs"]["models"] == {"gen": named}
    assert [(q["stage"], q["model"]) for q in stats["qc_scorers"]] == [("04_llm_relevance", named)]
    card = (out / "README.md").read_text(encoding="utf-8")
    assert f"| `04_llm_relevance` | `gen` | llm | {named} |" in card
    assert f"| model `gen` | `{named}` | name |" in card

    cache = runner.invoke(app, ["cache", str(runs)])
    said = " ".join(cache.output.split())
    assert cache.exit_code == 2
    assert (
        "its builds ran with --mock-llm, and mock builds never write an LLM cache: the mock's answers "
        "stay in their run folders and ship in each output's llm_answers.parquet"
    ) in said
