import json

import polars as pl
import pytest

from builder.backends.rerankers import BM25Config, LLMJudgeConfig
from builder.stages.qc.false_negatives import FalseNegativeParams, FalseNegatives
from tests.stages.qc_factories import ShortWindow, bench_of, graders, qc_ctx, span


@pytest.fixture
def grader(fake_openai):
    yield from graders(fake_openai)


DOCS = {
    "tower": "The Eiffel Tower was completed in 1889 for the world fair in Paris. It is made of wrought "
    "iron and stands 330 metres tall. Millions of tourists climb its stairs every year.",
    # A near-duplicate of "tower": the same opening sentence in a shorter text.
    "planted": "The Eiffel Tower was completed in 1889 for the world fair in Paris. Its wrought iron "
    "frame is painted every seven years.",
    "rome": "The Colosseum in Rome is an ancient amphitheatre built under the Flavian emperors.",
    "fruit": "Bananas are a yellow fruit rich in potassium and grow in tropical climates.",
}
QUERIES = [
    ("q_tower", "When was the Eiffel Tower completed for the world fair?", "tower"),
    ("q_planted", "How often is the wrought iron frame painted?", "planted"),
    ("q_rome", "Which emperors built the Colosseum amphitheatre?", "rome"),
]


def _bench():
    return bench_of(DOCS, [{"query_id": q, "text": t, "doc_id": d} for q, t, d in QUERIES])


def test_posir_mode_removes_the_document_and_cascades(tmp_path):
    ctx = qc_ctx(tmp_path, configs={"bm25": BM25Config()})
    out = FalseNegatives(FalseNegativeParams()).run(_bench(), ctx)
    assert sorted(out.drops.select("kind", "id", "reason").rows()) == [
        ("doc", "planted", "false_negative"),
        ("query", "q_planted", "doc_removed:false_negative"),
    ]
    assert out.queries["query_id"].to_list() == ["q_tower", "q_rome"]
    assert sorted(out.corpus["doc_id"]) == ["fruit", "rome", "tower"]
    detail = pl.read_parquet(tmp_path / "false_negatives.parquet")
    assert detail.rows() == [("q_tower", "planted", ["bm25"])]
    assert ctx.stats["false_negative_docs"] == 1


def test_problems_name_unknown_unfit_and_raw_rerankers(write_recipe):
    from builder.recipe.model import parse_recipe
    from builder.recipe.yaml_text import RecipeError

    path = write_recipe(
        "name: t\nsources: [{type: python_docs}]\nrerankers:\n  raw: {backend: bm25}\n"
        "  judge: {backend: llm_judge, llm: missing, prompt: nope}\n"
        "stages:\n  - generate_queries: {mode: extractive}\n"
        "  - false_negatives: {mode: fineweb_posq, retriever: judge, rerankers: [raw, bm52]}\n"
    )
    with pytest.raises(RecipeError) as caught:
        parse_recipe(path)
    problems = caught.value.problems
    assert sorted(p.loc[-1] for p in problems) == ["rerankers"] * 2 + ["retriever"] * 3
    text = " | ".join(p.message for p in problems)
    assert "needs one of: bm25, bi_encoder" in text and "model 'missing'" in text
    assert "prompt 'nope' not found" in text
    assert "'bm52' is not declared" in text and "did you mean 'bm25'" in text
    assert "'raw' gives raw scores" in text


def _judges(grader, votes_for_planted: int):
    """Three judges; the first `votes_for_planted` grade every pair by word overlap, the
    others always answer 0."""

    def never(body):
        user = body["messages"][-1]["content"]
        if "<questions>" not in user:
            return "0"  # the one-pair form: a bare integer
        return json.dumps([0] * user.split("<questions>")[1].count("?"))

    return {f"j{i}": grader(f"j{i}", responder=None if i < votes_for_planted else never) for i in range(3)}


