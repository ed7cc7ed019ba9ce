"""from_qa: SQuAD-format QA pairs -> corpus of contexts, answerable queries, char buckets."""

from __future__ import annotations

import json
from collections import Counter

import polars as pl
import pytest

from builder.bench import Bench
from builder.io.sources import SourceError
from builder.run.invariants import check_invariants
from builder.stages.from_qa import FromQA
from builder.util.stable import content_id, text_digest
from tests.conftest import FIXTURES
from tests.helpers import make_ctx

TINY = FIXTURES / "qa" / "tiny_squad.json"
TINY_HF = FIXTURES / "qa" / "tiny_squad_hf.jsonl"
SQUAD_DEV = "squad_v2_dev/dev-v2.0.cs224n-dev-half.json"


def _run(tmp_path, path, **params):
    ctx = make_ctx(tmp_path, label="01_from_qa")
    stage = FromQA(FromQA.Params(path=str(path), **params))
    before = Bench.of()
    bench = stage.run(before, ctx)
    check_invariants(before, bench, stage, ctx.label)
    return bench, ctx


def test_tiny_squad_exact(tmp_path):
    bench, ctx = _run(tmp_path, TINY)
    contexts = [p["context"] for a in json.loads(TINY.read_text())["data"] for p in a["paragraphs"]]
    d00, d01, d10 = (content_id(text_digest(c)) for c in contexts[:3])  # named by their text
    assert bench.corpus["doc_id"].to_list() == [d00, d01, d10]  # q8 reuses context 0-0
    assert bench.corpus["n_tokens"].to_list() == [10, 4, 6]  # whitespace words
    q = bench.queries
    assert q["query_id"].to_list() == ["q1", "q2", "q5", "q8"]
    assert q["doc_id"].to_list() == [d00, d00, d10, d00]
    assert q["answer"].to_list() == ["on the mat", "at night", "Paris", "The cat"]
    assert q["char_bucket"].to_list() == ["0-100", "0-100", "100-200", "0-100"]  # 100 counted once
    assert [s[0]["start"] for s in q["spans"].to_list()] == [12, 34, 100, 0]
    assert bench.qrels.rows() == [("q1", d00, 1), ("q2", d00, 1), ("q5", d10, 1), ("q8", d00, 1)]
    drops = dict(zip(bench.drops["id"], bench.drops["reason"]))
    assert drops == {"q6": "answer_offset_mismatch", "q5#dup": "duplicate_id", "q7": "empty_question"}
    assert set(bench.drops["stage"]) == {"01_from_qa"}
    assert ctx.stats["unanswerable_skipped"] == 2  # never queries: counted, not dropped
    assert ctx.stats["contexts_without_queries"] == 1
    assert ctx.stats["queries_per_char_bucket"] == {
        "0-100": 3,
        "100-200": 1,
        "200-300": 0,
        "300-400": 0,
        "400-500": 0,
        "500+": 0,
    }


def test_hf_layout_jsonl_and_parquet_match_squad_json(tmp_path):
    squad, _ = _run(tmp_path, TINY)
    jsonl, _ = _run(tmp_path, TINY_HF)
    rows = [json.loads(line) for line in TINY_HF.read_text().splitlines()]
    parquet_path = tmp_path / "rows.parquet"
    pl.DataFrame(rows).write_parquet(parquet_path)
    parquet, _ = _run(tmp_path, parquet_path)
    for other in (jsonl, parquet):
        assert other.queries.equals(squad.queries)
        assert other.corpus.equals(squad.corpus)
        assert sorted(other.drops["reason"]) == sorted(squad.drops["reason"])


def test_malformed_hf_rows_are_counted_drops(tmp_path):
    path = tmp_path / "rows.jsonl"
    good = TINY_HF.read_text().splitlines()[0]
    path.write_text("\n".join([good, "{broken", "[1]", '{"title": "no id"}']) + "\n")
    bench, _ = _run(tmp_path, path)
    assert bench.queries["query_id"].to_list() == ["q1"]
    assert bench.drops.select("id", "reason").rows() == [
        ("row:1", "malformed_json"),
        ("row:2", "row_not_object"),
        ("row:3", "missing_id"),
    ]


def test_prefix_title_and_custom_buckets(tmp_path):
    bench, _ = _run(tmp_path, TINY, id_prefix="sq-", use_title=True, buckets=[50])
    squad, _ = _run(tmp_path, TINY)
    assert bench.corpus["doc_id"].to_list() == ["sq-" + d for d in squad.corpus["doc_id"]]
    assert bench.corpus["title"].to_list() == ["First article", "First article", "Second article"]
    assert bench.queries["char_bucket"].to_list() == ["0-50", "0-50", "50+", "0-50"]


def test_bad_inputs_are_clear_errors(tmp_path):
    with pytest.raises(SourceError, match="input not found"):
        _run(tmp_path, tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(SourceError, match="could not read QA file"):
        _run(tmp_path, bad)
    with pytest.raises(ValueError, match="strictly increasing"):
        FromQA.Params(path="x", buckets=[200, 100])


def test_shared_squad_dev_half_buckets_and_spans(tmp_path, shared_data):
    bench, ctx = _run(tmp_path, shared_data / SQUAD_DEV)
    assert bench.corpus.height == 646
    assert bench.queries.height == 2910
    assert bench.drops.height == 0
    assert ctx.stats["unanswerable_skipped"] == 3168
    counts = Counter(bench.queries["char_bucket"].to_list())
    assert counts == {"0-100": 615, "100-200": 487, "200-300": 395, "300-400": 366, "400-500": 328, "500+": 719}
    texts = dict(bench.corpus.select("doc_id", "text").iter_rows())
    for doc_id, answer, spans in bench.queries.select("doc_id", "answer", "spans").iter_rows():
        (span,) = spans
        assert texts[doc_id][span["start"] : span["end"]] == answer
