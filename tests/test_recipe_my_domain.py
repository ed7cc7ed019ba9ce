"""The `my_domain` template: it validates as shipped, and builds offline end to end
against the local OpenAI-compatible server with only the settings its header says to
change first (corpus, server, tokenizer, the CPU reranker choices)."""

from __future__ import annotations

import polars as pl
from typer.testing import CliRunner

from builder.cli import app
from builder.recipe.model import parse_recipe
from builder.resources import find_recipe
from builder.run.runner import Runner, RunOptions
from tests.conftest import FIXTURES, REPO, require_recipe_extras
from tests.fixtures.scripted_grader import with_grades
from tests.fixtures.scripted_llm import scripted_llm

DOCS = FIXTURES / "my_domain" / "docs.jsonl"


def test_template_validates(monkeypatch):
    require_recipe_extras(REPO / "recipes" / "my_domain.yaml")
    for flag in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(flag, raising=False)
    monkeypatch.setenv("MY_DOCS", str(DOCS))
    result = CliRunner().invoke(app, ["validate", "my_domain"])
    assert result.exit_code == 0, result.output


def test_template_builds_offline_with_the_cpu_choices(fake_openai, tmp_path, monkeypatch):
    monkeypatch.setenv("MY_DOCS", str(DOCS))
    srv = fake_openai(responder=with_grades(scripted_llm))
    monkeypatch.setenv("BUILD_BENCH_BASE_URL", srv.base_url)
    loaded = parse_recipe(find_recipe("my_domain"), [
        "tokenizer={kind: words}",
        "stages.sample_by_length.n_docs=40",
        "rerankers.contrast_a={backend: bm25}",
        "rerankers.contrast_b={backend: llm_judge, llm: judge}",
        "rerankers.recall={backend: bm25}",
    ])
    assert loaded.recipe.sources[0].path == str(DOCS)
    result = Runner(loaded, RunOptions(run_root=tmp_path / "runs", out_dir=tmp_path / "out")).run()
    stages = [s.stage.split("_", 1)[1] for s in result.stage_stats]
    assert stages == ["load", "sample_by_length", "generate_queries", "localize_spans", "span_contrast",
                      "llm_relevance", "false_negatives"]
    # All four documents fall in the first bucket, whose share of 40 is 6.
    assert result.bench.corpus.height == 4
    queries = result.bench.queries
    assert queries.height > 0
    texts = dict(result.bench.corpus.select("doc_id", "text").iter_rows())
    for row in queries.iter_rows(named=True):
        (span,) = row["spans"]
        assert texts[row["doc_id"]][span["start"]:span["end"]].startswith(row["text"].split("«")[1][:-2])
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv", "README.md"):
        assert (tmp_path / "out" / name).exists()
    assert pl.read_parquet(tmp_path / "out" / "drops.parquet").height > 0
