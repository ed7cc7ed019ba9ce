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
from tests.conftest import REPO
from tests.support.openai_server import FakeOpenAIServer

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
        result = Runner(
            parse_recipe(REPO / "recipes" / "posir.yaml", sets),
            RunOptions(run_root=tmp_path / "runs", out_dir=tmp_path / "out"),
        ).run()
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
    groups = llm["by_group"]
    assert sum(g["kept"] for g in groups.values()) == kept
    assert sum(g["spent"]["calls"] for g in groups.values()) == pytest.approx(llm["total"]["calls"], abs=0.05)
    assert sum(g["spent"]["usd"] for g in groups.values()) == pytest.approx(llm["total"]["usd"], abs=1e-5)
    generation = next(s for s in result.stage_stats if s.stage.endswith("generate_queries"))
    assert sum(generation.figures["asked_by_group"].values()) == generation.queries_out
    assert "| group | kept | calls per kept query |" in card


def test_plan_shows_money_per_stage_and_the_cacheable_share(monkeypatch):
    bench = _benchmark()
    sets = bench.overrides("posir", "http://127.0.0.1:9/v1", bench.ARTICLES, 40)
    sets += [f"models.gen.price={PRICE}", "models.judge.price=null"]
    args = ["plan", str(REPO / "recipes" / "posir.yaml"), *(a for s in sets for a in ("--set", s))]
    shown = CliRunner().invoke(app, args, env={"COLUMNS": "250"})
    assert shown.exit_code == 0, shown.output
    lines = {line.split("│")[1].strip(): line for line in shown.output.splitlines() if line.count("│") > 5}
    assert "$" in lines["02_generate_queries"] and "$" in lines["03_localize_spans"]
    assert "?" in lines["05_llm_relevance"]  # the judge has no price: its money is unknown, not zero
    assert "cacheable share of prompt tokens: 0." in shown.output
    assert "set `price: {input, cached_input, output}`" in shown.output


def _queries(rows):
    import polars as pl

    from builder.bench import Bench

    corpus = pl.DataFrame(
        {"doc_id": ["d1"], "title": ["t"], "text": ["x " * 600], "lang": ["en"], "domain": ["web"], "n_tokens": [600]}
    )
    queries = pl.DataFrame(
        rows,
        schema={
            "query_id": pl.Utf8,
            "text": pl.Utf8,
            "doc_id": pl.Utf8,
            "lang": pl.Utf8,
            "requested_position": pl.Utf8,
            "position_tag": pl.Utf8,
        },
    )
    qrels = queries.select("query_id", "doc_id", score=pl.lit(1))
    return Bench.of(corpus=corpus, queries=queries, qrels=qrels)


def _q(qid, requested, tag=None):
    return {
        "query_id": qid,
        "text": qid,
        "doc_id": "d1",
        "lang": "en",
        "requested_position": requested,
        "position_tag": tag,
    }


def test_each_llm_stage_counts_the_queries_it_handled_per_position_group():
    from builder.records.group_ledger import asked_by_group

    made = _queries([_q("a", "first"), _q("b", "first"), _q("c", "final"), _q("d", "middle")])
    # Localization placed a and d (b's answer lay in the middle); c was dropped unplaced.
    placed = _queries([_q("a", "first", "beginning"), _q("b", "first", "middle"), _q("d", "middle", "middle")])
    assert asked_by_group(made, placed) == {"beginning": 1, "middle": 2, "end": 1}
    assert asked_by_group(_queries([]), made) == {"beginning": 2, "middle": 1, "end": 1}