@pytest.mark.parametrize("per_call", [8, 1])
@pytest.mark.parametrize("votes, dropped", [(2, True), (1, False)])
def test_fineweb_mode_needs_two_judges_to_confirm(tmp_path, grader, votes, dropped, per_call):
    judges = _judges(grader, votes)
    configs = {
        "bm25": BM25Config(normalize=True),
        "judge": LLMJudgeConfig(backend="llm_judge", llm="j0", questions_per_call=per_call),
    }
    ctx = qc_ctx(tmp_path, configs=configs, llms=judges)
    params = FalseNegativeParams(
        mode="fineweb_posq", rerankers=["bm25", "judge"], judges=list(judges), questions_per_call=per_call
    )
    out = FalseNegatives(params).run(_bench(), ctx)
    assert out.corpus.height == 4
    expected = [("query", "q_tower", "false_negative_confirmed")] if dropped else []
    assert out.drops.select("kind", "id", "reason").rows() == expected
    detail = pl.read_parquet(tmp_path / "false_negatives.parquet")
    assert detail.rows() == [("q_tower", "planted", ["bm25", "judge"], votes)]


@pytest.mark.parametrize("votes, asked", [(2, [1, 1, 0]), (1, [1, 1, 1]), (0, [1, 1, 0])])
def test_a_judge_is_asked_only_while_the_vote_is_open(tmp_path, grader, votes, asked):
    # Two of three must confirm: after two agreeing judges the third cannot change the
    # outcome, so it is not asked (the FineWeb-PosQ paper's three judges, at two thirds of
    # the calls when they agree); after a split it decides.
    judges = _judges(grader, votes)
    ctx = qc_ctx(tmp_path, configs={"bm25": BM25Config(normalize=True)}, llms=judges)
    params = FalseNegativeParams(mode="fineweb_posq", rerankers=["bm25"], judges=list(judges))
    out = FalseNegatives(params).run(_bench(), ctx)
    assert [judges[f"j{i}"].usage.calls for i in range(3)] == asked
    assert (out.drops.height == 1) == (votes == 2)
    assert ctx.stats["judge_pairs_not_sent"] == 3 - sum(asked)


def test_fineweb_mode_without_judges_trusts_the_rerankers(tmp_path):
    ctx = qc_ctx(tmp_path, configs={"bm25": BM25Config(normalize=True)})
    out = FalseNegatives(FalseNegativeParams(mode="fineweb_posq")).run(_bench(), ctx)
    assert out.drops.select("id", "reason").rows() == [("q_tower", "false_negative_confirmed")]


def test_params_reject_judges_in_posir_mode():
    with pytest.raises(ValueError, match="fineweb_posq only"):
        FalseNegativeParams(judges=["a"])
    with pytest.raises(ValueError, match="more than the 1 judges"):
        FalseNegativeParams(mode="fineweb_posq", judges=["a"])


def _late_evidence_bench():
    filler = " ".join(f"filler{k}" for k in range(200))
    docs = {
        "positive": f"{filler} the comet glows green at dusk",
        "other": "comet sightings are rare in this town and the sky is cloudy",
    }
    return bench_of(
        docs,
        [
            {
                "query_id": "q",
                "text": "why does the comet glow green",
                "doc_id": "positive",
                "spans": span("the comet glows green at dusk", docs["positive"]),
            }
        ],
    )


def test_a_short_window_reranker_reads_the_whole_positive(tmp_path):
    # Truncated, the positive showed none of the query's words and lost to a weaker document.
    ctx = qc_ctx(tmp_path, configs={"bm25": BM25Config()}, rerankers={"short": ShortWindow("short", 64)})
    out = FalseNegatives(FalseNegativeParams(rerankers=["short"])).run(_late_evidence_bench(), ctx)
    assert out.drops.height == 0 and out.corpus.height == 2


def test_beyond_window_drop_removes_queries_the_reranker_cannot_read(tmp_path):
    ctx = qc_ctx(tmp_path, configs={"bm25": BM25Config()}, rerankers={"short": ShortWindow("short", 64)})
    params = FalseNegativeParams(rerankers=["short"], beyond_window="drop")
    out = FalseNegatives(params).run(_late_evidence_bench(), ctx)
    assert out.drops.select("id", "reason").rows() == [("q", "span_beyond_window:short")]


