"""The ledger: a recipe's per-model prices give money per stage and per kept query in
stats.json and the card, and `plan` estimates money and the cacheable share beforehand."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest
from typer.testing import CliRunner

from builder.backends.llm.config import Price
from builder.cli import app
from builder.recipe.model import parse_recipe
from builder.run.runner import Runner, RunOptions
from builder.testing.openai_server import FakeOpenAIServer
from tests.conftest import REPO

PRICE = "{input: 2.0, cached_input: 0.5, output: 8.0}"


def _benchmark():
    spec = importlib.util.spec_from_file_location("prefix_share_benchmark", REPO / "benchmarks" / "prefix_share.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_a_price_bills_cached_prompt_tokens_at_their_own_rate():
    price = Price(input=2.0, cached_input=0.5, output=8.0)
    assert price.usd(1_000_000, 400_000, 100_000) == pytest.approx(0.6 * 2.0 + 0.4 * 0.5 + 0.1 * 8.0)
    assert Price(input=1.0, output=1.0).usd(10, 10, 0) == pytest.approx(1e-5)  # no cached rate: full price


@pytest.mark.timeout(300)
def test_stats_and_card_report_money_per_stage_and_per_kept_query(tmp_path, monkeypatch):
    bench = _benchmark()
    monkeypatch.setenv("PREFIX_SHARE_KEY", "local")
    with FakeOpenAIServer(responder=bench.mock_responder) as srv:
        sets = bench.overrides("posir", srv.base_url, bench.ARTICLES, 6)
        sets += [f"models.gen.price={PRICE}", f"models.judge.price={PRICE}"]
        result = Runner(parse_recipe(REPO / "recipes" / "posir.yaml", sets),
                        RunOptions(run_root=tmp_path / "runs", out_dir=tmp_path / "out")).run()
    llm = json.loads((result.out_dir / "stats.json").read_text(encoding="utf-8"))["llm"]
    rows = {r["stage"].split("_", 1)[1]: r for r in llm["stages"]}
    assert set(rows) == {"generate_queries", "localize_spans", "llm_relevance"}
    for r in rows.values():  # the test server reports no cache hits: every prompt token at the input rate
        assert r["usd"] == pytest.approx((r["prompt_tokens"] * 2.0 + r["completion_tokens"] * 8.0) / 1e6, abs=1e-6)
    kept = result.bench.queries.height
    assert kept > 0 and llm["kept_queries"] == kept
    assert llm["per_kept_query"]["usd"] == pytest.approx(llm["total"]["usd"] / kept, rel=1e-3)
    assert llm["per_kept_query"]["calls"] == round(llm["total"]["calls"] / kept, 2)
    relevance = next(s for s in result.stage_stats if s.stage.endswith("llm_relevance"))
    assert rows["llm_relevance"]["yield"] == pytest.approx(relevance.queries_out / relevance.queries_in, abs=1e-4)
    card = (result.out_dir / "README.md").read_text(encoding="utf-8")
    assert f"| per kept query ({kept} kept) |" in card
    assert "Prompts open with the document" in card


def test_plan_shows_money_per_stage_and_the_cacheable_share(monkeypatch):
    bench = _benchmark()
    sets = bench.overrides("posir", "http://127.0.0.1:9/v1", bench.ARTICLES, 40)
    sets += [f"models.gen.price={PRICE}"]
    args = ["plan", str(REPO / "recipes" / "posir.yaml"), *(a for s in sets for a in ("--set", s))]
    shown = CliRunner().invoke(app, args, env={"COLUMNS": "250"})
    assert shown.exit_code == 0, shown.output
    lines = {line.split("│")[1].strip(): line for line in shown.output.splitlines() if line.count("│") > 5}
    assert "$" in lines["02_generate_queries"] and "$" in lines["03_localize_spans"]
    assert "?" in lines["05_llm_relevance"]  # the judge has no price: its money is unknown, not zero
    assert "cacheable share of prompt tokens: 0." in shown.output
    assert "set `price: {input, cached_input, output}`" in shown.output
