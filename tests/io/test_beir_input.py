"""The BEIR input reader refuses ids and bytes that would corrupt what it feeds downstream."""

import json

from builder.io.beir_input import read_beir_input


def _row(**kw) -> bytes:
    return json.dumps(kw).encode() + b"\n"


def _folder(tmp_path):
    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.jsonl").write_bytes(
        b"".join(
            [
                b"\xef\xbb\xbf" + _row(_id="d1", text="alpha"),
                _row(_id="d\tx", text="tab in id"),
                _row(_id=["d3"], text="list id"),
                b'{"_id": "d4", "text": "caf\xe9"}\n',
                b'{"_id": "d5", "text": "lone \\ud800 surrogate"}\n',
                b'{"_id": "d6", "title": "\\udfff", "text": "bad title"}\n',
                _row(_id="d7", text="beta"),
            ]
        )
    )
    (tmp_path / "queries.jsonl").write_bytes(
        b"".join(
            [
                _row(_id="q1", text="first"),
                _row(_id={"k": 1}, text="dict id"),
                _row(_id="q\r3", text="carriage return in id"),
                _row(_id="q4", text="fourth"),
            ]
        )
    )
    (tmp_path / "qrels" / "test.tsv").write_bytes(
        b"".join(
            [
                b"query-id\tcorpus-id\tscore\r\n",
                b"q1\td1\t1\r\n",
                b"q4\td7\t1\n",
                b"q4\td7\t1\textra\n",
                b"q1\td\rx\t1\n",
                b"\td1\t1\n",
                b"q4\tcaf\xe9\t1\n",
            ]
        )
    )
    return tmp_path


def test_bad_ids_bytes_and_surrogates_are_rejected_with_reasons(tmp_path):
    loaded = read_beir_input(_folder(tmp_path), "test", "", None)
    assert loaded.corpus["doc_id"].to_list() == ["d1", "d7"]
    assert loaded.queries.select("query_id", "doc_id").rows() == [("q1", "d1"), ("q4", "d7")]
    assert loaded.qrels.rows() == [("q1", "d1", 1), ("q4", "d7", 1)]
    assert loaded.rejected == [
        ("doc", "corpus.jsonl:2", "bad_id"),
        ("doc", "corpus.jsonl:3", "bad_id"),
        ("doc", "corpus.jsonl:4", "invalid_utf8"),
        ("doc", "d5", "invalid_unicode"),
        ("doc", "d6", "invalid_unicode"),
        ("query", "queries.jsonl:2", "bad_id"),
        ("query", "queries.jsonl:3", "bad_id"),
    ]
    assert loaded.stats == {
        "qrels_malformed": 1,
        "qrels_bad_id": 1,
        "qrels_missing_id": 1,
        "qrels_invalid_utf8": 1,
        "qrels_unknown_query": 0,
    }
