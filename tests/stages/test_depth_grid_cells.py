"""The depth grid's cells as whole retrieval tasks, on a hand-made bench of several queries:
no query's evidence (or a passage answering it) in another document of its cell,
distractors at the cell's length, short pools filled or dropped with a reason, and
depths kept within the recipe's tolerance."""

from __future__ import annotations

import math

import polars as pl
import pytest

from builder.bench import SPAN_DTYPE, Bench
from builder.stages.grid.cells import cell_name
from builder.stages.grid.depth_grid import DepthGrid, GridParams
from builder.stages.grid.judges import BM25Judge
from builder.stages.grid.padding import passages_of
from tests.grid_cells import leaks
from tests.helpers import make_ctx

FALCON = "The falcon nests on the cliff above the bay."
OTTER = "The otter swims in the cold river at dawn."
DOCS = {
    "d1": f"Alpha words open this. {FALCON} Beta words close this.\n\nGamma words trail here.",
    "d2": f"{OTTER}\n\nDelta words sit here.",
    # A retelling of q1's evidence: q1's own walk leaves it out, no other query's may take it.
    "d3": "Hikers said the falcon nests on the cliff above the bay, every spring.\n\nEpsilon words lie here.",
    # A passage that answers q2 by BM25 without repeating its evidence.
    "d4": "An otter swims a river.\n\nZeta words stay here.",
    **{
        f"f{k}": f"Calm words {k} one. Calm words {k} two.\n\nSoft words {k} three. Soft words {k} four."
        for k in range(8)
    },
}
QUERIES = {
    "q1": ("falcon nests cliff?", "d1", "falcon nests on the cliff"),
    "q2": ("otter swims river?", "d2", "otter swims in the cold river"),
}


def cells_bench(docs: dict[str, str] = DOCS) -> Bench:
    corpus = pl.DataFrame({"doc_id": list(docs), "text": list(docs.values()), "lang": "en", "domain": "wild"})
    spans = []
    for _, doc, span in QUERIES.values():
        start = docs[doc].index(span)
        spans.append([{"start": start, "end": start + len(span), "method": "exact", "score": 100.0}])
    queries = pl.DataFrame(
        {
            "query_id": list(QUERIES),
            "text": [t for t, _, _ in QUERIES.values()],
            "doc_id": [d for _, d, _ in QUERIES.values()],
            "lang": "en",
            "spans": pl.Series(spans, dtype=SPAN_DTYPE),
        }
    )
    qrels = queries.select("query_id", "doc_id", pl.lit(1).alias("score"))
    return Bench.of(corpus=corpus, queries=queries, qrels=qrels)


def _pool_judge(bench: Bench, params: GridParams) -> BM25Judge:
    """The recipe's BM25 judge, fitted as the stage fits it: on every passage of the pool's corpus."""
    passages = [x.text for d, t in bench.corpus.select("doc_id", "text").iter_rows() for x in passages_of(d, t)]
    return BM25Judge(passages, params.max_score_ratio, params.rank_margin)


def _grid(tmp_path, bench: Bench | None = None, **params) -> tuple[Bench, dict, GridParams]:
    bench = bench or cells_bench()
    p = GridParams(
        **{
            "depths": [0, 0.5, 1],
            "lengths": [24, 40],
            "distractors": 0,
            "max_depth_error": 1.0,
            "length_tolerance": 0.2,
            **params,
        }
    )
    ctx = make_ctx(tmp_path, label="02_depth_grid")
    return DepthGrid(p).run(bench, ctx), ctx.stats["grid"], p


def test_no_document_of_a_cell_holds_or_answers_another_querys_evidence(tmp_path):
    bench = cells_bench()
    out, grid, p = _grid(tmp_path, bench)
    assert sorted(out.queries["source_query_id"].unique().to_list()) == ["q1", "q2"]
    assert leaks(out.corpus, out.queries, _pool_judge(bench, p), p.near_duplicate_ratio) == []
    # Neither query's source document pads anything, and the retelling and the answering
    # passage are left out once each, by reason.
    assert not any("Alpha" in t or "Delta" in t for t in out.corpus["text"])
    assert grid["padding_excluded"] == {"answers_query:bm25_score": 1, "near_duplicate_of_evidence": 1}
    assert grid["padding_pool"] == {"from": "the bench's documents", "documents": 10}


def test_the_cell_check_finds_a_planted_leak(tmp_path):
    out, _, p = _grid(tmp_path)
    doc = out.queries.filter(pl.col("query_id") == f"q2@{cell_name(0, 24)}")["doc_id"][0]
    planted = out.corpus.with_columns(
        pl.when(pl.col("doc_id") == doc).then(pl.col("text") + "\n\n" + FALCON).otherwise(pl.col("text")).alias("text")
    )
    found = leaks(planted, out.queries, None, p.near_duplicate_ratio)
    assert found == [f"{cell_name(0, 24)}: q1@{cell_name(0, 24)} in {doc}: holds the evidence or span"]


def test_each_cell_carries_its_distractors_at_the_cells_length(tmp_path):
    bench = cells_bench()
    out, grid, p = _grid(tmp_path, bench, distractors=3)
    for length in p.lengths:
        for depth in p.depths:
            cell = out.corpus.filter(pl.col("setting") == cell_name(depth, length))
            distractors = cell.filter(pl.col("source_doc_id").is_null())
            assert distractors.height == 3 and cell.height == 5
            assert (distractors["n_tokens"] == length).all()
        # The same distractors at every depth of a length: only the evidence moves.
        texts = out.corpus.filter((pl.col("grid_length") == length) & pl.col("source_doc_id").is_null())
        assert texts.group_by("grid_depth").agg(pl.col("text").sort())["text"].n_unique() == 1
    assert not set(out.qrels["doc_id"]) & set(out.corpus.filter(pl.col("source_doc_id").is_null())["doc_id"])
    assert leaks(out.corpus, out.queries, _pool_judge(bench, p), p.near_duplicate_ratio) == []
    assert grid["distractors"] == {"asked": 3, "per_length": {"24": 3, "40": 3}, "short": {}}
    # Five documents, one relevant: chance nDCG@10 is the mean over ranks 1-5 of 1/log2(r+1).
    ndcg = sum(1 / math.log2(r + 1) for r in range(1, 6)) / 5
    assert grid["chance"]["24"] == {"documents": 5, "ndcg@10": pytest.approx(ndcg, abs=1e-4), "recall@100": 1.0}


