import pytest

from builder.backends.rerankers import BM25Config
from builder.stages.qc.segment_agreement import SegmentAgreement, SegmentParams, thirds
from tests.stages.qc_factories import ByLength, ShortWindow, bench_of, graders, qc_ctx


@pytest.fixture
def grader(fake_openai):
    yield from graders(fake_openai)


PARTS = [
    "Volcanoes erupt when magma rises. Hot lava flows down the slopes of the volcano and cools into basalt.",
    "Glaciers are rivers of ice. Warming ocean water makes the glacier ice melt and retreat every summer.",
    "Coral reefs grow in warm ocean water. Reef fish hide among the coral from larger hunters nearby.",
]
WIDTH = max(map(len, PARTS)) + 1
DOC = "".join(p.ljust(WIDTH) for p in PARTS)
QUERIES = [
    ("lava", "Where do lava flows come from in a volcano?", "beginning"),
    ("lava_mislabelled", "Where do lava flows come from in a volcano?", "end"),
    ("unlabelled", "Where do lava flows come from in a volcano?", None),
    ("ocean", "Where is ocean water?", "end"),
    ("warm", "Is ocean water warm?", "middle"),
    ("reef", "Do reef fish hide among coral?", "end"),
]


def _bench():
    docs = {"d": DOC, "other": "Deserts are dry. Camels cross the sand dunes."}
    return bench_of(docs, [{"query_id": q, "text": t, "doc_id": "d", "chunk_tag": tag} for q, t, tag in QUERIES])


def test_thirds_are_equal_parts():
    assert [p.strip() for p in thirds(DOC)] == PARTS


def test_rerankers_must_rank_the_labelled_third_first(tmp_path):
    ctx = qc_ctx(tmp_path, configs={"bm25": BM25Config()})
    out = SegmentAgreement(SegmentParams()).run(_bench(), ctx)
    assert out.queries["query_id"].to_list() == ["lava", "reef"]
    assert dict(out.drops.select("id", "reason").rows()) == {
        "lava_mislabelled": "segment_disagreement:bm25",
        "unlabelled": "no_position_label",
        "ocean": "segment_disagreement:bm25",
        "warm": "segment_disagreement:bm25",
    }


def test_a_tie_at_the_top_is_no_decision(tmp_path):
    # Equal-length thirds tie under the length "reranker": it abstains, so bm25 decides alone,
    # whether every deciding reranker must agree or a majority of them.
    ctx = qc_ctx(tmp_path, configs={"bm25": BM25Config()}, rerankers={"len": ByLength("len")})
    for require in ("all", "majority"):
        out = SegmentAgreement(SegmentParams(rerankers=["bm25", "len"], require=require)).run(_bench(), ctx)
        assert out.queries["query_id"].to_list() == ["lava", "reef"]
        assert dict(out.drops.select("id", "reason").rows())["ocean"] == "segment_disagreement:bm25"
    assert ctx.stats["segment_agreement"]["len"] == {"agree": 0, "disagree": 0, "tie": 5, "no_score": 0}


def test_no_deciding_reranker_leaves_the_query_undecided(tmp_path):
    ctx = qc_ctx(tmp_path, rerankers={"len": ByLength("len")})
    out = SegmentAgreement(SegmentParams(rerankers=["len"])).run(_bench(), ctx)
    assert out.queries.height == 0
    assert set(dict(out.drops.select("id", "reason").rows()).values()) == {"segment_undecided", "no_position_label"}


def test_tied_normalized_bm25_does_not_drop_a_query(tmp_path):
    # Normalized bm25 used to cap strong matches at 1.0, so all three thirds tied.
    part = "tide tide tide pool pool pool. "
    doc = part * 3
    ctx = qc_ctx(tmp_path, configs={"bm25": BM25Config(normalize=True)})
    bench = bench_of(
        {"d": doc, "o": "dry sand"}, [{"query_id": "q", "text": "tide pool", "doc_id": "d", "chunk_tag": "beginning"}]
    )
    out = SegmentAgreement(SegmentParams()).run(bench, ctx)
    assert dict(out.drops.select("id", "reason").rows()) == {"q": "segment_undecided"}


def test_llm_step_needs_a_high_and_distinct_grade(tmp_path, grader):
    ctx = qc_ctx(tmp_path, llms={"judge": grader()})
    out = SegmentAgreement(SegmentParams(rerankers=[], llm="judge")).run(_bench(), ctx)
    assert out.queries["query_id"].to_list() == ["lava", "reef"]
    assert dict(out.drops.select("id", "reason").rows()) == {
        "lava_mislabelled": "llm_grade_below:3",
        "unlabelled": "no_position_label",
        "ocean": "llm_segment_not_higher",
        "warm": "llm_grade_below:3",
    }


@pytest.mark.parametrize("per_call, calls, not_sent", [(1, 5 + 3 * 2 - 1, 4), (8, 3, 0)])
def test_the_other_thirds_are_graded_only_when_the_labelled_one_passes(tmp_path, grader, per_call, calls, not_sent):
    # One pair per call (FineWeb-PosQ's form): lava_mislabelled and warm grade below 3 on
    # their own third, so they are dropped whatever the other thirds get, and those four
    # pairs are not sent. Batched, a third's questions share one call: all go at once.
    # (lava and lava_mislabelled ask the same question: their shared pairs are cache hits.)
    judge = grader()
    ctx = qc_ctx(tmp_path, llms={"judge": judge})
    out = SegmentAgreement(SegmentParams(rerankers=[], llm="judge", questions_per_call=per_call)).run(_bench(), ctx)
    assert out.queries["query_id"].to_list() == ["lava", "reef"]
    assert dict(out.drops.select("id", "reason").rows()) == {
        "lava_mislabelled": "llm_grade_below:3",
        "unlabelled": "no_position_label",
        "ocean": "llm_segment_not_higher",
        "warm": "llm_grade_below:3",
    }
    assert judge.usage.calls == calls
    assert ctx.stats["grading_pairs_not_sent"] == not_sent


def test_needs_a_reranker_or_an_llm():
    with pytest.raises(ValueError, match="rerankers, an llm, or both"):
        SegmentParams(rerankers=[])


def test_a_short_window_reranker_reads_the_whole_labelled_third(tmp_path):
    # Each third is 80 words; the fact sits at the end of the last one, past a 30-word window.
    parts = [" ".join(f"w{t}x{k}" for k in range(80)) for t in range(3)]
    parts[2] += " the comet glows green"
    doc = " ".join(parts)
    bench = bench_of({"d": doc}, [{"query_id": "q", "text": "comet glows green", "doc_id": "d", "chunk_tag": "end"}])
    ctx = qc_ctx(tmp_path, rerankers={"short": ShortWindow("short", 30)})
    out = SegmentAgreement(SegmentParams(rerankers=["short"])).run(bench, ctx)
    assert out.queries["query_id"].to_list() == ["q"]
    assert ctx.stats["kept_by_third"]["end"] == {"in": 1, "kept": 1, "share": 1.0}
    dropped = SegmentAgreement(SegmentParams(rerankers=["short"], beyond_window="drop")).run(bench, ctx)
    assert dropped.drops.select("id", "reason").rows() == [("q", "span_beyond_window:short")]
