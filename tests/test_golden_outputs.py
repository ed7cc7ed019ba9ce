"""Golden outputs: every shipped LLM-free recipe, and an LLM recipe against the local
test server, write byte-identical files to the manifests in tests/fixtures/golden/.

A change that alters output on purpose regenerates them with
`UPDATE_GOLDEN=1 python -m pytest tests/test_golden_outputs.py` and says why in its commit.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from builder.recipe.model import parse_recipe
from builder.run.runner import Runner, RunOptions
from tests.conftest import REPO, SHARED_INPUTS
from tests.fixtures.scripted_llm import scripted_llm
from tests.golden import manifest, read_manifest, write_manifest

UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"

LLM_RECIPE = """
name: golden_llm
seed: 3
sources: [{type: python_docs, domain: python}]
models:
  gen: {model: scripted, base_url: "BASE", max_concurrency: 2, backoff_initial_s: 0.01,
        backoff_max_s: 0.05, timeout_s: 5.0, max_retries: 8}
stages:
  - sample_by_length: {buckets: [200, 800, 4000], weights: [1, 1], n_docs: 12}
  - summarize: {llm: gen}
  - generate_queries: {llm: gen, questions_per_call: 2, calls_per_doc: 2}
  - localize_spans: {llm: gen, questions_per_call: 3}
"""


def _check(name: str, out_dir: Path, base_url: str | None = None) -> None:
    files = manifest(out_dir, base_url)
    if UPDATE:
        write_manifest(name, files)
    expected = read_manifest(name)
    changed = sorted(k for k in expected.keys() | files.keys() if expected.get(k) != files.get(k))
    assert not changed, f"{name}: output differs from the golden manifest in {changed}"


def _build(recipe: Path, tmp_path: Path, overrides: list[str] | None = None) -> Path:
    result = Runner(
        parse_recipe(recipe, overrides), RunOptions(run_root=tmp_path / "runs", out_dir=tmp_path / "out")
    ).run()
    return result.out_dir


def test_quickstart_output_is_golden(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    _check("quickstart", _build(REPO / "recipes" / "quickstart.yaml", tmp_path))


def test_quickstart_matched_output_is_golden(tmp_path, monkeypatch):
    """The quickstart with its thirds matched on confounds: the trimming is seeded, so the
    same queries go every time."""
    monkeypatch.chdir(REPO)
    _check("quickstart_matched", _build(REPO / "recipes" / "quickstart_matched.yaml", tmp_path))


def test_depth_grid_output_is_golden(tmp_path, monkeypatch):
    """The grid over the quickstart's evidence, offline and without extras; 6 of its 40
    questions and 4 of its 100 distractors per cell keep it to seconds (and MBs rather than 300)."""
    monkeypatch.chdir(REPO)
    _check(
        "depth_grid",
        _build(
            REPO / "recipes" / "depth_grid.yaml",
            tmp_path,
            ["stages.depth_grid.max_queries=6", "stages.depth_grid.distractors=4"],
        ),
    )


@pytest.mark.parametrize(
    "recipe", ["squad_posq", "msmarco_farrelevant", "msmarco_farrelevant_shuffled", "colder_probes"]
)
def test_shared_data_recipe_output_is_golden(recipe, tmp_path, shared_data, minilm_tokenizer, monkeypatch):
    monkeypatch.chdir(REPO)
    _check(recipe, _build(REPO / "recipes" / f"{recipe}.yaml", tmp_path, SHARED_INPUTS[recipe]))


def test_llm_recipe_output_is_golden(tmp_path, write_recipe, fake_openai):
    srv = fake_openai(responder=scripted_llm)
    out = _build(write_recipe(LLM_RECIPE.replace("BASE", srv.base_url)), tmp_path)
    _check("llm_scripted", out, srv.base_url)
