"""Offline, or with no network, every message says what to do: URL inputs as Hub inputs
do, a missing tokenizer by downloading only its tokenizer files, and `validate` says
which models it left unchecked instead of a bare `ok`. No test here reaches the network:
the Hub endpoint is a closed local port, or offline mode is on."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from builder.backends.tokenizers import HFCounter, TokenizerLoadError
from builder.cli import app
from builder.io.remote import fetch_input
from builder.io.sources import SourceError
from builder.recipe.preflight import model_problem

CLOSED = "http://127.0.0.1:9"  # nothing listens there: a refused connection, at once
REPO_ID = "someorg/not-downloaded-model-xyz"
TOKENIZER_FILES = (
    f"hf download {REPO_ID} --include 'tokenizer*' 'vocab*' 'merges.txt' '*.model' 'special_tokens_map.json'"
)


def test_an_unreachable_url_input_says_what_to_do(monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", CLOSED)
    with pytest.raises(SourceError) as caught:
        fetch_input(f"{CLOSED}/docs.jsonl", None)
    said = str(caught.value)
    assert said.startswith(f"could not download {CLOSED}/docs.jsonl")
    assert said.endswith("; download it on a machine with network, or point the recipe at a local copy")
    assert "\n" not in said


def test_a_missing_tokenizer_is_downloaded_alone(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    said = model_problem(REPO_ID, "tokenizer", network=False)
    assert said is not None and TOKENIZER_FILES in said
    assert f"hf download {REPO_ID})" in model_problem(REPO_ID, "reranker 'a'", network=False)
    with pytest.raises(TokenizerLoadError) as caught:
        HFCounter(REPO_ID)
    assert TOKENIZER_FILES in str(caught.value)


RECIPE = f"""
name: hub_models
sources: [{{type: python_docs}}]
tokenizer: {{kind: hf, name: {REPO_ID}}}
rerankers:
  judge_a: {{backend: cross_encoder, model: someorg/not-downloaded-reranker-xyz}}
stages:
  - sample_by_length: {{buckets: [0, 1000], weights: [1], n_docs: 2}}
"""


def test_validate_says_which_models_it_left_for_plan(tmp_path, monkeypatch):
    for flag in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):  # CI sets them
        monkeypatch.delenv(flag, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", CLOSED)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE, encoding="utf-8")
    result = CliRunner().invoke(app, ["validate", str(recipe)])
    said = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    assert f"ok {recipe} (1 stages; its form and local inputs)" in said
    assert (
        "note: `build-bench plan` and `build-bench build` need the network for what validate could not "
        f"check offline: tokenizer {REPO_ID}, reranker 'judge_a' someorg/not-downloaded-reranker-xyz (not "
        "in the Hugging Face cache)"
    ) in said


URL_RECIPE = f"""
name: url_input
sources: []
stages:
  - from_beir: {{path: "{CLOSED}/data.zip#scifact", split: test, license: cc-by-4.0}}
  - far_relevant: {{min_start: 512, max_length: 1431}}
  - position_metadata: {{}}
"""


def test_plan_stops_on_a_url_input_it_cannot_reach(tmp_path, monkeypatch):
    for flag in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(flag, raising=False)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(URL_RECIPE, encoding="utf-8")
    result = CliRunner().invoke(app, ["plan", str(recipe)])
    said = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert f"could not reach {CLOSED}/data.zip" in said
    assert said.endswith("; download it on a machine with network, or point the recipe at a local copy")
    assert "docs in" not in said  # no table of zeros
    checked = CliRunner().invoke(app, ["validate", str(recipe)])
    said = " ".join(checked.output.split())
    assert checked.exit_code == 0, checked.output
    assert (
        "note: `build-bench plan` and `build-bench build` need the network for what validate could not "
        f"check offline: input {CLOSED}/data.zip#scifact (not downloaded yet)"
    ) in said
