"""End to end: recipes/colder_probes.yaml through the real runner (20 facts per setting)."""

from __future__ import annotations

import polars as pl

from builder.io.built_folder import read_beir
from builder.recipe.model import parse_recipe
from builder.run.runner import Runner, RunOptions
from tests.conftest import REPO

SMALL = [
    "stages.position_probes.queries_per_setting=20",
    "stages.position_probes.path=../shared/data/redocred/dev_revised.json",
]


def test_colder_probes_recipe_builds(tmp_path, shared_data, minilm_tokenizer, monkeypatch):
    monkeypatch.chdir(REPO)
    loaded = parse_recipe(REPO / "recipes" / "colder_probes.yaml", SMALL)
    result = Runner(loaded, RunOptions(run_root=tmp_path / "runs", out_dir=tmp_path / "out")).run()
    bench = read_beir(result.out_dir)
    per_setting = bench.queries.group_by("setting").len()
    assert dict(per_setting.iter_rows()) == {
        s: 20 for s in ("position_i", "first_vs_last", "brevity", "repetition", "answer_importance", "foil")
    }
    assert bench.corpus["setting"].null_count() == 0
    assert set(bench.qrels["doc_id"]) == set(bench.corpus["doc_id"])  # every probe document is judged
    _no_identical_documents(result.out_dir)
    pairs = pl.read_parquet(result.run_dir / "work" / "01_position_probes" / "pairs.parquet")
    assert pairs.height == bench.queries["pairs"].list.len().sum()
    assert set(pairs["doc_a"]) | set(pairs["doc_b"]) == set(bench.corpus["doc_id"])
    out_pairs = pl.read_parquet(result.out_dir / "pairs.parquet")
    assert out_pairs.sort("query_id", "doc_a").equals(pairs.select(out_pairs.columns).sort("query_id", "doc_a"))
    for setting in per_setting["setting"]:
        folder = result.out_dir / "settings" / setting
        qrels = pl.read_csv(folder / "qrels" / "test.tsv", separator="\t")
        assert qrels.height == bench.qrels.filter(pl.col("query_id").str.starts_with(f"{setting}-")).height
        corpus = pl.read_ndjson(folder / "corpus.jsonl")
        assert set(corpus["_id"]) == set(qrels["corpus-id"])
        _no_identical_documents(folder)


def _no_identical_documents(folder):
    """An identical copy of a query's document, unjudged for it, would be a false negative."""
    corpus = pl.read_ndjson(folder / "corpus.jsonl")
    assert corpus["text"].n_unique() == corpus.height, folder