def test_distractors_repeating_another_word_for_word_are_counted(tmp_path):
    # Three pool documents of two 4-word sentences: a 16-word distractor is two of them in
    # a row, six ways at most.
    docs = {"d1": DOCS["d1"], "d2": DOCS["d2"], **{f"f{k}": DOCS[f"f{k}"].split("\n\n")[0] for k in range(3)}}
    out, grid, _ = _grid(tmp_path, cells_bench(docs), distractors=12, lengths=[16], depths=[0])
    distractors = out.corpus.filter(pl.col("source_doc_id").is_null())
    assert 1 < distractors.height <= 6
    assert distractors["text"].n_unique() == distractors.height == grid["distractors"]["per_length"]["16"]
    assert grid["distractors"]["short"] == {"duplicate_text": 12 - distractors.height}


def test_distractors_the_pool_cannot_fill_are_counted(tmp_path):
    # The pool's clean padding is 34 four-word sentences (136 words): enough for the queries'
    # 135 words beside their evidence at 144, not for a distractor's 137 or more.
    out, grid, _ = _grid(tmp_path, distractors=2, lengths=[41, 144], length_tolerance=0.05)
    assert out.queries.height == 12
    assert grid["distractors"] == {"asked": 2, "per_length": {"41": 2, "144": 0}, "short": {"padding_exhausted": 2}}


def test_a_pool_of_short_documents_fills_cells_or_drops_them_with_a_reason(tmp_path):
    # Every padding document shorter than the padding needed: cells take several of them,
    # skipping a sentence too long for what is left, or the query goes with its reason.
    short = {
        "d1": DOCS["d1"],
        "d2": DOCS["d2"],
        **{f"s{k}": f"Tiny note {k}." for k in range(12)},
        "table": " ".join(f"cell{k}" for k in range(30)),
    }
    bench = cells_bench(short)
    out, grid, p = _grid(tmp_path, bench, lengths=[20])
    assert out.queries.height == 6
    assert out.corpus["n_tokens"].min() >= 16 and out.corpus["n_tokens"].max() <= 20
    assert not any("cell1" in t for t in out.corpus["text"])
    out, grid, p = _grid(tmp_path, bench, lengths=[20, 100])
    assert out.queries.is_empty()
    assert sorted(out.drops.select("id", "reason").rows()) == [("q1", "padding_exhausted"), ("q2", "padding_exhausted")]


def test_a_depth_farther_than_the_tolerance_drops_the_query(tmp_path):
    # One 30-word "sentence" (a table flattened) pads q1: depth 0.5 can only be 0 or 1.
    docs = {"d1": DOCS["d1"], "d2": DOCS["d2"], "table": " ".join(f"row{k}" for k in range(30))}
    bench = cells_bench(docs)
    out, grid, _ = _grid(tmp_path, bench, lengths=[40], depths=[0, 0.5, 1], max_depth_error=0.1)
    assert out.queries.is_empty()
    assert sorted(out.drops.select("id", "reason").rows()) == [
        ("q1", "depth_beyond_tolerance"),
        ("q2", "depth_beyond_tolerance"),
    ]
    out, grid, _ = _grid(tmp_path, bench, lengths=[40], depths=[0, 0.5, 1], max_depth_error=0.5)
    assert out.queries.height == 6 and grid["largest_depth_gap"] == 0.5


def test_a_pool_of_only_the_queries_sources_is_a_parameter_error(tmp_path):
    from builder.stages.base import StageParamError

    with pytest.raises(StageParamError) as caught:
        _grid(tmp_path, cells_bench({"d1": DOCS["d1"], "d2": DOCS["d2"]}))
    assert caught.value.param == "padding"
    assert str(caught.value).startswith(
        "the padding corpus (the bench's documents) leaves nothing to pad with: "
        "each of its 2 documents is a query's source"
    )


def test_two_questions_on_one_sentence_keep_the_first(tmp_path):
    # q3 asks about q1's sentence: in a cell, q1's document would hold q3's evidence too.
    bench = cells_bench()
    start = DOCS["d1"].index("cliff above the bay")
    span = [{"start": start, "end": start + len("cliff above the bay"), "method": "exact", "score": 100.0}]
    extra = pl.DataFrame(
        {
            "query_id": ["q3"],
            "text": ["where does the falcon nest?"],
            "doc_id": ["d1"],
            "lang": ["en"],
            "spans": pl.Series([span], dtype=SPAN_DTYPE),
        }
    )
    bench = Bench.of(
        corpus=bench.corpus,
        queries=pl.concat([bench.queries, extra]),
        qrels=pl.concat([bench.qrels, extra.select("query_id", "doc_id", pl.lit(1, dtype=pl.Int64).alias("score"))]),
    )
    out, _, p = _grid(tmp_path, bench)
    assert sorted(out.queries["source_query_id"].unique().to_list()) == ["q1", "q2"]
    assert out.drops.select("id", "reason").rows() == [("q3", "evidence_shared_with_another_query")]
    assert leaks(out.corpus, out.queries, _pool_judge(bench, p), p.near_duplicate_ratio) == []
