"""A failed LLM request's cause goes to the drop log's `cause` column; the reason stays
`llm_failed` (also for the queries of a dropped document) so failures count together."""

import polars as pl

from builder.bench import Bench


def _bench() -> Bench:
    corpus = pl.DataFrame({"doc_id": ["d1", "d2"], "text": ["a", "b"]})
    queries = pl.DataFrame({"query_id": ["q1", "q2", "q3"], "text": ["x", "y", "z"], "doc_id": ["d1", "d2", "d2"]})
    return Bench.of(corpus, queries)


def test_the_cause_of_a_failed_request_gets_its_own_column():
    b = _bench().drop_queries(
        {"q2": "llm_failed: HTML page instead of JSON after 3 attempts", "q3": "span_not_found"}, "02_x"
    )
    assert b.drops.select("id", "reason", "cause").rows() == [
        ("q2", "llm_failed", "HTML page instead of JSON after 3 attempts"),
        ("q3", "span_not_found", None),
    ]


def test_the_queries_of_a_document_dropped_for_a_failed_request_keep_its_cause():
    b = _bench().drop_docs({"d1": "llm_failed: invalid UTF-8 in reply"}, "01_x")
    assert b.drops.select("kind", "id", "reason", "cause").rows() == [
        ("doc", "d1", "llm_failed", "invalid UTF-8 in reply"),
        ("query", "q1", "doc_removed:llm_failed", "invalid UTF-8 in reply"),
    ]


def test_a_log_without_failed_requests_has_no_cause_column():
    assert "cause" not in _bench().drop_queries({"q1": "span_not_found"}, "02_x").drops.columns
