"""A budget: the build stops asking before its limit, keeps what it got, says so in the
terminal, stats.json and the card, and a rerun with more budget asks only what is left."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from builder.backends.llm import ChatRequest
from builder.backends.llm.budget import SpendGate
from builder.backends.llm.config import Price
from builder.cli import app
from builder.publish.hub import PushError, push
from builder.recipe.model import parse_recipe
from builder.recipe.yaml_text import RecipeError
from builder.run.budget import budget_overrides
from builder.run.outcome import EmptyResult
from builder.run.runner import Runner, RunOptions
from tests.fixtures.scripted_llm import scripted_llm
from tests.test_build_llm import RECIPE

FULL_CALLS = 75  # the recipe's requests: summaries 16, generation 32, localization 27


def ask(text: str) -> ChatRequest:
    return ChatRequest.of([{"role": "user", "content": text}])


def test_the_gate_admits_exactly_the_calls_of_its_limit_and_then_stays_shut():
    gate = SpendGate(calls=2)
    gate.stage = "03_generate_queries"
    first, second = gate.admit(ask("a"), 10, None), gate.admit(ask("b"), 10, None)
    assert first is not None and second is not None
    assert gate.admit(ask("c"), 10, None) is None
    assert gate.stopped_at == "03_generate_queries" and gate.refused == 1
    refusal = gate.refusal()
    assert refusal.reason == "budget_spent" and refusal.transport and not refusal.ok


def test_tokens_and_money_count_each_request_at_its_worst_until_it_is_answered():
    from builder.backends.llm.base import ChatResponse

    price = Price(input=1.0, output=2.0)
    gate = SpendGate(tokens=60, usd=1.0)
    # 20 characters -> 10 tokens assumed before any answer, plus max_tokens 20: 30 at worst.
    ticket = gate.admit(ask("x" * 20), 20, price)
    assert ticket is not None and gate.admit(ask("y" * 20), 20, price) is not None
    gate.settle(ticket, ask("x" * 20), ChatResponse("ok", None, False, prompt_tokens=5, completion_tokens=3), price)
    assert (gate.spent.calls, gate.spent.tokens) == (1, 8)
    assert gate.spent.usd == pytest.approx((5 * 1.0 + 3 * 2.0) / 1e6)
    # 8 spent + 30 in flight + 30 for this one would pass 60: refused, though it might have fit.
    assert gate.admit(ask("z" * 20), 20, price) is None


@pytest.mark.parametrize(
    ("budget", "message"),
    [
        ("{calls: 0}", "budget.calls: Input should be greater than or equal to 1"),
        ("{dollars: 3}", "budget.dollars: unknown key 'dollars'"),
        ("{usd: 1.5}", "budget.usd: model 'gen' has no price"),
    ],
)
def test_a_bad_budget_names_its_recipe_line(write_recipe, budget, message):
    text = RECIPE.replace("BASE", "http://127.0.0.1:9/v1") + f"budget: {budget}\n"
    with pytest.raises(RecipeError) as caught:
        parse_recipe(write_recipe(text))
    line = text.splitlines().index(f"budget: {budget}") + 1
    assert f":{line}: {message}" in caught.value.render()


def test_the_budget_flag_becomes_recipe_settings_and_names_itself_when_wrong():
    assert budget_overrides("calls=40,usd=0.5") == ["budget.calls=40", "budget.usd=0.5"]
    for bad, why in (
        ("calls", "expected name=value"),
        ("calls=x", "calls must be a whole number"),
        ("coins=3", "unknown limit 'coins' (calls, tokens, usd)"),
    ):
        with pytest.raises(ValueError, match=re.escape(why)):
            budget_overrides(bad)
    result = CliRunner().invoke(app, ["build", "quickstart", "--budget", "calls=many"])
    assert result.exit_code == 2
    assert result.output.strip() == "--budget 'calls=many': calls must be a whole number"


def _build(path: Path, root: Path, budget: int, console: Console | None = None) -> Runner:
    loaded = parse_recipe(path, [f"budget.calls={budget}"])
    runner = Runner(loaded, RunOptions(run_root=root / "runs", out_dir=root / "out"), console)
    runner.run()
    return runner


@pytest.mark.timeout(300)
def test_a_budget_stops_the_build_and_a_larger_one_resumes_without_asking_again(write_recipe, fake_openai, tmp_path):
    srv = fake_openai(responder=scripted_llm)
    path = write_recipe(RECIPE.replace("BASE", srv.base_url))
    console = Console(record=True, width=400)
    _build(path, tmp_path, 60, console)
    assert len(srv.requests) == 60  # the gate let exactly its 60 calls through
    said = [line for line in console.export_text().splitlines() if "budget" in line]
    assert said == [
        "04_localize_spans: budget spent (calls 60 of 60): 15 requests not sent; the stages keep what "
        "they got and the output is marked incomplete; run again with a higher budget to resume "
        "(answers already received are not asked again)"
    ]
    out = tmp_path / "out"
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert stats["budget"]["limit"] == {"calls": 60}
    assert stats["budget"]["spent"]["calls"] == 60 and stats["budget"]["spent"]["tokens"] > 0
    assert stats["budget"]["stopped_at_stage"] == "04_localize_spans" and stats["budget"]["not_sent"] == 15
    drops = Counter(r["reason"] for r in stats["drop_table"] if r["stage"] == "04_localize_spans")
    assert drops["budget_spent"] > 0
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "**Incomplete: the build stopped at its budget** in `04_localize_spans`" in card
    with pytest.raises(PushError, match="stopped at its budget"):
        push(out, "org/name", dry_run=True)

    first = Counter(json.dumps(b, sort_keys=True) for b in srv.requests)
    _build(path, tmp_path, 100)
    again = Counter(json.dumps(b, sort_keys=True) for b in srv.requests[60:])
    assert len(srv.requests) == FULL_CALLS  # only the 15 requests never answered were sent
    assert not set(first) & set(again)
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert stats["budget"]["stopped_at_stage"] is None and stats["budget"]["spent"]["calls"] == 15
    assert "Incomplete" not in (out / "README.md").read_text(encoding="utf-8")

    clean = fake_openai(responder=scripted_llm)
    whole = tmp_path / "whole"
    Runner(
        parse_recipe(write_recipe(RECIPE.replace("BASE", clean.base_url))),
        RunOptions(run_root=whole / "runs", out_dir=whole / "out"),
    ).run()
    assert len(clean.requests) == FULL_CALLS
    assert (out / "queries.jsonl").read_bytes() == (whole / "out" / "queries.jsonl").read_bytes()


@pytest.mark.timeout(300)
def test_a_budget_spent_before_any_query_is_placed_writes_nothing_and_says_why(write_recipe, fake_openai, tmp_path):
    srv = fake_openai(responder=scripted_llm)
    path = write_recipe(RECIPE.replace("BASE", srv.base_url))
    with pytest.raises(EmptyResult, match="the budget was spent in 03_generate_queries"):
        _build(path, tmp_path, 30, Console(record=True, width=400))
    assert len(srv.requests) == 30 and not (tmp_path / "out").exists()


@pytest.mark.timeout(300)
def test_a_mock_build_meters_its_calls_so_a_budget_can_be_tried_offline(write_recipe, tmp_path):
    path = write_recipe(RECIPE.replace("BASE", "http://127.0.0.1:9/v1"))

    def build(root: Path, budget: int, console: Console | None = None) -> dict:
        loaded = parse_recipe(path, [f"budget.calls={budget}"])
        Runner(loaded, RunOptions(run_root=root / "runs", out_dir=root / "out", mock_llm=True), console).run()
        return json.loads((root / "out" / "stats.json").read_text(encoding="utf-8"))["budget"]

    whole = build(tmp_path / "whole", 1000)["spent"]["calls"]
    assert whole > 60
    console = Console(record=True, width=400)
    first = build(tmp_path, 60, console)
    assert first["spent"]["calls"] == 60 and first["stopped_at_stage"] is not None and first["not_sent"] > 0
    assert any("budget spent (calls 60 of 60)" in line for line in console.export_text().splitlines())
    rest = build(tmp_path, 1000)
    # The rerun answers from the mock's cache what it made before and makes only the rest.
    assert rest["stopped_at_stage"] is None and rest["spent"]["calls"] == whole - 60


def _ledger(out: Path) -> dict:
    llm = json.loads((out / "stats.json").read_text(encoding="utf-8"))["llm"]
    fields = ("calls", "cache_hits", "prompt_tokens", "completion_tokens", "cached_tokens", "usd")
    return {r["stage"]: {f: r.get(f) for f in fields} for r in llm["stages"]} | {
        "total": {f: llm["total"].get(f) for f in fields}
    }


@pytest.mark.timeout(300)
def test_after_a_budget_stop_and_resume_the_ledger_counts_what_the_build_paid(write_recipe, fake_openai, tmp_path):
    """Answers the stopped run paid for are paid answers of the build, not free cache hits:
    the resumed build's ledger is the ledger of the same build made in one go."""
    price = ["models.gen.price={input: 0.15, cached_input: 0.075, output: 0.6}"]
    srv = fake_openai(responder=scripted_llm)
    path = write_recipe(RECIPE.replace("BASE", srv.base_url))
    for budget in (60, 100):
        loaded = parse_recipe(path, [f"budget.calls={budget}", *price])
        Runner(loaded, RunOptions(run_root=tmp_path / "runs", out_dir=tmp_path / "out")).run()
    clean = fake_openai(responder=scripted_llm)
    whole = tmp_path / "whole"
    Runner(
        parse_recipe(write_recipe(RECIPE.replace("BASE", clean.base_url)), price),
        RunOptions(run_root=whole / "runs", out_dir=whole / "out"),
    ).run()
    one_go = _ledger(whole / "out")
    assert one_go["total"]["calls"] == FULL_CALLS
    assert _ledger(tmp_path / "out") == one_go
