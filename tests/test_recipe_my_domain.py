"""The `my_domain` template: it validates as shipped (with its sample corpus, online and
offline), and builds offline end to end against the local OpenAI-compatible server with
only the settings its header says to change first (corpus, server, tokenizer, rerankers)."""

from __future__ import annotations

import json

import polars as pl
import pytest
from typer.testing import CliRunner

from builder.cli import app
from builder.io.sources import resolve_path
from builder.recipe.model import parse_recipe
from builder.recipe.preflight import preflight
from builder.run.runner import Runner, RunOptions
from builder.util.resources import find_recipe
from tests.conftest import FIXTURES, REPO, require_recipe_extras
from tests.fixtures.scripted_grader import with_grades
from tests.fixtures.scripted_llm import scripted_llm

DOCS = FIXTURES / "my_domain" / "docs.jsonl"
SAMPLE = REPO / "recipes" / "examples" / "articles.jsonl"


@pytest.mark.parametrize("offline", [False, True], ids=["online", "offline"])
def test_template_validates_from_anywhere_without_my_docs(offline, tmp_path, monkeypatch):
    """Unset, MY_DOCS falls back to the sample beside the recipe, found from any working
    directory; offline, the CPU defaults need nothing outside the installed packages."""
    require_recipe_extras(REPO / "recipes" / "my_domain.yaml")
    for flag in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(flag, raising=False)
    if offline:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("MY_DOCS", raising=False)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["validate", "my_domain"])
    assert result.exit_code == 0, result.output
    loaded = parse_recipe(find_recipe("my_domain"))
    assert resolve_path(loaded.recipe.sources[0].path, loaded.base_dir) == SAMPLE
    assert preflight(loaded, network=False) == []


def test_shipped_sample_is_forty_ordinary_english_articles():
    rows = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 40 and len({r["id"] for r in rows}) == 40
    assert all(300 <= len(r["text"].split()) <= 1500 for r in rows)
    assert SAMPLE.stat().st_size < 300_000
    assert "ODC-By 1.0" in (SAMPLE.parent / "PROVENANCE.md").read_text(encoding="utf-8")


def test_template_builds_offline_with_the_cpu_choices(fake_openai, tmp_path, monkeypatch):
    monkeypatch.setenv("MY_DOCS", str(DOCS))
    srv = fake_openai(responder=with_grades(scripted_llm))
    monkeypatch.setenv("BUILD_BENCH_BASE_URL", srv.base_url)
    loaded = parse_recipe(
        find_recipe("my_domain"),
        [
            "tokenizer={kind: words}",
            "stages.sample_by_length.n_docs=40",
            "rerankers.contrast_a={backend: bm25}",
            "rerankers.contrast_b={backend: llm_judge, llm: judge}",
            "rerankers.recall={backend: bm25}",
        ],
    )
    assert loaded.recipe.sources[0].path == str(DOCS)
    result = Runner(loaded, RunOptions(run_root=tmp_path / "runs", out_dir=tmp_path / "out")).run()
    stages = [s.stage.split("_", 1)[1] for s in result.stage_stats]
    assert stages == [
        "load",
        "sample_by_length",
        "generate_queries",
        "localize_spans",
        "span_contrast",
        "llm_relevance",
        "false_negatives",
    ]
    # All four documents fall in the first bucket, whose share of 40 is 6.
    assert result.bench.corpus.height == 4
    queries = result.bench.queries
    assert queries.height > 0
    texts = dict(result.bench.corpus.select("doc_id", "text").iter_rows())
    for row in queries.iter_rows(named=True):
        (span,) = row["spans"]
        assert texts[row["doc_id"]][span["start"] : span["end"]].startswith(row["text"].split("«")[1][:-2])
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv", "README.md"):
        assert (tmp_path / "out" / name).exists()
    assert pl.read_parquet(tmp_path / "out" / "drops.parquet").height > 0
