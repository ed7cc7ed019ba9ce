import json

import polars as pl
import pytest

from builder.io.corpus_loader import load_sources
from builder.io.sources import JsonlSource, ParquetSource, PythonDocsSource, SourceError
from builder.util.stable import content_id, text_digest


def _jsonl(tmp_path, lines):
    path = tmp_path / "docs.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_bad_rows_become_counted_drops(tmp_path):
    path = _jsonl(
        tmp_path,
        [
            json.dumps({"id": "a", "text": "first doc"}),
            json.dumps({"id": "b", "text": ""}),
            json.dumps({"id": "c", "text": 42}),
            json.dumps({"id": "d"}),
            json.dumps({"id": "a", "text": "same id again"}),
            json.dumps({"id": "e", "text": "first doc"}),
            "{not json",
            json.dumps(["a list"]),
            json.dumps({"text": "no id here"}),
            json.dumps({"id": "f", "text": "fine", "title": "T", "lang": "fr"}),
        ],
    )
    spec = JsonlSource(
        type="jsonl", path=str(path), fields={"id": "id", "text": "text", "title": "title", "lang": "lang"}
    )
    corpus, drops = load_sources([spec], None)
    assert corpus.select("doc_id", "title", "lang").rows() == [("a", "", "en"), ("f", "T", "fr")]
    assert drops.rows() == [
        ("b", "empty_text"),
        ("c", "text_not_string"),
        ("d", "missing_text"),
        ("a", "duplicate_id"),
        ("e", "duplicate_text"),
        ("line:7", "malformed_json"),
        ("line:8", "row_not_object"),
        ("line:9", "missing_id"),
    ]


def test_limit_prefix_and_explode(tmp_path):
    path = _jsonl(tmp_path, [json.dumps({"q": "x", "pos": ["p1", "p2"]}), json.dumps({"q": "y", "pos": ["p3"]})])
    spec = JsonlSource(
        type="jsonl", path=str(path), id_prefix="zh-", lang="zh", explode_text=True, fields={"id": None, "text": "pos"}
    )
    corpus, drops = load_sources([spec], None)
    assert corpus["doc_id"].to_list() == ["zh-" + content_id(text_digest(t)) for t in ("p1", "p2", "p3")]
    assert set(corpus["lang"]) == {"zh"}
    corpus, _ = load_sources([spec], None, limit=2)
    assert corpus.height == 2


def test_parquet_and_duplicate_ids_across_sources(tmp_path):
    pl.DataFrame({"id": ["a", "b"], "text": ["one", "two"]}).write_parquet(tmp_path / "d.parquet")
    spec = ParquetSource(type="parquet", path=str(tmp_path / "d.parquet"))
    corpus, drops = load_sources([spec, spec], None)
    assert corpus["doc_id"].to_list() == ["a", "b"]
    assert drops["reason"].to_list() == ["duplicate_id", "duplicate_id"]


def test_python_docs_is_a_real_offline_corpus():
    corpus, drops = load_sources([PythonDocsSource(type="python_docs")], None)
    words = corpus["text"].str.count_matches(r"\S+")
    assert corpus.height >= 70 and words.min() >= 20 and words.max() >= 5000


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(SourceError, match="source file not found: nope.jsonl"):
        load_sources([JsonlSource(type="jsonl", path="nope.jsonl")], tmp_path)


def test_relative_path_falls_back_to_the_recipe_folder(tmp_path, monkeypatch):
    _jsonl(tmp_path, [json.dumps({"id": "a", "text": "x"})])
    monkeypatch.chdir("/")
    corpus, _ = load_sources([JsonlSource(type="jsonl", path="docs.jsonl")], tmp_path)
    assert corpus.height == 1


def test_hf_source_reads_local_data_files(tmp_path):
    from builder.io.sources import HFSource

    path = _jsonl(tmp_path, [json.dumps({"id": str(i), "text": f"doc {i}"}) for i in range(5)])
    spec = HFSource(type="hf", path="json", data_files=str(path), split="train", limit=3)
    corpus, _ = load_sources([spec], None)
    assert corpus["doc_id"].to_list() == ["0", "1", "2"]


def test_unreachable_hub_dataset_says_what_to_do(monkeypatch):
    import datasets.config
    import huggingface_hub.constants

    from builder.io.sources import HFSource

    # Both libraries read the offline switch at import time, so set their constants too.
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(SourceError, match="Offline, point the source at local files"):
        load_sources([HFSource(type="hf", path="nobody/no-such-dataset-xyz")], None)


def test_parquet_is_read_in_batches_with_the_values_of_a_whole_file_read(tmp_path):
    from builder.io.sources import _PARQUET_BATCH, iter_rows

    n = _PARQUET_BATCH * 2 + 5  # three batches, the last one short
    frame = pl.DataFrame(
        {
            "id": [f"p{i}" for i in range(n)],
            "text": [None if i % 7 == 0 else f"text {i}" for i in range(n)],
            "tags": [[i, i + 1] for i in range(n)],
        }
    )
    frame.write_parquet(tmp_path / "d.parquet", row_group_size=700)
    spec = ParquetSource(type="parquet", path=str(tmp_path / "d.parquet"))
    rows = list(iter_rows(spec, None))
    assert rows == [(f"row:{i}", row) for i, row in enumerate(frame.iter_rows(named=True))]


def test_duplicate_text_is_found_across_sources_without_keeping_texts(tmp_path):
    from builder.io.corpus_loader import Doc, Dropped, iter_documents

    a = _jsonl(tmp_path, [json.dumps({"id": "a", "text": "same words"})])
    b = tmp_path / "b.jsonl"
    b.write_text(json.dumps({"id": "b", "text": "same words"}) + "\n" + json.dumps({"id": "c", "text": "other"}) + "\n")
    items = list(iter_documents([JsonlSource(type="jsonl", path=str(a)), JsonlSource(type="jsonl", path=str(b))], None))
    assert items == [
        Doc("a", "", "same words", "en", "general"),
        Dropped("b", "duplicate_text"),
        Doc("c", "", "other", "en", "general"),
    ]


def test_a_source_without_ids_names_each_text_by_its_hash_whatever_comes_before(tmp_path):
    spec = JsonlSource(type="jsonl", path="d.jsonl", fields={"id": None})
    (tmp_path / "d.jsonl").write_text('{"text": "alpha"}\n{"text": ""}\n{"text": "beta"}\n')
    first, drops = load_sources([spec], tmp_path)
    assert first["doc_id"].to_list() == ["b52f7e54cd313e69", "3fbcb3213a60fe28"]
    assert drops.rows() == [("line:2", "empty_text")]
    (tmp_path / "d.jsonl").write_text('{"text": "new"}\n{"text": "alpha"}\n{"text": "beta"}\n')
    grown, _ = load_sources([spec], tmp_path)
    assert grown["doc_id"].to_list()[1:] == first["doc_id"].to_list()
