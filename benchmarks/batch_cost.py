"""Money per kept query, synchronous against provider batches, for the PosIR- and
FineWeb-PosQ-style recipes.

Each shipped recipe is built twice against the suite's local OpenAI-compatible server
(answering as the mock LLM, as benchmarks/prefix_share.py does): once calling the chat
endpoint, once with `--batch` through its files and batches endpoints, the batch build
run again and again as a user would until it finishes. Both builds' money comes from
their stats.json: each stage's LLM usage (calls, prompt, cached and completion tokens,
and the `batch_*` share of them) priced at one named model's list prices.

The prices are an explicit table here (USD per million tokens), not the recipe's:
OpenAI's gpt-4o-mini list prices (input 0.15, cached input 0.075, output 0.60) and its
Batch API at half of each. Target: batch <= 0.55x synchronous per kept query.

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

from prefix_share import ARTICLES, ROOT, mock_responder, overrides

from builder.backends.llm.batch_book import BatchPending
from builder.recipe.model import parse_recipe
from builder.run.runner import Runner, RunOptions
from tests.support.openai_server import FakeOpenAIServer

MODEL = "gpt-4o-mini"
# USD per million tokens: (input, cached input, output), synchronously and through the Batch API.
SYNC_PRICE = (0.15, 0.075, 0.60)
BATCH_PRICE = (0.075, 0.0375, 0.30)


def _usd(price: tuple[float, float, float], prompt: int, cached: int, completion: int) -> float:
    cached = min(cached, prompt)
    return ((prompt - cached) * price[0] + cached * price[1] + completion * price[2]) / 1e6


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
    """What a build paid, from its stats.json: every stage's LLM usage at the table's prices,
    the answers that came through a batch at the batch prices."""
    usd = 0.0
    totals = dict.fromkeys(("calls", "batch_calls", "prompt_tokens", "completion_tokens"), 0)
    for stage in stats["stages"]:
        llm = stage.get("llm") or {}
        if not llm:
            continue
        batch = [llm.get(f"batch_{k}", 0) for k in ("prompt_tokens", "cached_tokens", "completion_tokens")]
        sync = [llm.get(k, 0) - b for k, b in zip(("prompt_tokens", "cached_tokens", "completion_tokens"), batch)]
        usd += _usd(SYNC_PRICE, *sync) + _usd(BATCH_PRICE, *batch)
        for name in totals:
            totals[name] += llm.get(name, 0)
    return Spend(runs, int(stats["counts"]["queries"]), usd=usd, **totals)


def build(recipe: str, srv: FakeOpenAIServer, work: Path, docs: int, batch: bool) -> Spend:
    """Build `recipe` in `work`; in batch mode, run the same command until it finishes."""
    loaded_sets = overrides(recipe, srv.base_url, ARTICLES, docs)
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
    print(f"prices: {MODEL}, USD per million tokens (input/cached/output): {SYNC_PRICE} sync, {BATCH_PRICE} batch")
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
