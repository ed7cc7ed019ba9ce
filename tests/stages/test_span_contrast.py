import json

import pytest

from builder.backends.rerankers import BM25Config
from builder.stages.qc.span_contrast import SpanContrast, SpanContrastParams
from tests.fixtures.scripted_grader import grade_answer
from tests.stages.qc_factories import ByLength, ShortWindow, bench_of, graders, qc_ctx, span
from tests.support.openai_server import Reply


@pytest.fixture
def grader(fake_openai):
    yield from graders(fake_openai)


DOC = (
    "Paris is the capital of France and its largest city. "
    "Bananas are a yellow fruit rich in potassium. "
    "The Eiffel Tower was completed in 1889 for the world fair."
)
OTHERS = {
    "d2": "Rome is the capital of Italy. The Colosseum is an ancient amphitheatre.",
    "d3": "Apples and pears grow in orchards. Potassium is found in many fruit.",
}
QUESTION = "When was the Eiffel Tower completed?"


def _bench():
    return bench_of(
        {"d1": DOC, **OTHERS},
        [
            {
                "query_id": "good",
                "text": QUESTION,
                "doc_id": "d1",
                "spans": span("The Eiffel Tower was completed in 1889 for the world fair.", DOC),
            },
            {
                "query_id": "bad",
                "text": QUESTION,
                "doc_id": "d1",
                "spans": span("Bananas are a yellow fruit rich in potassium.", DOC),
            },
            {"query_id": "none", "text": QUESTION, "doc_id": "d1", "spans": None},
        ],
    )


def test_span_holding_the_answer_is_kept_and_an_irrelevant_span_dropped(tmp_path):
    ctx = qc_ctx(tmp_path, configs={"bm25": BM25Config()})
    out = SpanContrast(SpanContrastParams()).run(_bench(), ctx)
    assert out.queries["query_id"].to_list() == ["good"]
    assert sorted(out.drops.select("id", "reason").rows()) == [
        ("bad", "contrast_not_higher:bm25"),
        ("none", "no_spans"),
    ]
    assert out.corpus.height == 3
    assert ctx.stats["span_contrast"]["bm25"] == {"higher": 1, "not_higher": 1, "no_score": 0}


def test_require_all_versus_majority(tmp_path):
    scorers = {"longer": ByLength("longer"), "shorter": ByLength("shorter", -1)}
    ctx = qc_ctx(tmp_path, rerankers=scorers, configs={"bm25": BM25Config()})
    names = ["bm25", "longer", "shorter"]
    strict = SpanContrast(SpanContrastParams(rerankers=names)).run(_bench(), ctx)
    assert strict.queries.height == 0
    assert dict(strict.drops.select("id", "reason").rows())["good"] == "contrast_not_higher:shorter"
    lenient = SpanContrast(SpanContrastParams(rerankers=names, require="majority")).run(_bench(), ctx)
    assert lenient.queries["query_id"].to_list() == ["good"]
    assert dict(lenient.drops.select("id", "reason").rows())["bad"] == "contrast_not_higher:bm25"


def test_llm_contrast_check(tmp_path, grader):
    ctx = qc_ctx(
        tmp_path, configs={"bm25": BM25Config()}, llms={"judge": grader()}, rerankers={"longer": ByLength("longer")}
    )
    # Both spans pass the length "reranker"; the grader finds the question's words gone
    # only when the span holding the answer is cut.
    out = SpanContrast(SpanContrastParams(rerankers=["longer"], llm="judge")).run(_bench(), ctx)
    assert out.queries["query_id"].to_list() == ["good"]
    assert dict(out.drops.select("id", "reason").rows()) == {"none": "no_spans", "bad": "llm_contrast_failed"}
    assert ctx.stats["llm_grades_with_span"] == {"4": 2}


def test_a_neural_reranker_without_the_extra_is_a_recipe_problem(monkeypatch, write_recipe):
    import importlib.util

    from builder.recipe.model import parse_recipe
    from builder.recipe.yaml_text import RecipeError
    from builder.util.install_hint import install_command

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("torch", "sentence_transformers") else real(name, *a),
    )
    path = write_recipe(
        "name: t\nsources: [{type: python_docs}]\nrerankers:\n  ce: {backend: cross_encoder, model: m}\n"
        "stages:\n  - generate_queries: {mode: extractive}\n  - localize_spans: {}\n"
        "  - span_contrast: {rerankers: [ce, bm25]}\n"
    )
    with pytest.raises(RecipeError) as caught:
        parse_recipe(path)
    expected = (
        "reranker 'ce': backend 'cross_encoder' needs torch and sentence-transformers, which are not "
        f"installed; install them with: {install_command('rerank')}"
    )
    assert [(p.loc, p.message, p.line) for p in caught.value.problems] == [
        (("stages", 2, "span_contrast", "rerankers"), expected, 8)
    ]


def test_a_truncated_contrast_grade_keeps_its_reason(tmp_path, grader):
    def answer(body):
        text, sent = grade_answer(body), json.dumps(body)
        cut = "<set_aside>\\nBananas" in sent  # the document without the bad span
        return Reply(text=text[:3], finish_reason="length") if cut else text

    ctx = qc_ctx(tmp_path, llms={"judge": grader(responder=answer)}, rerankers={"longer": ByLength("longer")})
    out = SpanContrast(SpanContrastParams(rerankers=["longer"], llm="judge", without_span="set_aside")).run(
        _bench(), ctx
    )
    assert dict(out.drops.select("id", "reason").rows()) == {"none": "no_spans", "bad": "llm_truncated"}


FILLER = [f"filler{k}" for k in range(400)]
FACTS = {"beginning": "the comet glows green", "middle": "the glacier melts slowly", "end": "the volcano erupts daily"}


def _long_bench():
    """Documents of 400 words, three times longer than the scorer's window, with one fact
    in each third and one query per fact."""
    docs, queries = {}, []
    for d in range(6):
        words = list(FILLER)
        for k, fact in enumerate(FACTS.values()):
            words[20 + 150 * k + d] = fact
        doc = " ".join(words)
        docs[f"d{d}"] = doc
        for tag, fact in FACTS.items():
            queries.append(
                {
                    "query_id": f"d{d}-{tag}",
                    "text": f"why {fact.split()[1]} {fact.split()[2]}",
                    "doc_id": f"d{d}",
                    "position_tag": tag,
                    "spans": span(fact, doc),
                }
            )
    return bench_of(docs, queries)


def test_a_short_window_scorer_keeps_end_thirds_as_often_as_beginnings(tmp_path):
    ctx = qc_ctx(tmp_path, rerankers={"short": ShortWindow("short", max_length=128)})
    out = SpanContrast(SpanContrastParams(rerankers=["short"])).run(_long_bench(), ctx)
    kept = ctx.stats["kept_by_third"]
    assert kept == {t: {"in": 6, "kept": 6, "share": 1.0} for t in ("beginning", "middle", "end")}
    assert abs(kept["end"]["share"] - kept["beginning"]["share"]) <= 0.10
    assert out.queries.height == 18


def test_a_short_window_scorer_can_drop_what_it_cannot_read_instead(tmp_path):
    ctx = qc_ctx(tmp_path, rerankers={"short": ShortWindow("short", max_length=128)})
    out = SpanContrast(SpanContrastParams(rerankers=["short"], beyond_window="drop")).run(_long_bench(), ctx)
    assert sorted(out.queries["position_tag"]) == ["beginning"] * 6
    assert set(dict(out.drops.select("id", "reason").rows()).values()) == {"span_beyond_window:short"}
