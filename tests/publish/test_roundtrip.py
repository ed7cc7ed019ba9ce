"""`datasets.load_dataset(DIR, config)` reads a published folder through its card."""

from __future__ import annotations

import datasets
import pytest

from builder.publish.outputs import publish_outputs
from tests.publish.conftest import mini_bench, mini_run_stats


@pytest.fixture
def offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    return str(tmp_path / "datasets_cache")


def load(folder, config, cache):
    return datasets.load_dataset(str(folder), config, split="test", cache_dir=cache)


def test_quickstart_build_loads_as_corpus_queries_and_qrels(quickstart_build, offline):
    folder, bench = quickstart_build["folder"], quickstart_build["bench"]
    corpus = load(folder, "corpus", offline)
    queries = load(folder, "queries", offline)
    qrels = load(folder, "qrels", offline)
    assert sorted(corpus["_id"]) == sorted(bench.corpus["doc_id"].to_list())
    # Exactly the columns MTEB's retrieval loader reads: an extra one breaks its batching.
    assert corpus.column_names == ["_id", "title", "text"]
    assert sorted(queries["_id"]) == sorted(bench.queries["query_id"].to_list())
    assert queries.column_names == ["_id", "text"]
    assert qrels.column_names == ["query-id", "corpus-id", "score"]
    assert qrels.num_rows == bench.qrels.height


def test_position_fields_move_to_the_positions_config(quickstart_build, offline):
    folder, bench = quickstart_build["folder"], quickstart_build["bench"]
    positions = load(folder, "positions", offline)
    assert positions.column_names[0] == "query-id"
    assert set(positions.column_names) == {"query-id", *bench.queries.columns} - {"query_id", "text"}
    assert {"spans", "rel_pos", "position_bin", "position_tag", "length_bucket", "pos_char_span"} \
        <= set(positions.column_names)
    assert sorted(positions["query-id"]) == sorted(bench.queries["query_id"].to_list())
    documents = load(folder, "documents", offline)
    assert set(documents.column_names) == {"corpus-id", *bench.corpus.columns} - {"doc_id", "title", "text"}


def test_language_and_domain_configs_split_without_copying(mini_folder, offline):
    published = publish_outputs(mini_bench(), mini_folder, mini_run_stats(), None)
    assert published.configs == [
        "default", "corpus", "en-corpus", "zh-corpus", "law-corpus", "web-corpus",
        "queries", "en-queries", "zh-queries", "law-queries", "web-queries",
        "qrels", "en-qrels", "zh-qrels", "law-qrels", "web-qrels",
        "positions", "en-positions", "zh-positions", "law-positions", "web-positions",
        "documents", "en-documents", "zh-documents", "law-documents", "web-documents",
    ]
    assert sorted(load(mini_folder, "zh-corpus", offline)["_id"]) == ["d3", "d4"]
    assert load(mini_folder, "law-queries", offline)["_id"] == ["q2"]
    assert sorted(load(mini_folder, "en-qrels", offline)["query-id"]) == ["q1", "q2", "q3"]
    assert load(mini_folder, "default", offline).num_rows == 5
    assert load(mini_folder, "web-queries", offline).num_rows == 4


def test_a_bench_without_queries_has_only_a_corpus_config(mini_folder, offline):
    bench = mini_bench()
    bench = bench.drop_queries({q: "test" for q in bench.queries["query_id"]}, "99_test")
    published = publish_outputs(bench, mini_folder, mini_run_stats(), None)
    assert published.configs == ["corpus", "en-corpus", "zh-corpus", "law-corpus", "web-corpus",
                                 "documents", "en-documents", "zh-documents", "law-documents", "web-documents"]
    assert load(mini_folder, "corpus", offline).num_rows == 4
