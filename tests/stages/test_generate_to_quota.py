"""generate_to_quota: rounds of generation that ask only for the position groups still
short, and stop when every quota is met or the short group's candidates run out."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from builder.backends.llm import OpenAIModelConfig
from builder.backends.llm.mock_backend import MockLLMBackend
from builder.stages.generate.steering import Tally, plan_round, targets
from builder.stages.generate.to_quota import GenerateToQuota, ToQuotaParams
from tests.stages.qc_factories import bench_of, qc_ctx

# Three sentences per third; in d0 and d1 every final-third sentence names a zebra.
CLEAN = (
    "Copper wires carry electric current between distant towns. "
    "Engineers measured voltage drops along every copper line. "
    "Farmers planted barley across the northern valley fields. "
)
MIDDLE = (
    "Rivers flooded the lowland meadows during spring storms. "
    "Bakers sold rye bread in crowded market squares. "
    "Sailors mapped rocky harbours along the western coast. "
)
END = (
    "Painters mixed bright pigments inside cold stone studios. "
    "Miners hauled heavy coal carts through narrow tunnels. "
    "Weavers spun woollen thread beside glowing peat fires. "
)
ZEBRA_END = (
    "Zebra painters mixed bright pigments inside cold studios. "
    "Zebra miners hauled heavy coal carts through tunnels. "
    "Zebra weavers spun woollen thread beside peat fires. "
)
DOCS = {f"d{k}": CLEAN + MIDDLE + (ZEBRA_END if k < 2 else END) for k in range(4)}


class ZebraAverse:
    """A reranker for span_contrast that prefers the text without the span whenever the
    question mentions a zebra, so those questions fail the contrast."""

    normalized = False
    name = "zebra"

    def fit(self, corpus_texts: Sequence[str]) -> None:
        pass

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        return [(-1.0 if "zebra" in q.lower() else 1.0) * len(t) for q, t in pairs]

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        return self.score_pairs([(query, t) for t in texts])

    def close(self) -> None:
        pass


def _run(tmp_path, quota: int):
    params = ToQuotaParams(
        column="requested_position",
        quota=quota,
        stages=[
            {
                "generate_queries": {
                    "mode": "whole_document",
                    "llm": "gen",
                    "prompt": "posir_generate_json",
                    "questions_per_call": 1,
                    "check_language": False,
                }
            },
            {"localize_spans": {"llm": "gen"}},
            {"span_contrast": {"rerankers": ["zebra"]}},
        ],
    )
    gen = MockLLMBackend("gen", OpenAIModelConfig(model="any-model"), seed=0)
    ctx = qc_ctx(tmp_path, llms={"gen": gen}, rerankers={"zebra": ZebraAverse()})
    out = GenerateToQuota(params).run(bench_of(DOCS, []), ctx)
    return out, ctx.stats


def test_rounds_stop_once_every_quota_is_met(tmp_path):
    out, stats = _run(tmp_path, quota=2)
    # Round 1 asks two documents per third; d0's and d1's final-third questions fail the
    # contrast, so round 2 asks only the final third, of the next two documents.
    assert stats["rounds"] == [
        {"round": 1, "calls": 6, "kept": 4, "yield": 0.6667},
        {"round": 2, "calls": 2, "kept": 2, "yield": 1.0},
    ]
    assert (stats["round_count"], stats["stopped"]) == (2, "quotas_met")
    assert stats["groups"] == {
        "beginning": {"asked": 2, "kept": 2, "left": 2},
        "end": {"asked": 4, "kept": 2, "left": 0},
        "middle": {"asked": 2, "kept": 2, "left": 2},
    }
    assert sorted(out.queries["requested_position"].to_list()) == ["beginning"] * 2 + ["end"] * 2 + ["middle"] * 2
    assert sorted(set(out.queries.filter(out.queries["requested_position"] == "end")["doc_id"])) == ["d2", "d3"]
    assert out.drops["reason"].to_list() == ["contrast_not_higher:zebra"] * 2
    assert out.qrels.height == out.queries.height == 6


def test_rounds_stop_when_the_short_group_runs_out_of_candidates(tmp_path):
    _, stats = _run(tmp_path, quota=3)
    # The final third keeps 1 of its first 3 calls; its last candidate brings it to 2 of 3.
    assert [(r["calls"], r["kept"]) for r in stats["rounds"]] == [(9, 7), (1, 1)]
    assert stats["stopped"] == "candidates_exhausted"
    assert stats["groups"]["end"] == {"asked": 4, "kept": 2, "left": 0}


def test_without_a_quota_the_target_is_the_reach_of_the_scarcest_third():
    stratum = ()
    tallies = {
        ("beginning", stratum): Tally(left=["b"] * 10, asked=5, kept=5),
        ("middle", stratum): Tally(left=["m"] * 10, asked=5, kept=15),
        ("end", stratum): Tally(left=[], asked=5, kept=10),
    }
    # The end third has nothing left: 10 is what balance would keep.
    assert targets(tallies, None, prior=3.0) == {stratum: 10}
    assert plan_round(tallies, None, prior=3.0, first_share=0.34) == {("beginning", stratum): 5}


@pytest.mark.parametrize(
    "stages",
    [
        [{"localize_spans": {"llm": "gen"}}],
        [{"generate_queries": {"mode": "extractive"}}],
        [{"generate_queries": {"mode": "chunked", "llm": "gen"}}, {"no_such_stage": {}}],
    ],
)
def test_the_wrapped_stages_start_with_llm_generation_and_exist(stages):
    with pytest.raises(ValueError):
        ToQuotaParams(stages=stages)


def test_a_wrapped_stage_naming_an_undeclared_model_is_a_recipe_problem(write_recipe):
    from builder.recipe.model import parse_recipe
    from builder.recipe.yaml_text import RecipeError

    path = write_recipe(
        "name: t\nsources: [{type: python_docs}]\nmodels: {gen: {model: m}}\nstages:\n"
        "  - generate_to_quota:\n      stages:\n        - generate_queries: {mode: whole_document, llm: nope}\n"
        "        - localize_spans: {llm: gen}\n"
    )
    with pytest.raises(RecipeError) as caught:
        parse_recipe(path)
    assert [(p.loc, p.message) for p in caught.value.problems] == [
        (("stages", 0, "generate_to_quota", "stages.0.llm"), "model 'nope' is not declared under models:")
    ]


class SameQuestionEverywhere(MockLLMBackend):
    """The mock, except that every chunk's answer is the same copper question."""

    def _answer(self, request):
        from builder.backends.llm.base import ChatResponse
        from builder.backends.llm.mock_prompts import identify

        if identify(request.messages) == "chunk_qa":
            question = {
                "question": "Why did engineers measure voltage drops along every copper line?",
                "answer": "Engineers measured voltage drops along every copper line.",
                "type": "simple",
            }
            return ChatResponse(json.dumps([question]), None, False, source="same")
        return super()._answer(request)


