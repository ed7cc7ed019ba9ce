"""Judges of the grid's padding on tiny inputs: BM25 by score share or rank margin, the
recipe's reranker and the LLM judge, each exclusion counted by its reason."""

from __future__ import annotations

import polars as pl
import pytest
from pydantic import ValidationError

from builder.backends.llm import LLMCache, OpenAIBackend, OpenAIModelConfig
from builder.backends.rerankers import BiEncoderConfig, missing_extra
from builder.bench import Bench
from builder.stages.grid.depth_grid import DepthGrid, GridParams
from builder.stages.grid.judges import Ask, BM25Judge
from tests.fixtures.scripted_grader import with_grades
from tests.stages.qc_factories import ShortWindow, qc_ctx
from tests.stages.test_depth_grid import EVIDENCE, tiny_bench

QUERY = "zebra moon"
PASSAGES = (
    "red apples grow",
    "a zebra ran far away from home today",
    "the moon rose",
    "zebra and moon",
    "green pears fall",
)
# BM25 for "zebra moon": "zebra and moon" 0.69 > the evidence 0.52 > "the moon rose" 0.34 >
# "a zebra ran far away from home today" 0.19 > the fruit 0.
BM25_EVIDENCE = "the zebra sleeps under the moon"


def _bm25(score_ratio: float | None, rank_margin: int | None) -> list[str | None]:
    judge = BM25Judge(PASSAGES + (BM25_EVIDENCE,), score_ratio, rank_margin)
    (verdicts,) = judge.judge([Ask(QUERY, BM25_EVIDENCE, PASSAGES)])
    return verdicts


RANK = "answers_query:bm25_rank"


@pytest.mark.parametrize(
    "margin, expected",
    [
        (0, [None, None, None, RANK, None]),  # only the passage above the evidence
        (1, [None, None, RANK, RANK, None]),  # and the one just below it
        (2, [None, RANK, RANK, RANK, None]),
        (5, [None, RANK, RANK, RANK, None]),  # never a passage sharing no word with the query
    ],
)
def test_bm25_rank_margin_leaves_out_passages_at_or_just_below_the_evidence(margin, expected):
    assert _bm25(None, margin) == expected


def test_bm25_score_share_is_checked_before_the_rank():
    score = "answers_query:bm25_score"
    assert _bm25(0.5, None) == [None, None, score, score, None]
    assert _bm25(0.5, 2) == [None, RANK, score, score, None]


def _run(params: GridParams, ctx, only: str | None = None):
    bench = tiny_bench()
    if only:
        bench = Bench.of(
            corpus=bench.corpus,
            queries=bench.queries.filter(pl.col("query_id") == only),
            qrels=bench.qrels.filter(pl.col("query_id") == only),
        )
    return DepthGrid(params).run(bench, ctx)


def test_the_grid_counts_rank_margin_exclusions(tmp_path):
    ctx = qc_ctx(tmp_path)
    ctx.label, ctx.index = "02_depth_grid", 2
    out = _run(GridParams(distractors=0, depths=[0, 1], lengths=[12, 24], max_score_ratio=None, rank_margin=0), ctx)
    assert out.queries.height == 4
    assert ctx.stats["grid"]["padding_excluded"] == {"answers_query:bm25_rank": 1, "near_duplicate_of_evidence": 1}


def _grid_ctx(tmp_path, **kwargs):
    ctx = qc_ctx(tmp_path, **kwargs)
    ctx.label, ctx.index = "02_depth_grid", 2
    return ctx


def test_the_reranker_judge_leaves_out_what_scores_near_the_evidence(tmp_path):
    # Distinct query words a text holds: the evidence and "Zebra sleeps. Zebra sleeps moon."
    # hold two ("zebra", "sleeps"), every other passage none.
    ctx = _grid_ctx(tmp_path, rerankers={"words": ShortWindow("words", max_length=1000)})
    params = GridParams(distractors=0, depths=[0, 1], lengths=[12, 24], judge="reranker", reranker="words")
    out = _run(params, ctx)
    assert sorted(out.corpus["n_tokens"].to_list()) == [12, 12, 24, 24]
    assert all(t.count(EVIDENCE) == 1 and "Zebra sleeps" not in t for t in out.corpus["text"])
    assert ctx.stats["grid"]["judge"] == "reranker"
    assert ctx.stats["grid"]["padding_excluded"] == {"answers_query:reranker": 1, "near_duplicate_of_evidence": 1}


def test_a_reranker_margin_wider_than_the_evidence_score_leaves_no_padding(tmp_path):
    ctx = _grid_ctx(tmp_path, rerankers={"words": ShortWindow("words", max_length=1000)})
    params = GridParams(distractors=0, depths=[0], lengths=[12], judge="reranker", reranker="words", reranker_margin=2)
    out = _run(params, ctx)
    assert out.queries.is_empty()
    assert out.drops.filter(out.drops["id"] == "q1")["reason"].to_list() == ["padding_exhausted"]
    assert ctx.stats["grid"]["padding_excluded"] == {"answers_query:reranker": 4, "near_duplicate_of_evidence": 1}


