"""Batch mode end to end: the PosIR- and FineWeb-PosQ-style recipes built through the
local server's batch endpoints write what the synchronous build writes, and a run killed
between submit and collect, or a batch that expires, resumes without asking twice."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path

import polars as pl
import pytest
import yaml

from builder.backends.llm.batch_book import BOOK_NAME, BatchPending
from builder.recipe.model import parse_recipe
from builder.run.runner import Runner, RunOptions
from tests.conftest import REPO
from tests.support.openai_batches import BatchScript
from tests.support.openai_server import FakeOpenAIServer

DOCS = 5
# What only a batch build records: its batch counters, and beside what it paid, what one
# by one would have cost.
_BATCH_KEYS = (
    "batch_calls",
    "batch_prompt_tokens",
    "batch_completion_tokens",
    "batch_cached_tokens",
    "usd_synchronous",
)


def _benchmark():
    spec = importlib.util.spec_from_file_location("prefix_share_benchmark", REPO / "benchmarks" / "prefix_share.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _one_price(recipe: str) -> list[str]:
    """Overrides that price batch tokens as synchronous ones, so both builds' money and cards
    agree to the digit (the discount itself: tests/test_ledger.py, benchmarks/batch_cost.py)."""
    models = yaml.safe_load((REPO / "recipes" / f"{recipe}.yaml").read_text(encoding="utf-8"))["models"]
    return [
        f"models.{name}.price.{rate}=null"
        for name, model in models.items()
        for rate in ("batch_input", "batch_cached_input", "batch_output")
        if rate in (model.get("price") or {})
    ]


def _runner(recipe: str, srv: FakeOpenAIServer, work: Path, batch: bool, one_price: bool = False) -> Runner:
    bench = _benchmark()
    overrides = bench.overrides(recipe, srv.base_url, bench.ARTICLES, DOCS) + (_one_price(recipe) if one_price else [])
    loaded = parse_recipe(REPO / "recipes" / f"{recipe}.yaml", overrides)
    return Runner(loaded, RunOptions(run_root=work / "runs", out_dir=work / "out", batch=batch))


def _batch_build(recipe: str, srv: FakeOpenAIServer, work: Path, rounds: int = 40, one_price: bool = False):
    """Run the same command until it finishes; the runs it took and the lines they printed."""
    said = []
    for _ in range(rounds):
        try:
            return _runner(recipe, srv, work, batch=True, one_price=one_price).run(), said
        except BatchPending as pending:
            said.append(str(pending))
    raise AssertionError(f"still pending after {rounds} runs: {said[-1]}")


def _stats(out: Path) -> dict:
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))

    def strip(value: object) -> None:
        if isinstance(value, dict):
            for key in _BATCH_KEYS:
                value.pop(key, None)
            for inner in value.values():
                strip(inner)
        elif isinstance(value, list):
            for inner in value:
                strip(inner)

    strip([s.get("llm") for s in stats["stages"]])
    strip(stats.get("llm"))
    for row in stats["stages"] + stats["stage_table"]:
        for key in ("seconds", "resumed"):  # how long it took, and that a later run loaded it
            row.pop(key, None)
    return stats


def _card(out: Path) -> str:
    """The data card, less the marks of stages a resumed run loaded from their checkpoints
    and the paragraph only a batch build has (what was paid against one by one)."""
    card = (out / "README.md").read_text(encoding="utf-8").replace(" (from checkpoint)", "")
    return "\n".join(line for line in card.split("\n\n") if not line.startswith("Paid: "))


def _tables(out: Path) -> dict[str, pl.DataFrame]:
    return {str(p.relative_to(out)): pl.read_parquet(p) for p in sorted(out.rglob("*.parquet"))} | {
        str(p.relative_to(out)): pl.read_ndjson(p) for p in sorted(out.rglob("*.jsonl"))
    }


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("PREFIX_SHARE_KEY", "local")


@pytest.mark.timeout(600)
@pytest.mark.parametrize("recipe", ["posir", "fineweb_posq"])
def test_a_batch_build_writes_what_the_synchronous_build_writes(recipe, tmp_path):
    bench = _benchmark()
    # One server for both builds (each has its own run folder and LLM cache), so the
    # recipes the outputs embed name the same address.
    with FakeOpenAIServer(responder=bench.mock_responder) as srv:
        sync = _runner(recipe, srv, tmp_path / "sync", batch=False, one_price=True).run()
        asked = Counter(json.dumps(b, sort_keys=True) for b in srv.requests)
        batched, said = _batch_build(recipe, srv, tmp_path / "batch", one_price=True)
        assert len(srv.requests) == sum(asked.values())  # nothing more went to the chat endpoint
        assert max(srv.batches.lines.values()) == 1  # no request answered twice
        assert len(srv.batches.lines) == len(asked)  # and each the synchronous build asked, once
    assert said and all("run the same command again" in line for line in said)
    assert sync.bench.queries.height > 0
    sync_tables, batch_tables = _tables(sync.out_dir), _tables(batched.out_dir)
    assert sync_tables.keys() == batch_tables.keys() and {"queries.jsonl", "llm_answers.parquet"} <= sync_tables.keys()
    for name, table in sync_tables.items():
        assert batch_tables[name].equals(table), name
    # What each stage would have paid one by one is what the synchronous build paid.
    sync_stats = json.loads((sync.out_dir / "stats.json").read_text(encoding="utf-8"))
    synchronous_usd = [s["llm"].get("usd") for s in sync_stats["stages"] if s.get("llm", {}).get("calls")]
    batched_stats = json.loads((batched.out_dir / "stats.json").read_text(encoding="utf-8"))
    paid = [s["llm"] for s in batched_stats["stages"] if s.get("llm", {}).get("calls")]
    assert [u.get("usd_synchronous", u.get("usd")) for u in paid] == synchronous_usd
    assert _stats(batched.out_dir) == _stats(sync.out_dir)
    stages = json.loads((batched.out_dir / "stats.json").read_text(encoding="utf-8"))["stages"]
    llm = [s["llm"] for s in stages if s.get("llm", {}).get("calls")]
    assert llm and all(u["batch_calls"] == u["calls"] for u in llm)  # every paid answer came through a batch
    assert _card(batched.out_dir) == _card(sync.out_dir)
    assert not (batched.run_dir / BOOK_NAME).exists()  # every batch collected and counted


@pytest.mark.timeout(300)
def test_a_killed_run_and_an_expired_batch_resume_without_asking_twice(tmp_path):
    bench = _benchmark()
    with FakeOpenAIServer(responder=bench.mock_responder) as srv:
        srv.batches.scripts = [BatchScript(polls=2), BatchScript("expire"), BatchScript("partial")]
        with pytest.raises(BatchPending, match="submitted"):
            _runner("posir", srv, tmp_path, batch=True).run()  # the process ends after submitting
        book = json.loads(next((tmp_path / "runs").rglob(BOOK_NAME)).read_text())
        assert [b["id"] for b in book["open"]] == ["batch_1"]
        with pytest.raises(BatchPending, match="still in a provider batch"):
            _runner("posir", srv, tmp_path, batch=True).run()  # polled: in progress
        result, _ = _batch_build("posir", srv, tmp_path)
        assert srv.batches.batches["batch_2"].status == "expired"
        assert max(srv.batches.lines.values()) == 1  # what the expired and partial batches answered is kept
        assert srv.requests == []
    assert result.bench.queries.height > 0


CLI_RECIPE = """
name: batch_cli
seed: 3
sources: [{type: python_docs, domain: python}]
models:
  gen: {model: scripted, base_url: "BASE", max_reasks: 0}