def test_stats_share_each_stages_cost_among_the_groups_it_served_per_kept_query():
    from builder.publish.stats import compute_stats

    kept = _queries([_q("a", "first", "beginning"), _q("b", "first", "middle"), _q("d", "middle", "middle")])
    stages = [
        {
            "stage": "02_summarize",
            "queries_in": 0,
            "queries_out": 0,
            "llm": {"calls": 6, "prompt_tokens": 600, "completion_tokens": 60, "usd": 0.03},
        },
        {
            "stage": "03_generate_queries",
            "queries_in": 0,
            "queries_out": 4,
            "queries_added": 6,
            "queries_dropped": 2,
            "asked_by_group": {"beginning": 2, "middle": 1, "end": 1},
            "llm": {"calls": 4, "prompt_tokens": 800, "completion_tokens": 80, "usd": 0.04},
        },
        {
            "stage": "04_localize_spans",
            "queries_in": 4,
            "queries_out": 3,
            "queries_added": 0,
            "asked_by_group": {"beginning": 1, "middle": 2, "end": 1},
            "llm": {"calls": 4, "prompt_tokens": 400, "completion_tokens": 40, "usd": 0.02},
        },
    ]
    llm = compute_stats(kept, {"stages": stages})["llm"]
    by_group = llm["by_group"]
    # beginning: a third of the summaries (shared by kept query), half of generation, a quarter of localization.
    spent = {
        "calls": 6 / 3 + 4 / 2 + 4 / 4,
        "prompt_tokens": 600 / 3 + 800 / 2 + 400 / 4,
        "completion_tokens": 60 / 3 + 80 / 2 + 40 / 4,
        "cached_tokens": 0.0,
    }
    usd = 0.03 / 3 + 0.04 / 2 + 0.02 / 4
    assert by_group["beginning"] == {
        "kept": 1,
        "spent": {**{k: round(v, 2) for k, v in spent.items()}, "usd": round(usd, 6)},
        "per_kept_query": {**{k: round(v, 2) for k, v in spent.items()}, "usd": round(usd, 6)},
    }
    middle_calls = 2 * 6 / 3 + 4 / 4 + 2 * 4 / 4
    assert by_group["middle"]["kept"] == 2
    assert by_group["middle"]["per_kept_query"]["calls"] == round(middle_calls / 2, 2)
    # The end third was paid for (generation and localization) and kept nothing.
    assert by_group["end"]["kept"] == 0 and by_group["end"]["per_kept_query"] is None
    assert by_group["end"]["spent"]["calls"] == round(4 / 4 + 4 / 4, 2)
    assert sum(g["spent"]["calls"] for g in by_group.values()) == pytest.approx(14)
    # Every stage's yield: kept over what it handled (its input plus what it made).
    assert [r["yield"] for r in llm["stages"]] == [None, round(4 / 6, 4), 0.75]
    assert [r["yield"] for r in compute_stats(kept, {"stages": stages})["stage_table"]] == [None, round(4 / 6, 4), 0.75]


def test_batch_tokens_cost_the_batch_rates_and_an_unset_batch_rate_is_the_synchronous_one():
    price = Price(input=2.0, cached_input=0.5, output=8.0, batch_input=1.0, batch_output=4.0)
    assert price.usd(1_000_000, 400_000, 100_000, batch=True) == pytest.approx(0.6 * 1.0 + 0.4 * 0.5 + 0.1 * 4.0)
    assert price.rates(batch=True) == (1.0, 0.5, 4.0)
    assert Price(input=2.0, output=8.0, batch_input=1.0).rates(batch=True) == (1.0, 1.0, 8.0)
    unpriced = Price(input=2.0, cached_input=0.5, output=8.0)  # no batch price: not free, the synchronous rates
    assert unpriced.rates(batch=True) == unpriced.rates() and not unpriced.has_batch
    # A batch rate is no part of a fingerprint: the model's settings serialize without the price.
    from builder.backends.llm.config import OpenAIModelConfig

    with_batch = OpenAIModelConfig(model="m", price=price).model_dump(mode="json")
    assert with_batch == OpenAIModelConfig(model="m").model_dump(mode="json")