def test_the_packaged_minilm_judges_padding(tmp_path):
    config = BiEncoderConfig(backend="bi_encoder")
    if missing_extra(config):
        pytest.skip(f"{missing_extra(config)} (the packaged MiniLM is in the rerank extra)")
    ctx = _grid_ctx(tmp_path, configs={"minilm": config})
    params = GridParams(distractors=0, depths=[0, 1], lengths=[12, 24], judge="reranker", reranker="minilm")
    out = _run(params, ctx)
    assert ctx.stats["grid"]["padding_excluded"] == {"answers_query:reranker": 1, "near_duplicate_of_evidence": 1}
    assert all("Zebra sleeps" not in t for t in out.corpus["text"]) and out.queries.height == 4


@pytest.fixture
def judge_server(fake_openai):
    made: list[tuple[OpenAIBackend, object]] = []

    def make(responder=None):
        server = fake_openai(responder=responder or with_grades())
        backend = OpenAIBackend("judge", OpenAIModelConfig(model="judge", base_url=server.base_url), LLMCache.memory())
        made.append((backend, server))
        return backend, server

    yield make
    for backend, _ in made:
        backend.close()


def test_the_llm_judge_leaves_out_padding_graded_above_max_grade(tmp_path, judge_server):
    # The scripted grader gives "Zebra sleeps. Zebra sleeps moon." 4 (it holds every content
    # word of "zebra sleeps moon?") and the other passages 0.
    backend, server = judge_server()
    ctx = _grid_ctx(tmp_path, llms={"judge": backend})
    out = _run(GridParams(distractors=0, depths=[0, 1], lengths=[12, 24], judge="llm", llm="judge"), ctx)
    assert out.queries.height == 4
    assert all("Zebra sleeps" not in t for t in out.corpus["text"])
    assert ctx.stats["grid"]["padding_excluded"] == {"answers_query:llm": 1, "near_duplicate_of_evidence": 1}
    # The pool's five passages but the near-duplicate, and the one cut short at 12 tokens
    # ("Cold rivers run deep." of two sentences), judged as it stands.
    assert len(server.requests) == 5


def test_the_llm_judge_stops_once_the_padding_is_full(tmp_path, judge_server):
    # At 12 tokens the first passage walked ("Cold rivers run deep. ...", 8 tokens) fills it,
    # cut to its first sentence (judged again as it stands): one passage per round asks two
    # questions; the default batch asks about the whole pool and the cut.
    left_out = {"answers_query:llm": 1, "near_duplicate_of_evidence": 1}
    for batch, calls, excluded in ((1, 2, {}), (16, 5, left_out)):
        backend, server = judge_server()
        ctx = _grid_ctx(tmp_path, llms={"judge": backend})
        out = _run(
            GridParams(distractors=0, depths=[0], lengths=[12], judge="llm", llm="judge", judge_batch=batch), ctx
        )
        assert out.corpus["text"].to_list() == [f"{EVIDENCE}\n\nCold rivers run deep."]
        assert len(server.requests) == calls
        assert ctx.stats["grid"]["padding_excluded"] == excluded  # what was judged and left out


def test_a_passage_the_llm_cannot_grade_is_left_out_with_the_failure(tmp_path, judge_server):
    grades = with_grades()
    backend, _ = judge_server(lambda body: "no idea" if "apples" in str(body) else grades(body))
    ctx = _grid_ctx(tmp_path, llms={"judge": backend})
    out = _run(GridParams(distractors=0, depths=[0], lengths=[24], judge="llm", llm="judge"), ctx, only="q1")
    assert out.queries.is_empty()  # without the apples the padding holds 12 of the 16 tokens needed
    assert out.drops.select("id", "reason").rows() == [("q1", "padding_exhausted")]
    assert ctx.stats["grid"]["padding_excluded"] == {
        "answers_query:llm": 1,
        "judge_failed:llm_unparseable": 1,
        "near_duplicate_of_evidence": 1,
    }


@pytest.mark.parametrize(
    "params, message",
    [
        ({"judge": "reranker"}, "judge reranker needs `reranker:` naming a rerankers: entry"),
        ({"judge": "llm"}, "judge llm needs `llm:` naming a models: entry"),
        ({"max_score_ratio": None}, "judge bm25 needs max_score_ratio or rank_margin"),
        ({"rank_margin": -1}, "greater than or equal to 0"),
    ],
)
def test_a_judge_without_what_it_needs_is_refused(params, message):
    with pytest.raises(ValidationError, match=message):
        GridParams(**params)


def test_plan_counts_one_llm_call_per_padding_paragraph():
    from builder.stages.base import Flow

    stage = DepthGrid(
        GridParams(distractors=0, depths=[0, 1], lengths=[512, 1024], judge="llm", llm="judge", max_queries=10)
    )
    _, estimate = stage.plan(Flow(docs=5, queries=30, doc_tokens=800.0))
    # 1,024 tokens of padding at 25 a paragraph: 41 paragraphs a walk, 410 for ten walks, but
    # the pool (5 documents of 800 tokens) holds only 160; each graded against the 10 queries.
    assert (estimate.calls, estimate.prompt_tokens, estimate.completion_tokens) == (1600, 1600 * 275, 1600 * 2)
    assert estimate.notes[1] == (
        "llm judge: each padding paragraph met (taken as 25 tokens) graded against "
        "every query, in rounds of 16 per walk"
    )