stages:
  - sample_by_length: {buckets: [200, 800, 4000], weights: [1, 1], n_docs: 4}
  - generate_queries: {llm: gen, questions_per_call: 2, calls_per_doc: 1}
"""


@pytest.mark.timeout(600)
def test_build_batch_exits_75_saying_how_to_collect_and_cache_lists_and_cancels(write_recipe, fake_openai, tmp_path):
    from typer.testing import CliRunner

    from builder.cli import app
    from tests.fixtures.scripted_llm import scripted_llm

    srv = fake_openai(responder=scripted_llm)
    srv.batches.scripts = [BatchScript(polls=5)]
    recipe = write_recipe(CLI_RECIPE.replace("BASE", srv.base_url))
    runs, out = tmp_path / "runs", tmp_path / "out"
    build = ["build", str(recipe), "--run-dir", str(runs), "--out", str(out), "--batch", "--allow-empty"]
    cli = CliRunner()
    first = cli.invoke(app, build, env={"COLUMNS": "300"})
    assert first.exit_code == 75, first.output
    assert "submitted 4 requests of model 'gen' as a provider batch" in first.output
    assert "run the same command again to collect" in first.output and not out.exists()
    listed = cli.invoke(app, ["cache", str(runs)], env={"COLUMNS": "300"})
    assert listed.exit_code == 0, listed.output
    assert "batch_1" in listed.output and "02_generate_queries" in listed.output
    cancelled = cli.invoke(app, ["cache", str(runs), "--cancel-batches"])
    assert cancelled.exit_code == 0 and "batch_1 (gen," in cancelled.output and "cancelled" in cancelled.output
    assert srv.batches.batches["batch_1"].status == "cancelled"
    # The next run finds the batch cancelled with nothing answered, submits again, and a
    # third collects and writes the output.
    assert cli.invoke(app, build).exit_code == 75
    done = cli.invoke(app, build)
    assert done.exit_code == 0, done.output
    assert json.loads((out / "stats.json").read_text())["counts"]["queries"] > 0
    assert srv.requests == [] and max(srv.batches.lines.values()) == 1


@pytest.mark.timeout(600)
def test_a_batch_outlives_the_process_that_submitted_it(write_recipe, fake_openai, tmp_path):
    import os
    import subprocess

    from tests.fixtures.scripted_llm import scripted_llm

    srv = fake_openai(responder=scripted_llm)
    srv.batches.scripts = [BatchScript(polls=1)]
    recipe = write_recipe(CLI_RECIPE.replace("BASE", srv.base_url))
    command = [sys.executable, "-c", "from builder.cli import main; main()", "build", str(recipe)]
    command += ["--run-dir", str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--batch", "--allow-empty"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    codes = []
    for _ in range(6):
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
        codes.append(done.returncode)
        if done.returncode != 75:
            break
    assert codes == [75, 75, 0], done.stderr  # submitted; still in progress; collected and written
    assert srv.requests == [] and sorted(srv.batches.lines.values()) == [1, 1, 1, 1]
