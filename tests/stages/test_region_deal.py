"""Dealt regions for whole-document generation: each (lang, domain) group's calls are dealt
the thirds in turn, so small builds ask every third about equally often."""

import json
from collections import Counter

import polars as pl
import pytest

from builder.backends.llm import LLMCache, OpenAIBackend, OpenAIModelConfig
from builder.bench import Bench
from builder.stages.generate.deal import deal_regions
from builder.stages.generate.generate_queries import GenerateParams, GenerateQueries
from builder.stages.generate.whole_document import generate_whole_document
from tests.helpers import make_ctx

EQUAL = {"beginning": 1.0, "middle": 1.0, "end": 1.0}
SIX = [f"d{i}/g0" for i in range(6)]


def test_six_calls_over_equal_weights_are_dealt_two_to_each_third():
    assert deal_regions(SIX, EQUAL, seed=7) == {
        "d0/g0": "beginning",
        "d1/g0": "end",
        "d2/g0": "end",
        "d3/g0": "middle",
        "d4/g0": "middle",
        "d5/g0": "beginning",
    }


def test_a_remainder_goes_where_the_seeded_offset_says():
    # Seven calls: one third gets the seventh, and which one follows the seed.
    extra = {seed: Counter(deal_regions([*SIX, "d6/g0"], EQUAL, seed).values()).most_common(1)[0] for seed in range(6)}
    assert {count for _, count in extra.values()} == {3}
    assert {region for region, _ in extra.values()} == {"beginning", "middle", "end"}


def test_a_region_of_weight_zero_is_never_dealt():
    dealt = deal_regions(SIX[:5], {"beginning": 1.0, "middle": 0.0, "end": 1.0}, seed=7)
    assert dealt == {"d0/g0": "beginning", "d1/g0": "beginning", "d2/g0": "beginning", "d3/g0": "end", "d4/g0": "end"}


def test_unequal_weights_follow_a_smooth_round_robin():
    # 2:1:1 is the cycle beginning, middle, end, beginning; eight calls are two cycles.
    dealt = deal_regions([f"d{i}/g0" for i in range(8)], {"beginning": 2, "middle": 1, "end": 1}, seed=3)
    assert Counter(dealt.values()) == {"beginning": 4, "middle": 2, "end": 2}
    # Thirds given as shares that do not sum to one, or not exactly: 0.6 / 0.2 / 0.2 is 3:1:1.
    dealt = deal_regions(SIX[:5], {"beginning": 0.6, "middle": 0.2, "end": 0.2}, seed=3)
    assert Counter(dealt.values()) == {"beginning": 3, "middle": 1, "end": 1}


def test_the_deal_does_not_depend_on_the_order_of_the_calls():
    assert deal_regions(list(reversed(SIX)), EQUAL, seed=7) == deal_regions(SIX, EQUAL, seed=7)
    assert deal_regions(SIX, EQUAL, seed=8) != deal_regions(SIX, EQUAL, seed=7)


def test_adding_a_call_redeals_only_the_calls_ranked_after_it():
    before = deal_regions(SIX, EQUAL, seed=7)
    # Ranked by the seeded hash: d0, d3, d2, then the new d7, then d5, d4, d1.
    after = deal_regions([*SIX, "d7/g0"], EQUAL, seed=7)
    assert {c for c in SIX if before[c] != after[c]} == {"d5/g0", "d4/g0", "d1/g0"}
    assert deal_regions([*SIX, "d6/g0"], EQUAL, seed=7) == {**before, "d6/g0": "beginning"}  # ranked last


DOC = (
    "Alpha particles were studied by Rutherford in Manchester. They scatter strongly from gold foil. "
    "The middle part talks about quantum numbers and orbitals. Finally the neutron was found by Chadwick."
)


def _corpus(langs: list[str]) -> Bench:
    return Bench.of(
        pl.DataFrame(
            {
                "doc_id": [f"{lang}{i}" for i, lang in enumerate(langs)],
                "text": [f"{DOC} ({i})" for i in range(len(langs))],
                "lang": langs,
                "domain": ["science"] * len(langs),
            }
        )
    )


def _ctx(tmp_path, fake_openai):
    def reply(body):
        user = body["messages"][0]["content"]
        region = next(r for r in ("first", "middle", "final") if f"the {r} third" in user)
        return json.dumps(
            {"usable": True, "questions": [{"question": f"What does the {region} third say?", "answer": "A"}]}
        )

    srv = fake_openai(responder=reply)
    backend = OpenAIBackend(
        "gen", OpenAIModelConfig(model="m", base_url=srv.base_url, backoff_initial_s=0.01), LLMCache.memory()
    )
    return make_ctx(tmp_path, seed=5, label="02_generate_queries", llms={"gen": backend}), srv


def _region_word(request) -> str:
    user = request["messages"][0]["content"]
    return next(r for r in ("first", "middle", "final") if f"the {r} third" in user)


def test_a_dealt_build_asks_each_language_every_third_as_evenly_as_its_calls_allow(tmp_path, fake_openai):
    bench = _corpus(["en"] * 5 + ["de"] * 4)
    ctx, srv = _ctx(tmp_path, fake_openai)
    params = GenerateParams(llm="gen", questions_per_call=1, check_language=False, region_draw="dealt")
    GenerateQueries(params).run(bench, ctx)
    lang_of = dict(bench.corpus.select("text", "lang").iter_rows())
    asked = Counter(
        (next(lang for text, lang in lang_of.items() if text in r["messages"][0]["content"]), _region_word(r))
        for r in srv.requests
    )
    # Five English calls and four German ones: each language's thirds one apart at most,
    # the remainders where each group's seeded offset puts them.
    assert asked == {
        ("en", "first"): 2,
        ("en", "middle"): 1,
        ("en", "final"): 2,
        ("de", "first"): 2,
        ("de", "middle"): 1,
        ("de", "final"): 1,
    }


def test_a_corpus_without_language_or_domain_columns_is_dealt_as_one_group(tmp_path, fake_openai):
    corpus = pl.DataFrame({"doc_id": [f"d{i}" for i in range(4)], "text": [f"{DOC} ({i})" for i in range(4)]})
    ctx, srv = _ctx(tmp_path, fake_openai)
    params = GenerateParams(llm="gen", questions_per_call=1, calls_per_doc=3, region_draw="dealt")
    outcome = generate_whole_document(corpus, ctx, params, lambda texts: None)
    assert Counter(_region_word(r) for r in srv.requests) == {"first": 4, "middle": 4, "final": 4}
    assert Counter(d.requested_position for d in outcome.drafts) == {"beginning": 4, "middle": 4, "end": 4}


def test_region_draw_is_independent_unless_asked_and_takes_only_its_two_values():
    assert GenerateParams(llm="gen").region_draw == "independent"
    # Left out of the stage's settings while it is the default, so earlier fingerprints hold.
    assert "region_draw" not in GenerateParams(llm="gen").model_dump(mode="json")
    assert GenerateParams(llm="gen", region_draw="dealt").model_dump(mode="json")["region_draw"] == "dealt"
    with pytest.raises(ValueError):
        GenerateParams(llm="gen", region_draw="shuffled")
