"""`plan` against a real build: each stage passes on the queries it is expected to keep
(a previous run's measured yields, else FineWeb-PosQ's funnel), and false_negatives'
judges are planned, so the planned calls come close to what a build counts."""

from __future__ import annotations

import json

import pytest

from builder.recipe.model import parse_recipe
from builder.run.plan import make_plan
from builder.run.runner import Runner, RunOptions
from builder.run.yields import PAPER_FUNNEL
from builder.stages.base import Flow
from builder.stages.qc.false_negatives import PAPER_JUDGED_PER_QUERY, FalseNegatives
from tests.fixtures.scripted_llm import scripted_llm
from tests.test_build_llm import RECIPE

# Planned calls may differ from counted ones by this share: the estimates count whole
# requests from mean document lengths and batch sizes, not from each document.
TOLERANCE = 0.15


@pytest.mark.timeout(300)
def test_plan_with_a_previous_runs_yields_comes_within_tolerance_of_the_build(write_recipe, fake_openai, tmp_path):
    srv = fake_openai(responder=scripted_llm)
    loaded = parse_recipe(write_recipe(RECIPE.replace("BASE", srv.base_url)))
    before = {r.label: r for r in make_plan(loaded, None, tmp_path / "runs")}
    assert all(r.expected is None for r in before.values())  # no run yet, no paper figure for these stages
    Runner(loaded, RunOptions(run_root=tmp_path / "runs", out_dir=tmp_path / "out")).run()
    stats = json.loads((tmp_path / "out" / "stats.json").read_text(encoding="utf-8"))
    counted = {r["stage"]: r["calls"] for r in stats["llm"]["stages"]}
    after = {r.label: r for r in make_plan(loaded, None, tmp_path / "runs")}
    measured = after["03_generate_queries"].expected
    assert measured is not None and measured.source.startswith("measured in")
    for label, calls in counted.items():
        assert abs(after[label].estimate.calls - calls) <= TOLERANCE * calls, (
            label,
            after[label].estimate.calls,
            calls,
        )
    # Generation's losses now reach localization: fewer planned requests than without them.
    assert after["04_localize_spans"].flow_in.queries < before["04_localize_spans"].flow_in.queries
    print({k: (before[k].estimate.calls, after[k].estimate.calls, counted.get(k)) for k in after})


def test_false_negative_judges_are_planned_from_the_share_of_queries_whose_candidates_reach_them():
    stage = FalseNegatives(
        FalseNegatives.Params(mode="fineweb_posq", rerankers=["bm25"], judges=["a", "b", "c"], min_votes=2)
    )
    flow = Flow(docs=100, queries=26_356, doc_tokens=500.0)
    _, est = stage.plan(flow)
    assert est.calls == 854 * 3  # the paper's 854 candidate pairs, each judge at most once
    assert est.prompt_tokens == 854 * 3 * 800
    assert stage.estimate(flow, 0.1).calls == 2636 * 3  # a previous run's own share
    posir = FalseNegatives(FalseNegatives.Params(rerankers=["bm25"]))
    assert posir.plan(flow)[1].calls == 0
    assert PAPER_JUDGED_PER_QUERY == pytest.approx(0.0324, abs=1e-4)
    assert PAPER_FUNNEL[("segment_agreement", "rerankers")] == pytest.approx(0.4401, abs=1e-4)
