import json

import pytest

from builder.backends.llm import LLMCache, OpenAIBackend, OpenAIModelConfig
from builder.stages.qc.grading import remove_spans
from builder.stages.qc.llm_relevance import LLMRelevance, RelevanceParams
from builder.testing.openai_server import Reply
from tests.fixtures.scripted_grader import grade_answer, with_grades
from tests.stages.qc_factories import bench_of, graders, qc_ctx, span


@pytest.fixture
def grader(fake_openai):
    yield from graders(fake_openai)


DOC = ("Marie Curie discovered polonium and radium with her husband Pierre. "
       "She received two Nobel prizes, in physics and in chemistry. "
       "Warsaw was her birthplace, long under Russian rule.")
QUERIES = [
    ("full", "When had Marie Curie discovered polonium and radium?", "Marie Curie discovered polonium and radium"),
    ("partial", "Which Nobel prizes came in geology?", "She received two Nobel prizes"),
    ("elsewhere", "Was Marie Curie born in Warsaw?", "She received two Nobel prizes"),
    ("off", "How do volcanoes erupt?", "Warsaw was her birthplace"),
]


def _bench():
    return bench_of({"d": DOC}, [{"query_id": q, "text": t, "doc_id": "d", "spans": span(s, DOC)}
                                 for q, t, s in QUERIES])


def test_remove_spans_cuts_and_joins():
    text = "aaa bbb ccc ddd"
    assert remove_spans(text, [{"start": 4, "end": 8}]) == "aaa ccc ddd"
    assert remove_spans(text, [{"start": 8, "end": 11}, {"start": 0, "end": 3}]) == "bbb ddd"
    assert remove_spans(text, [{"start": 0, "end": 15}]) == ""


def test_grade_threshold_without_contrast(tmp_path, grader):
    ctx = qc_ctx(tmp_path, llms={"judge": grader()})
    out = LLMRelevance(RelevanceParams(llm="judge", contrast=False, questions_per_call=3)).run(_bench(), ctx)
    assert out.queries["query_id"].to_list() == ["full", "elsewhere"]
    assert sorted(out.drops.select("id", "reason").rows()) == [
        ("off", "llm_grade_below:3"), ("partial", "llm_grade_below:3")]
    assert ctx.stats["llm_grades_with_span"] == {"0": 1, "2": 1, "3": 1, "4": 1}
    # The grade stays on each kept query, for `build-bench review --report`'s agreement with people.
    assert out.queries["llm_grade"].to_list() == [4, 3]


def test_contrast_needs_a_higher_grade_with_the_span(tmp_path, grader):
    ctx = qc_ctx(tmp_path, llms={"judge": grader()})
    out = LLMRelevance(RelevanceParams(llm="judge")).run(_bench(), ctx)
    # "elsewhere" is answered outside its span: cutting the span leaves the grade unchanged.
    assert out.queries["query_id"].to_list() == ["full"]
    assert dict(out.drops.select("id", "reason").rows()) == {
        "partial": "llm_grade_below:3", "elsewhere": "llm_not_higher", "off": "llm_grade_below:3"}


def test_grades_with_and_without_spans_go_out_together(tmp_path, fake_openai):
    srv = fake_openai(responder=with_grades(), latency_s=0.25)
    backend = OpenAIBackend("judge", OpenAIModelConfig(model="judge", base_url=srv.base_url), LLMCache.memory())
    try:
        out = LLMRelevance(RelevanceParams(llm="judge")).run(_bench(), qc_ctx(tmp_path, llms={"judge": backend}))
    finally:
        backend.close()
    assert out.queries["query_id"].to_list() == ["full"]
    # One request with the spans (four questions) and three without (two queries share a
    # span), all in flight together rather than in a round each.
    with_spans = [b for b in srv.requests if DOC in b["messages"][-1]["content"]]
    assert (len(with_spans), srv.request_count) == (1, 4)
    assert max(srv.arrived) < min(srv.answered)


def test_unusable_answers_are_counted_drops(tmp_path, grader):
    def answer(body):
        text = grade_answer(body)
        return "no idea" if "volcanoes" in json.dumps(body) else text

    ctx = qc_ctx(tmp_path, llms={"judge": grader(responder=answer, max_reasks=1)})
    out = LLMRelevance(RelevanceParams(llm="judge", contrast=False, questions_per_call=1)).run(_bench(), ctx)
    assert dict(out.drops.select("id", "reason").rows())["off"] == "llm_unparseable"
    assert (tmp_path / "unparseable.jsonl").exists()


def test_truncated_grades_are_counted_drops(tmp_path, grader):
    def answer(body):
        text = grade_answer(body)
        return Reply(text=text[:5], finish_reason="length") if "volcanoes" in json.dumps(body) else text

    ctx = qc_ctx(tmp_path, llms={"judge": grader(responder=answer)})
    out = LLMRelevance(RelevanceParams(llm="judge", contrast=False, questions_per_call=1)).run(_bench(), ctx)
    assert dict(out.drops.select("id", "reason").rows())["off"] == "llm_truncated"
