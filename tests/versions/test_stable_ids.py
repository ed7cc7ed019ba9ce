"""Stable ids: a rebuild over a grown source keeps every surviving query's id and text."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from builder.io.corpus_loader import load_sources
from builder.io.sources import PythonDocsSource
from builder.recipe.model import parse_recipe
from builder.run.runner import Runner, RunOptions
from tests.fixtures.scripted_llm import scripted_llm

RECIPE = """
name: grow
seed: 3
sources: [{type: jsonl, path: "DOCS", fields: {id: null, text: text}, domain: python}]
models:
  gen: {model: scripted, base_url: "BASE", max_concurrency: 4, backoff_initial_s: 0.01,
        backoff_max_s: 0.05, timeout_s: 5.0, max_retries: 8}
stages:
  - sample_by_length: {buckets: [200, 800, 4000], weights: [1, 1], n_docs: 1000}
  - generate_queries: {llm: gen, questions_per_call: 2, calls_per_doc: 2}
  - localize_spans: {llm: gen, questions_per_call: 3}
"""


def python_topics(n: int) -> list[str]:
    """The texts of the first n Python reference topics between 200 and 4000 words."""
    corpus, _ = load_sources([PythonDocsSource(type="python_docs")], None)
    texts = [t for t in corpus["text"] if 200 <= len(t.split()) < 4000]
    return texts[:n]


def write_docs(path: Path, texts: list[str]) -> Path:
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    return path


def build(write_recipe, root: Path, docs: Path, base_url: str) -> Path:
    recipe = write_recipe(RECIPE.replace("DOCS", str(docs)).replace("BASE", base_url), name=f"{root.name}.yaml")
    Runner(parse_recipe(recipe), RunOptions(run_root=root / "runs", out_dir=root / "out")).run()
    return root / "out"


def test_adding_documents_keeps_every_surviving_query_id_and_text(write_recipe, fake_openai, tmp_path):
    srv = fake_openai(responder=scripted_llm)
    texts = python_topics(9)
    old = build(write_recipe, tmp_path / "v1", write_docs(tmp_path / "v1.jsonl", texts[3:8]), srv.base_url)
    # New documents before, between and after the old ones; a separate run folder, so no
    # cache or checkpoint carries anything over.
    grown = [texts[0], *texts[3:5], texts[1], *texts[5:8], texts[2], texts[8]]
    new = build(write_recipe, tmp_path / "v2", write_docs(tmp_path / "v2.jsonl", grown), srv.base_url)
    before = pl.read_parquet(old / "queries.parquet").select("query_id", "doc_id", "text")
    after = pl.read_parquet(new / "queries.parquet").select("query_id", "doc_id", "text")
    old_docs = set(pl.read_parquet(old / "corpus.parquet")["doc_id"])
    assert before.height >= 5 and after.height > before.height
    assert set(pl.read_parquet(new / "corpus.parquet")["doc_id"]) > old_docs
    kept = after.filter(pl.col("doc_id").is_in(list(old_docs)))
    assert sorted(kept.rows()) == sorted(before.rows())
    assert all(qid.startswith(f"{doc}-q") for qid, doc, _ in after.rows())
