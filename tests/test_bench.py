import polars as pl
import pytest

from builder.bench import Bench


def _bench() -> Bench:
    corpus = pl.DataFrame({"doc_id": ["d1", "d2", "d3"], "text": ["a", "b", "c"]})
    queries = pl.DataFrame({"query_id": ["q1", "q2", "q3"], "text": ["x", "y", "z"], "doc_id": ["d1", "d1", "d2"]})
    qrels = pl.DataFrame(
        {"query_id": ["q1", "q2", "q3", "q3"], "doc_id": ["d1", "d1", "d2", "d3"], "score": [1, 1, 1, 1]}
    )
    return Bench.of(corpus, queries, qrels)


def test_dropping_a_document_cascades_to_its_queries_and_qrels():
    b = _bench().drop_docs({"d1": "too_short"}, "01_x")
    assert b.corpus["doc_id"].to_list() == ["d2", "d3"]
    assert b.queries["query_id"].to_list() == ["q3"]
    assert b.qrels.rows() == [("q3", "d2", 1), ("q3", "d3", 1)]
    assert b.drops.rows() == [
        ("01_x", "doc", "d1", "too_short"),
        ("01_x", "query", "q1", "doc_removed:too_short"),
        ("01_x", "query", "q2", "doc_removed:too_short"),
    ]


def test_a_query_that_loses_every_qrel_is_dropped_with_a_reason():
    b = _bench().drop_docs({"d3": "dup"}, "s")
    assert b.queries.height == 3 and b.qrels.height == 3
    b = b.drop_docs({"d2": "dup"}, "s")
    assert "q3" not in b.queries["query_id"].to_list()
    assert ("s", "query", "q3", "doc_removed:dup") in b.drops.rows()


def test_keep_queries_is_row_aligned_and_drops_qrels():
    b = _bench().keep_queries(pl.Series([None, "bad", None]), "s")
    assert b.queries["query_id"].to_list() == ["q1", "q3"]
    assert set(b.qrels["query_id"]) == {"q1", "q3"}
    assert b.drops.rows() == [("s", "query", "q2", "bad")]


def test_unknown_ids_are_ignored():
    assert _bench().drop_docs({"nope": "x"}, "s").drops.is_empty()


def test_save_and_load_round_trip(tmp_path):
    b = _bench().drop_docs({"d1": "x"}, "s")
    b.save(tmp_path / "cp")
    again = Bench.load(tmp_path / "cp")
    for name in ("corpus", "queries", "qrels", "drops"):
        assert getattr(again, name).equals(getattr(b, name))
    b.save(tmp_path / "cp")  # overwriting an existing checkpoint works
    assert [p.name for p in tmp_path.iterdir()] == ["cp"]


def test_schema_is_enforced():
    b = Bench.of(pl.DataFrame({"doc_id": ["a"], "text": ["t"]}))
    assert b.corpus.columns[:6] == ["doc_id", "title", "text", "lang", "domain", "n_tokens"]
    # A list id cannot be cast to the schema's string type.
    with pytest.raises(pl.exceptions.InvalidOperationError):
        Bench.of(pl.DataFrame({"doc_id": [[1]], "text": ["t"]}))
