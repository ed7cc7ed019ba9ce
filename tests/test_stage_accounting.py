"""in + added = out + dropped for every stage and kind of row, through a real build: a
generation call whose answer never parses is a query made and dropped at once."""

from __future__ import annotations

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
    assert (generated.queries_in, generated.queries_added, generated.queries_out, generated.queries_dropped) \
        == (0, 29, 16, 13)
    for r in result.stage_stats:
        for kind in ("docs", "queries"):
            got, added, out, dropped = (getattr(r, f"{kind}_{part}") or 0 for part in ("in", "added", "out", "dropped"))
            assert got + added == out + dropped, (r.stage, kind)