class Prefers:
    """A stand-in reranker: scores 2 for the documents a query is scripted to prefer, 1 for
    anything else (the positive included), so each preferred document beats the positive."""

    normalized = False

    def __init__(self, name: str, prefers: dict[str, set[str]]) -> None:
        self.name, self.prefers = name, prefers

    def fit(self, corpus_texts):
        pass

    def text_budget(self, query):
        return None

    def score_pairs(self, pairs):
        return [2.0 if text in self.prefers.get(query, set()) else 1.0 for query, text in pairs]


# Every text shares "river" with every query, so BM25 recalls the whole corpus.
CHAIN_DOCS = {d: f"river {d} " + " ".join([d] * 3) for d in ("a", "b", "c", "d", "e", "f")}
CHAIN_QUERIES = [("qa", "a"), ("qb", "b"), ("qc", "c"), ("qd", "d"), ("qe", "e"), ("qe2", "e")]
# qa prefers b, qb prefers c: removing b and c at once would also lose qc, whose positive c
# is flagged only by qb, which goes with b. qd and qe prefer each other's positive.
CHAIN_PREFERS = {"qa": {"b"}, "qb": {"c"}, "qd": {"e"}, "qe": {"d"}}


def test_posir_mode_removes_documents_only_for_queries_that_survive(tmp_path):
    queries = [{"query_id": q, "text": f"river {q}", "doc_id": d} for q, d in CHAIN_QUERIES]
    prefers = {f"river {q}": {CHAIN_DOCS[d] for d in docs} for q, docs in CHAIN_PREFERS.items()}
    ctx = qc_ctx(tmp_path, configs={"bm25": BM25Config()}, rerankers={"script": Prefers("script", prefers)})
    params = FalseNegativeParams(rerankers=["script"], warn_above=0.5)
    out = FalseNegatives(params).run(bench_of(CHAIN_DOCS, queries), ctx)
    # b goes for qa; c stays, its only flagger qb being gone; of the cycle d <-> e, e (the
    # positive of two queries) stays and d goes.
    assert sorted(out.corpus["doc_id"]) == ["a", "c", "e", "f"]
    assert sorted(out.queries["query_id"]) == ["qa", "qc", "qe", "qe2"]
    assert sorted(out.drops.select("kind", "id", "reason").rows()) == [
        ("doc", "b", "false_negative"),
        ("doc", "d", "false_negative"),
        ("query", "qb", "doc_removed:false_negative"),
        ("query", "qd", "doc_removed:false_negative"),
    ]
    assert ctx.stats["false_negative_flagged_docs"] == 4 and ctx.stats["false_negative_docs"] == 2
    assert ctx.stats["false_negative_removed_share_documents"] == round(2 / 6, 4)
    assert ctx.stats["false_negative_removed_share_queries"] == round(2 / 6, 4)
    assert ctx.warnings == []


def test_a_large_removal_warns_above_the_threshold(tmp_path):
    ctx = qc_ctx(tmp_path, configs={"bm25": BM25Config()})
    FalseNegatives(FalseNegativeParams(warn_above=0.2)).run(_bench(), ctx)
    assert ctx.warnings == [
        "false-negative removal took 25% of the documents (1 of 4; warn_above 20%)",
        "false-negative removal took 33% of the queries (1 of 3; warn_above 20%)",
    ]
    ctx = qc_ctx(tmp_path, configs={"bm25": BM25Config()})
    FalseNegatives(FalseNegativeParams(warn_above=0.4)).run(_bench(), ctx)
    assert ctx.warnings == []


def test_each_removal_names_the_documents_that_caused_it(tmp_path):
    # A grown release's diff tells a removal caused by new documents from the others by these.
    ctx = qc_ctx(tmp_path, configs={"bm25": BM25Config(normalize=True)})
    out = FalseNegatives(FalseNegativeParams(mode="fineweb_posq")).run(_bench(), ctx)
    assert out.drops.select("id", "reason", "rivals").rows() == [("q_tower", "false_negative_confirmed", ["planted"])]
    (tmp_path / "posir").mkdir()
    ctx = qc_ctx(tmp_path / "posir", configs={"bm25": BM25Config()})
    out = FalseNegatives(FalseNegativeParams()).run(_bench(), ctx)
    assert sorted(out.drops.select("kind", "id", "rivals").rows()) == [
        ("doc", "planted", ["tower"]),
        ("query", "q_planted", ["tower"]),
    ]