def test_the_ledger_prices_batch_answers_at_the_batch_rates_and_says_what_synchronous_would_cost():
    from builder.backends.llm.base import LLMUsage
    from builder.publish.stats import compute_stats
    from builder.run.ledger import usage_usd

    models = {"gen": type("M", (), {"price": Price(input=2.0, output=8.0, batch_input=1.0, batch_output=4.0)})()}
    used = LLMUsage(
        calls=10,
        prompt_tokens=10_000,
        completion_tokens=1_000,
        batch_calls=6,
        batch_prompt_tokens=6_000,
        batch_completion_tokens=600,
    )
    paid = (4_000 * 2.0 + 400 * 8.0 + 6_000 * 1.0 + 600 * 4.0) / 1e6
    assert usage_usd(models, {"gen": used}) == pytest.approx(paid)
    assert usage_usd(models, {"gen": used}, synchronous=True) == pytest.approx((10_000 * 2.0 + 1_000 * 8.0) / 1e6)
    kept = _queries([_q("a", "first", "beginning")])
    record = {**used.as_record(), "usd": round(paid, 6), "usd_synchronous": 0.028}
    stages = [
        {"stage": "02_generate_queries", "queries_in": 0, "queries_out": 1, "queries_added": 1, "llm": record},
        {"stage": "03_localize_spans", "queries_in": 1, "queries_out": 1, "llm": {"calls": 2, "usd": 0.001}},
    ]
    llm = compute_stats(kept, {"stages": stages})["llm"]
    assert llm["stages"][0]["batch_calls"] == 6 and "batch_calls" not in llm["stages"][1]
    assert llm["total"]["usd"] == round(paid + 0.001, 6)
    assert llm["total"]["usd_synchronous"] == round(0.028 + 0.001, 6)  # a stage without batch: what it paid
    assert llm["total"]["batch_calls"] == 6
    # Without a batch answer, stats.json stays as it was.
    plain = compute_stats(kept, {"stages": [stages[1]]})["llm"]
    assert "usd_synchronous" not in plain["total"] and "batch_calls" not in plain["total"]


def test_plan_shows_synchronous_and_batch_money_side_by_side():
    bench = _benchmark()
    sets = bench.overrides("posir", "http://127.0.0.1:9/v1", bench.ARTICLES, 40)
    sets += [
        f"models.gen.price={PRICE}",
        "models.judge.price={input: 2.0, output: 8.0, batch_input: 1.0, batch_output: 4.0}",
    ]
    args = ["plan", str(REPO / "recipes" / "posir.yaml"), *(a for s in sets for a in ("--set", s))]
    shown = CliRunner().invoke(app, args, env={"COLUMNS": "250"})
    assert shown.exit_code == 0, shown.output
    lines = {line.split("│")[1].strip(): line.split("│") for line in shown.output.splitlines() if line.count("│") > 5}
    header = next(line.split("┃") for line in shown.output.splitlines() if "┃ stage" in line)
    sync, batch = [i for i, h in enumerate(header) if h.strip() in ("USD", "USD batch")]

    def money(label, column):
        return float(lines[label][column].strip().lstrip("$").replace(",", ""))

    # gen names no batch price: its batch column is its synchronous one, not free.
    assert money("02_generate_queries", sync) == money("02_generate_queries", batch) > 0
    assert money("05_llm_relevance", batch) < money("05_llm_relevance", sync)
    assert money("total", batch) < money("total", sync)
    assert "gen name(s) no batch price" in shown.output


def test_the_card_says_what_was_paid_and_what_synchronous_would_have_cost():
    from builder.publish.card import card_environment

    template = (REPO / "data_cards" / "default.md.j2").read_text(encoding="utf-8")
    start = template.index("{% if stats.llm.total.usd_synchronous")
    section = template[start : template.index("{% endif %}", start) + len("{% endif %}")]
    env = card_environment()
    total = {"usd": 0.0123, "usd_synchronous": 0.0246, "batch_calls": 6, "calls": 10}
    shown = env.from_string(section).render(stats={"llm": {"total": total}})
    assert "Paid: 0.0123 USD, 6 of the 10 calls answered through the provider's batch API" in shown
    assert "asked one by one would have cost 0.0246 USD" in shown
    plain = {"usd": 0.0123, "calls": 10}  # no batch answer: the card says nothing of it
    assert env.from_string(section).render(stats={"llm": {"total": plain}}).strip() == ""
