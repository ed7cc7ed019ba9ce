import json

import pytest

from builder.backends.llm import LLMCache, OpenAIBackend, OpenAIModelConfig
from builder.backends.llm.prompt_templates import PromptLibrary
from builder.stages.grading import remove_spans
from builder.stages.qc.llm_relevance import LLMRelevance, RelevanceParams
from tests.fixtures.scripted_grader import grade_answer, with_grades
from tests.stages.qc_factories import bench_of, graders, qc_ctx, span
from tests.support.openai_server import Reply


@pytest.fixture
def grader(fake_openai):
    yield from graders(fake_openai)


DOC = (
    "Marie Curie discovered polonium and radium with her husband Pierre. "
    "She received two Nobel prizes, in physics and in chemistry. "
    "Warsaw was her birthplace, long under Russian rule."
)
QUERIES = [
    ("full", "When had Marie Curie discovered polonium and radium?", "Marie Curie discovered polonium and radium"),
    ("partial", "Which Nobel prizes came in geology?", "She received two Nobel prizes"),
    ("elsewhere", "Was Marie Curie born in Warsaw?", "She received two Nobel prizes"),
    ("off", "How do volcanoes erupt?", "Warsaw was her birthplace"),
]


def _bench():
    return bench_of(
        {"d": DOC}, [{"query_id": q, "text": t, "doc_id": "d", "spans": span(s, DOC)} for q, t, s in QUERIES]
    )


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
        ("off", "llm_grade_below:3"),
        ("partial", "llm_grade_below:3"),
    ]
    assert ctx.stats["llm_grades_with_span"] == {"0": 1, "2": 1, "3": 1, "4": 1}
    # The grade stays on each kept query, for `build-bench review --report`'s agreement with people.
    assert out.queries["llm_grade"].to_list() == [4, 3]


def test_contrast_needs_a_higher_grade_with_the_span(tmp_path, grader):
    ctx = qc_ctx(tmp_path, llms={"judge": grader()})
    out = LLMRelevance(RelevanceParams(llm="judge")).run(_bench(), ctx)
    # "elsewhere" is answered outside its span: cutting the span leaves the grade unchanged.
    assert out.queries["query_id"].to_list() == ["full"]
    assert dict(out.drops.select("id", "reason").rows()) == {
        "partial": "llm_grade_below:3",
        "elsewhere": "llm_not_higher",
        "off": "llm_grade_below:3",
    }


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
    with_spans = [b for b in srv.requests if f"<document>\n{DOC}\n</document>" in b["messages"][-1]["content"]]
    assert (len(with_spans), srv.request_count) == (1, 4)
    assert max(srv.arrived) < min(srv.answered)


def _sent(srv) -> list[str]:
    return [b["messages"][-1]["content"] for b in srv.requests]


def test_without_the_span_the_document_stays_whole_and_the_span_is_named_to_set_aside(tmp_path, fake_openai):
    srv = fake_openai(responder=with_grades())
    backend = OpenAIBackend(
        "judge", OpenAIModelConfig(model="judge", base_url=srv.base_url, max_concurrency=1), LLMCache.memory()
    )
    try:
        ctx = qc_ctx(tmp_path, llms={"judge": backend})
        out = LLMRelevance(RelevanceParams(llm="judge", without_span="set_aside")).run(_bench(), ctx)
    finally:
        backend.close()
    # With a judge that follows the instruction, the same verdicts as cutting the span out
    # (test_contrast_needs_a_higher_grade_with_the_span).
    assert out.queries["query_id"].to_list() == ["full"]
    assert ctx.stats["contrast_layout"] == "set_aside"
    sent = _sent(srv)
    assert all(text.startswith(f"<document>\n{DOC}\n</document>") for text in sent)
    assert ["<set_aside>" in text for text in sent] == [False, True, True, True]
    assert "<set_aside>\nMarie Curie discovered polonium and radium\n</set_aside>" in sent[1]


