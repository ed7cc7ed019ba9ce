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
    assert {"spans", "rel_pos", "position_bin", "position_tag", "length_bucket", "pos_char_span"} <= set(
        positions.column_names
    )
    assert sorted(positions["query-id"]) == sorted(bench.queries["query_id"].to_list())
    documents = load(folder, "documents", offline)
    assert set(documents.column_names) == {"corpus-id", *bench.corpus.columns} - {"doc_id", "title", "text"}


def test_language_and_domain_configs_split_without_copying(mini_folder, offline):
    published = publish_outputs(mini_bench(), mini_folder, mini_run_stats(), None)
    assert published.configs == [
        "default",
        "corpus",
        "en-corpus",
        "zh-corpus",
        "law-corpus",
        "web-corpus",
        "queries",
        "en-queries",
        "zh-queries",
        "law-queries",
        "web-queries",
        "qrels",
        "en-qrels",
        "zh-qrels",
        "law-qrels",
        "web-qrels",
        "positions",
        "en-positions",
        "zh-positions",
        "law-positions",
        "web-positions",
        "documents",
        "en-documents",
        "zh-documents",
        "law-documents",
        "web-documents",
        "drops",
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
    assert published.configs == [
        "corpus",
        "en-corpus",
        "zh-corpus",
        "law-corpus",
        "web-corpus",
        "documents",
        "en-documents",
        "zh-documents",
        "law-documents",
        "web-documents",
        "drops",
    ]
    assert load(mini_folder, "corpus", offline).num_rows == 4


def _feature_keys(features) -> set[str]:
    """Every key and dtype used in a card's feature list, nested ones included."""
    found: set[str] = set()
    items = features if isinstance(features, list) else [features]
    for item in items:
        if not isinstance(item, dict):
            continue
        for key, value in item.items():
            found.add(key)
            if key == "dtype" and isinstance(value, str):
                found.add(f"dtype={value}")
            elif isinstance(value, (dict, list)):
                found |= _feature_keys(value)
    return found


def test_card_features_use_only_what_the_oldest_allowed_datasets_reads(quickstart_build):
    """datasets 2.19 (the floor in pyproject.toml) knows `list`, `sequence`, `struct` and
    plain dtypes; `large_list` makes it fail with "'list' object is not a mapping"."""
    import yaml

    card = (quickstart_build["folder"] / "README.md").read_text(encoding="utf-8")
    meta = yaml.safe_load(card[4:].partition("\n---\n")[0])
    used = set().union(*(_feature_keys(info["features"]) for info in meta["dataset_info"]))
    assert "list" in used  # spans and pos_char_span are lists
    assert not {k for k in used if "large" in k}, used
    assert {k for k in used if not k.startswith("dtype=")} <= {"name", "dtype", "list", "sequence", "struct"}
    # ... and it cannot cast a `large_list` column to a list feature either.
    import pyarrow.parquet as pq

    folder = quickstart_build["folder"]
    for config in meta["configs"]:
        for entry in config["data_files"]:
            for path in [entry["path"]] if isinstance(entry["path"], str) else entry["path"]:
                assert "large" not in str(pq.read_schema(folder / path)), path
