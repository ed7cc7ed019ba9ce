"""Hostile source files: bad bytes, BOMs, lone surrogates, broken parquet, wrong columns, bad ids."""

import json

import polars as pl
import pytest

from builder.io.corpus_loader import load_sources
from builder.io.sources import JsonlSource, ParquetSource, SourceError


def _jsonl_bytes(tmp_path, data: bytes, **fields):
    path = tmp_path / "docs.jsonl"
    path.write_bytes(data)
    return JsonlSource(type="jsonl", path=str(path), fields={"id": "id", "text": "text", **fields})


def _row(**kw) -> bytes:
    return json.dumps(kw).encode() + b"\n"


def test_a_row_with_bytes_that_are_not_utf8_is_dropped_and_the_rest_kept(tmp_path):
    spec = _jsonl_bytes(
        tmp_path, _row(id="a", text="fine") + b'{"id": "b", "text": "caf\xe9"}\n' + _row(id="c", text="also fine")
    )
    corpus, drops = load_sources([spec], None)
    assert corpus["doc_id"].to_list() == ["a", "c"]
    assert drops.rows() == [("line:2", "invalid_utf8")]
    assert not any("\ufffd" in t for t in corpus["text"])


def test_a_utf8_byte_order_mark_is_accepted(tmp_path):
    spec = _jsonl_bytes(tmp_path, b"\xef\xbb\xbf" + _row(id="a", text="first") + _row(id="b", text="second"))
    corpus, drops = load_sources([spec], None)
    assert corpus["doc_id"].to_list() == ["a", "b"]
    assert drops.is_empty()


def test_a_lone_surrogate_in_any_mapped_field_is_a_drop(tmp_path):
    spec = _jsonl_bytes(
        tmp_path,
        b"".join(
            [
                b'{"id": "a", "text": "x \\ud800 y"}\n',
                b'{"id": "b", "text": "fine", "title": "\\udfff"}\n',
                b'{"id": "c\\ud800", "text": "fine too"}\n',
                b'{"id": "d", "text": "paired \\ud83d\\ude00 is fine"}\n',
            ]
        ),
        title="title",
    )
    corpus, drops = load_sources([spec], None)
    assert corpus["text"].to_list() == ["paired \U0001f600 is fine"]
    assert drops.rows() == [("a", "invalid_unicode"), ("b", "invalid_unicode"), ("line:3", "invalid_unicode")]


def test_drop_ids_of_bad_lines_are_physical_line_numbers(tmp_path):
    spec = _jsonl_bytes(
        tmp_path, b"\n" + _row(id="a", text="x") + b"\n   \n{oops\n" + b'"str"\r\n' + _row(text="no id")
    )
    corpus, drops = load_sources([spec], None)
    assert corpus["doc_id"].to_list() == ["a"]
    assert drops.rows() == [("line:5", "malformed_json"), ("line:6", "row_not_object"), ("line:7", "missing_id")]


@pytest.mark.parametrize("bad", ["a\tb", "a\rb", "a\nb", "tail\n", ["a"], {"k": "v"}])
def test_ids_that_break_beir_files_are_dropped_as_bad_id(tmp_path, bad):
    spec = _jsonl_bytes(tmp_path, _row(id=bad, text="bad id") + _row(id=7, text="int ids are fine"))
    corpus, drops = load_sources([spec], None)
    assert corpus["doc_id"].to_list() == ["7"]
    assert drops.rows() == [("line:1", "bad_id")]


def test_parquet_list_struct_and_tab_ids_are_bad_ids(tmp_path):
    pl.DataFrame({"id": [["a"], ["b", "c"]], "text": ["one", "two"]}).write_parquet(tmp_path / "l.parquet")
    pl.DataFrame({"id": [{"k": "a"}], "text": ["three"]}).write_parquet(tmp_path / "s.parquet")
    pl.DataFrame({"id": ["x\ty", "z"], "text": ["four", "five"]}).write_parquet(tmp_path / "t.parquet")
    specs = [
        ParquetSource(type="parquet", path=str(tmp_path / n), id_prefix=n[0] + ":")
        for n in ("l.parquet", "s.parquet", "t.parquet")
    ]
    corpus, drops = load_sources(specs, None)
    assert corpus["doc_id"].to_list() == ["t:z"]
    assert drops.rows() == [("l:row:0", "bad_id"), ("l:row:1", "bad_id"), ("s:row:0", "bad_id"), ("t:row:0", "bad_id")]


def test_a_corrupt_parquet_is_a_one_line_error_naming_the_file(tmp_path):
    (tmp_path / "broken.parquet").write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(SourceError) as info:
        load_sources([ParquetSource(type="parquet", path=str(tmp_path / "broken.parquet"))], None)
    message = str(info.value)
    assert "broken.parquet" in message and "\n" not in message


def test_parquet_without_the_mapped_columns_names_mapping_and_columns(tmp_path):
    pl.DataFrame({"doc": ["a"], "body": ["one"]}).write_parquet(tmp_path / "d.parquet")
    spec = ParquetSource(type="parquet", path=str(tmp_path / "d.parquet"))
    with pytest.raises(SourceError) as info:
        load_sources([spec], None)
    message = str(info.value)
    assert "d.parquet" in message and "\n" not in message
    assert "id → 'id'" in message and "text → 'text'" in message
    assert "columns found: 'body', 'doc'" in message


def test_a_mapped_title_that_no_row_has_is_an_error(tmp_path):
    spec = _jsonl_bytes(tmp_path, _row(id="a", text="one"), title="headline")
    with pytest.raises(SourceError, match=r"no row has title → 'headline'"):
        load_sources([spec], None)


def test_jsonl_where_no_row_has_a_mapped_field_is_an_error(tmp_path):
    spec = _jsonl_bytes(tmp_path, _row(key="a", text="one") + b"{bad\n" + _row(key="b", text="two", extra=1))
    with pytest.raises(SourceError, match=r"no row has id → 'id'.*columns found: 'extra', 'key', 'text'"):
        load_sources([spec], None)


def test_a_field_missing_from_some_jsonl_rows_only_is_a_drop_not_an_error(tmp_path):
    spec = _jsonl_bytes(tmp_path, _row(id="a", text="one", title="T") + _row(text="two"), title="title")
    corpus, drops = load_sources([spec], None)
    assert corpus["title"].to_list() == ["T"]
    assert drops.rows() == [("line:2", "missing_id")]


def test_hf_rows_go_through_the_same_id_checks(tmp_path):
    from builder.io.sources import HFSource

    path = tmp_path / "hf.jsonl"
    path.write_bytes(_row(id="a\tb", text="one") + _row(id="c", text="two") + _row(id="d\ne", text="three"))
    corpus, drops = load_sources([HFSource(type="hf", path="json", data_files=str(path))], None)
    assert corpus["doc_id"].to_list() == ["c"]
    assert drops.rows() == [("row:0", "bad_id"), ("row:2", "bad_id")]


@pytest.mark.parametrize("streaming", [False, True])
def test_hf_file_that_is_not_utf8_is_a_one_line_error(tmp_path, streaming):
    from builder.io.sources import HFSource

    path = tmp_path / "hf.jsonl"
    path.write_bytes(_row(id="a", text="one") + b'{"id": "b", "text": "caf\xe9"}\n')
    spec = HFSource(type="hf", path="json", data_files=str(path), streaming=streaming)
    with pytest.raises(SourceError) as info:
        load_sources([spec], None)
    assert "'json'" in str(info.value) and "\n" not in str(info.value)