def test_cut_sends_the_document_with_the_span_cut_out(tmp_path, fake_openai):
    srv = fake_openai(responder=with_grades())
    backend = OpenAIBackend(
        "judge", OpenAIModelConfig(model="judge", base_url=srv.base_url, max_concurrency=1), LLMCache.memory()
    )
    try:
        ctx = qc_ctx(tmp_path, llms={"judge": backend})
        out = LLMRelevance(RelevanceParams(llm="judge")).run(_bench(), ctx)  # cut: the default
    finally:
        backend.close()
    assert out.queries["query_id"].to_list() == ["full"]
    assert ctx.stats["contrast_layout"] == "cut"
    sent = _sent(srv)
    assert not any("<set_aside>" in text for text in sent)
    assert sum(DOC in text for text in sent) == 1
    assert any(remove_spans(DOC, span(QUERIES[0][2], DOC)) in text for text in sent)


def test_a_judge_that_ignores_the_instruction_drops_queries_under_set_aside_but_not_under_cut(tmp_path, grader):
    """A literal judge grades the text it reads: shown the whole document, it gives the span's
    credit back, so `set_aside` loses the one query `cut` keeps (why `cut` is the default)."""
    literal = grader(responder=with_grades(follows_set_aside=False))
    cut = LLMRelevance(RelevanceParams(llm="judge")).run(_bench(), qc_ctx(tmp_path, llms={"judge": literal}))
    assert cut.queries["query_id"].to_list() == ["full"]
    ctx = qc_ctx(tmp_path, llms={"judge": literal})
    set_aside = LLMRelevance(RelevanceParams(llm="judge", without_span="set_aside")).run(_bench(), ctx)
    assert set_aside.queries.height == 0
    assert dict(set_aside.drops.select("id", "reason").rows()) == {
        "full": "llm_not_higher",
        "partial": "llm_grade_below:3",
        "elsewhere": "llm_not_higher",
        "off": "llm_grade_below:3",
    }
    assert ctx.stats["llm_grades_without_span"] == ctx.stats["llm_grades_with_span"]


def test_a_grading_prompt_that_cannot_set_a_passage_aside_gets_the_cut_document(tmp_path, grader):
    own = tmp_path / "grade.j2"
    shipped = PromptLibrary().path_of("relevance_grade").read_text(encoding="utf-8")
    before, after = shipped.split("{% if set_aside %}")
    own.write_text(before + after.split("{% endif %}", 1)[1], encoding="utf-8")
    ctx = qc_ctx(tmp_path, llms={"judge": grader()})
    out = LLMRelevance(RelevanceParams(llm="judge", prompt=str(own))).run(_bench(), ctx)
    assert out.queries["query_id"].to_list() == ["full"]
    assert ctx.stats["contrast_layout"] == "cut"


def test_requests_about_one_document_go_out_together(tmp_path, fake_openai):
    srv = fake_openai(responder=with_grades())
    backend = OpenAIBackend(
        "judge", OpenAIModelConfig(model="judge", base_url=srv.base_url, max_concurrency=1), LLMCache.memory()
    )
    other = "Ada Lovelace wrote the first program for the Analytical Engine of Charles Babbage."
    bench = bench_of(
        {"d": DOC, "e": other},
        [
            {"query_id": "full", "text": QUERIES[0][1], "doc_id": "d", "spans": span(QUERIES[0][2], DOC)},
            {
                "query_id": "ada",
                "text": "Who wrote the first program?",
                "doc_id": "e",
                "spans": span("Ada Lovelace wrote the first program", other),
            },
            {"query_id": "off", "text": QUERIES[3][1], "doc_id": "d", "spans": span(QUERIES[3][2], DOC)},
        ],
    )
    try:
        LLMRelevance(RelevanceParams(llm="judge", without_span="set_aside")).run(
            bench, qc_ctx(tmp_path, llms={"judge": backend})
        )
    finally:
        backend.close()
    docs = ["d" if text.startswith(f"<document>\n{DOC}") else "e" for text in _sent(srv)]
    assert docs == ["d", "d", "d", "e", "e"]


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
