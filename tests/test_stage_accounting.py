"""in + added = out + dropped for every stage and kind of row, through a real build: a
generation call whose answer never parses is a query made and dropped at once."""

from __future__ import annotations

import polars as pl
import pytest

from builder.backends.llm.base import ChatResponse, LLMUsage
from builder.recipe.model import parse_recipe
from builder.run.runner import Runner, RunOptions
from tests.fixtures.scripted_llm import scripted_llm

RECIPE = """
name: accounting
seed: 3
sources: [{type: python_docs, domain: python}]
models:
  gen: {model: scripted, base_url: "BASE", max_concurrency: 2, backoff_initial_s: 0.01,
        backoff_max_s: 0.05, max_retries: 1}
stages:
  - sample_by_length: {buckets: [200, 800, 4000], weights: [1, 1], n_docs: 6}
  - generate_queries: {llm: gen, questions_per_call: 2, calls_per_doc: 3}
  - localize_spans: {llm: gen, questions_per_call: 3}
"""


def _final_third_fails(body: dict) -> str:
    user = [m["content"] for m in body["messages"] if m["role"] == "user"][0]
    return "not a question list" if "on the final third" in user else scripted_llm(body)


def test_every_stage_adds_up_with_failed_calls_counted(write_recipe, fake_openai, tmp_path):
    srv = fake_openai(responder=_final_third_fails)
    path = write_recipe(RECIPE.replace("BASE", srv.base_url))
    result = Runner(parse_recipe(path), RunOptions(run_root=tmp_path / "runs", out_dir=tmp_path / "out")).run()
    records = {r.stage: r for r in result.stage_stats}
    generated = records["02_generate_queries"]
    # Seven calls drew the final third and failed; each is a placeholder query, dropped.
    assert generated.dropped == {"llm_unparseable": 7, "duplicate_query": 6}
    assert (generated.queries_in, generated.queries_added, generated.queries_out, generated.queries_dropped) == (
        0,
        29,
        16,
        13,
    )
    for r in result.stage_stats:
        for kind in ("docs", "queries"):
            got, added, out, dropped = (getattr(r, f"{kind}_{part}") or 0 for part in ("in", "added", "out", "dropped"))
            assert got + added == out + dropped, (r.stage, kind)


def test_a_failed_build_says_what_may_help_for_the_reason_that_removed_the_most():
    from builder.backends.llm import LLMUsage
    from builder.bench import Bench
    from builder.records.stage_record import StageRecord
    from builder.run.outcome import EmptyResult, check_result

    empty = Bench.of(corpus=pl.DataFrame({"doc_id": ["d1"], "text": ["t"]}))
    stages = [StageRecord(stage="03_localize_spans", docs_in=1, queries_in=3, dropped={"span_not_found": 2})]
    with pytest.raises(EmptyResult) as failed:
        check_result(empty, stages, LLMUsage(calls=3))
    assert (
        "03_localize_spans removed the most: 2 of 4 rows (span_not_found 2); what may help: a larger model "
        "that copies passages verbatim, or localize_spans with methods [exact, normalized, fuzzy] and a lower "
        "fuzzy_min_score"
    ) in str(failed.value)


def test_a_build_whose_queries_ran_out_names_where_as_well():
    from builder.backends.llm import LLMUsage
    from builder.bench import Bench
    from builder.records.stage_record import StageRecord
    from builder.run.outcome import EmptyResult, check_result

    empty = Bench.of(corpus=pl.DataFrame({"doc_id": ["d1"], "text": ["t"]}))
    stages = [
        StageRecord(
            stage="02_generate_queries",
            docs_in=40,
            docs_out=14,
            queries_in=0,
            queries_out=27,
            dropped={"doc_unusable": 26, "duplicate_query": 4},
        ),
        StageRecord(
            stage="03_localize_spans",
            docs_in=14,
            docs_out=14,
            queries_in=27,
            queries_out=0,
            dropped={"span_not_found": 27},
        ),
    ]
    with pytest.raises(EmptyResult) as failed:
        check_result(empty, stages, LLMUsage(calls=50))
    message = str(failed.value)
    assert "02_generate_queries removed the most: 30 of 40 rows (doc_unusable 26, duplicate_query 4)" in message
    assert "; 03_localize_spans removed the last 27 queries (span_not_found 27); what may help: a larger" in message


def test_batch_answers_are_counted_apart_and_left_out_of_stats_while_none_came():
    usage = LLMUsage()
    usage.record([ChatResponse("a", None, cached=False, prompt_tokens=10, completion_tokens=2)])
    assert "batch_calls" not in usage.as_record()
    usage.record([ChatResponse("b", None, cached=False, prompt_tokens=7, completion_tokens=3, batch=True)])
    record = usage.as_record()
    assert (record["calls"], record["prompt_tokens"]) == (2, 17)
    assert (record["batch_calls"], record["batch_prompt_tokens"], record["batch_completion_tokens"]) == (1, 7, 3)
    assert (usage - LLMUsage()).batch_calls == 1
