"""Money per kept query, synchronous against provider batches, for the PosIR- and
FineWeb-PosQ-style recipes.

Each shipped recipe is built twice against the suite's local OpenAI-compatible server
(answering as the mock LLM, as benchmarks/prefix_share.py does): once calling the chat
endpoint, once with `--batch` through its files and batches endpoints, the batch build
run again and again as a user would until it finishes. Both builds' money is the
ledger's (stats.json's `llm.total.usd`), with every model of the recipe priced as one named
model: OpenAI's gpt-4o-mini list prices (input 0.15, cached input 0.075, output 0.60 USD per
million tokens) and its Batch API at half of each, as the shipped recipes and docs/cost.md
quote them. Target: batch <= 0.55x synchronous per kept query.

    python benchmarks/batch_cost.py [--docs 20] [--recipe posir fineweb_posq]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from prefix_share import ARTICLES, ROOT, mock_responder, overrides

from builder.backends.llm.batch_book import BatchPending
from builder.recipe.model import parse_recipe
from builder.run.runner import Runner, RunOptions
from tests.support.openai_server import FakeOpenAIServer

MODEL = "gpt-4o-mini"
# USD per million tokens, synchronously and through the Batch API (the recipe's `price:` fields).
PRICE = (
    "{input: 0.15, cached_input: 0.075, output: 0.60,"
    " batch_input: 0.075, batch_cached_input: 0.0375, batch_output: 0.30}"
)


def one_price(recipe: str) -> list[str]:
    """Overrides that price every model of `recipe` as MODEL."""
    models = yaml.safe_load((ROOT / "recipes" / f"{recipe}.yaml").read_text(encoding="utf-8"))["models"]
    return [f"models.{name}.price={PRICE}" for name in models]


@dataclass(frozen=True)
class Spend:
    runs: int
    kept: int
    calls: int
    batch_calls: int
    prompt_tokens: int
    completion_tokens: int
    usd: float

    @property
    def per_kept(self) -> float:
        return self.usd / self.kept if self.kept else float("nan")


def spend(stats: dict[str, Any], runs: int) -> Spend:
    """What a build paid, from its stats.json's ledger."""
    total = stats["llm"]["total"]
    counts = {name: total.get(name, 0) for name in ("calls", "batch_calls", "prompt_tokens", "completion_tokens")}
    return Spend(runs, int(stats["counts"]["queries"]), usd=total["usd"], **counts)


def build(recipe: str, srv: FakeOpenAIServer, work: Path, docs: int, batch: bool) -> Spend:
    """Build `recipe` in `work`; in batch mode, run the same command until it finishes."""
    loaded_sets = overrides(recipe, srv.base_url, ARTICLES, docs) + one_price(recipe)
    for runs in range(1, 200):
        loaded = parse_recipe(ROOT / "recipes" / f"{recipe}.yaml", loaded_sets)
        options = RunOptions(run_root=work / "runs", out_dir=work / "out", batch=batch)
        try:
            result = Runner(loaded, options).run()
        except BatchPending:
            continue
        return spend(json.loads((result.out_dir / "stats.json").read_text(encoding="utf-8")), runs)
    raise RuntimeError(f"{recipe}: the batch build did not finish in 200 runs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=20, help="documents each build samples")
    parser.add_argument("--recipe", nargs="+", default=["posir", "fineweb_posq"])
    args = parser.parse_args()
    os.environ.setdefault("PREFIX_SHARE_KEY", "local")
    print(f"prices: every model as {MODEL}, USD per million tokens: {PRICE}")
    print(
        f"{'recipe':<13} {'mode':<6} {'runs':>4} {'kept':>5} {'calls':>6} {'batch':>6} "
        f"{'prompt tok':>11} {'compl tok':>10} {'USD':>10} {'USD/kept':>10} {'ratio':>6}"
    )
    for recipe in args.recipe:
        with tempfile.TemporaryDirectory() as tmp, FakeOpenAIServer(responder=mock_responder) as srv:
            sync = build(recipe, srv, Path(tmp) / "sync", args.docs, batch=False)
            batched = build(recipe, srv, Path(tmp) / "batch", args.docs, batch=True)
        for mode, s in (("sync", sync), ("batch", batched)):
            ratio = s.per_kept / sync.per_kept
            print(
                f"{recipe:<13} {mode:<6} {s.runs:>4} {s.kept:>5} {s.calls:>6} {s.batch_calls:>6} "
                f"{s.prompt_tokens:>11,} {s.completion_tokens:>10,} {s.usd:>10.6f} {s.per_kept:>10.7f} {ratio:>6.3f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
