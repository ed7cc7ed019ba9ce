"""Quota-steered generation against one-shot generation, in the FineWeb-PosQ-style build.

Both builds run recipes/fineweb_posq.yaml's stages and thresholds over the same local
jsonl corpus, every model answered by the suite's local OpenAI-compatible server (the
mock LLM behind HTTP) and every reranker the built-in lexical scorer, as in
benchmarks/prefix_share.py. One-shot generation asks every chunk once; the steered build
wraps generation, localization and the reranker agreement in `generate_to_quota`, which
asks in rounds only for the thirds still short of what `balance` will keep.

Printed per build: kept queries, prompt tokens (the server's count, all stages), kept
queries per 100,000 prompt tokens, the thirds, what balance removed, and the rounds.
Target: the steered build keeps at least 1.5x the queries per 100,000 prompt tokens, with
thirds at least as even.

    python benchmarks/quota_steering.py [--corpus FILE.jsonl] [--docs 40]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from builder.recipe.model import parse_recipe
from builder.run.runner import Runner, RunOptions
from builder.testing.openai_server import FakeOpenAIServer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from prefix_share import ARTICLES, ROOT, mock_responder, overrides  # noqa: E402

WRAPPED = ("generate_queries", "localize_spans", "segment_agreement")


@dataclass(frozen=True)
class BuildReport:
    build: str
    kept: int
    prompt_tokens: int
    thirds: dict[str, int]
    balanced_out: int
    rounds: list[dict[str, Any]]

    @property
    def per_100k(self) -> float:
        return 100_000 * self.kept / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def spread(self) -> float:
        """Largest minus smallest third, as a share of the kept queries."""
        values = [self.thirds.get(t, 0) for t in ("beginning", "middle", "end")]
        return (max(values) - min(values)) / self.kept if self.kept else 0.0

    def line(self) -> str:
        thirds = ", ".join(f"{t} {self.thirds.get(t, 0)}" for t in ("beginning", "middle", "end"))
        rounds = " ".join(f"{r['calls']}->{r['kept']}" for r in self.rounds) or "-"
        return (f"{self.build:<9} kept {self.kept:>4}  prompt tokens {self.prompt_tokens:>9,}  "
                f"per 100k {self.per_100k:6.1f}  thirds {thirds} (spread {self.spread:.2f})  "
                f"balance removed {self.balanced_out}  rounds (calls->kept) {rounds}")


def steered_recipe(work: Path) -> Path:
    """fineweb_posq.yaml with generation, localization and the reranker agreement wrapped
    in generate_to_quota (the LLM agreement after balance stays where it is)."""
    recipe = yaml.safe_load((ROOT / "recipes" / "fineweb_posq.yaml").read_text(encoding="utf-8"))
    stages, wrapped, at = [], [], 0
    for entry in recipe["stages"]:
        (name, params), = entry.items()
        if name in WRAPPED and (name != "segment_agreement" or params.get("rerankers")) and len(wrapped) < 3:
            at = at if wrapped else len(stages)
            wrapped.append(entry)
            continue
        stages.append(entry)
    stages.insert(at, {"generate_to_quota": {"column": "chunk_tag", "stages": wrapped}})
    recipe["stages"] = stages
    path = work / "fineweb_posq_steered.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def build(name: str, recipe: Path, work: Path, corpus: Path, docs: int) -> BuildReport:
    os.environ.setdefault("PREFIX_SHARE_KEY", "local")
    with FakeOpenAIServer(responder=mock_responder) as srv:
        loaded = parse_recipe(recipe, overrides("fineweb_posq", srv.base_url, corpus, docs))
        out = work / "out"
        result = Runner(loaded, RunOptions(run_root=work / "runs", out_dir=out)).run()
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    queries = result.bench.queries
    thirds = Counter(t for t in queries["chunk_tag"].to_list() if t)
    stages = stats["stages"]
    balanced = sum(s.get("dropped", {}).get("balanced_out", 0) for s in stages)
    rounds = next((s["rounds"] for s in stages if "rounds" in s), [])
    return BuildReport(name, queries.height, int(stats["llm"]["total"]["prompt_tokens"]), dict(thirds),
                       balanced, rounds)


def compare(work: Path, corpus: Path = ARTICLES, docs: int = 40) -> tuple[BuildReport, BuildReport]:
    """The one-shot and the steered build over the same documents, in this order."""
    (work / "oneshot").mkdir(parents=True)
    (work / "steered").mkdir(parents=True)
    oneshot = build("one-shot", ROOT / "recipes" / "fineweb_posq.yaml", work / "oneshot", corpus, docs)
    steered = build("steered", steered_recipe(work / "steered"), work / "steered", corpus, docs)
    return oneshot, steered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=ARTICLES, help="jsonl with id and text")
    parser.add_argument("--docs", type=int, default=40, help="documents the build samples")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        oneshot, steered = compare(Path(tmp), args.corpus, args.docs)
    print(oneshot.line())
    print(steered.line())
    print(f"steered / one-shot, kept per 100k prompt tokens: {steered.per_100k / oneshot.per_100k:.2f}x "
          "(target 1.5x)")


if __name__ == "__main__":
    main()