def test_a_later_round_repeating_an_earlier_rounds_question_drops_it_as_a_repeat(tmp_path):
    params = ToQuotaParams(
        column="chunk_tag",
        quota=1,
        rounds=2,
        stages=[
            {
                "generate_queries": {
                    "mode": "chunked",
                    "llm": "gen",
                    "chunk_size": 16,
                    "chunk_unit": "words",
                    "questions_per_call": 1,
                    "check_language": False,
                }
            },
        ],
    )
    gen = SameQuestionEverywhere("gen", OpenAIModelConfig(model="any-model"), seed=0)
    ctx = qc_ctx(tmp_path, llms={"gen": gen})
    bench = bench_of({"d0": CLEAN + MIDDLE + END + ZEBRA_END}, [])
    bench = bench.replace(corpus=bench.corpus.with_columns(summary=bench.corpus["text"]))
    out = GenerateToQuota(params).run(bench, ctx)
    # Every chunk brings the same question. Round 1 asks one chunk per third and keeps one
    # copy, tagged beginning; round 2 asks the middle and the end again, and gets the copy.
    assert [(r["calls"], r["kept"]) for r in ctx.stats["rounds"]] == [(3, 1), (2, 0)]
    assert out.queries.select("text", "chunk_tag").rows() == [
        ("Why did engineers measure voltage drops along every copper line?", "beginning")
    ]
    assert out.drops["reason"].to_list() == ["duplicate_query"] * 4
