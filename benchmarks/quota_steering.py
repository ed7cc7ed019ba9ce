"""Quota-steered generation against one-shot generation, in the FineWeb-PosQ-style build.

Both builds run recipes/fineweb_posq.yaml's stages and thresholds over the same local
jsonl corpus, every model answered by the suite's local OpenAI-compatible server (the
mock LLM behind HTTP) and every reranker the built-in lexical scorer, as in
benchmarks/prefix_share.py. One-shot generation asks every chunk once; the steered build
wraps generation, localization and the reranker agreement in `generate_to_quota`, which
asks in rounds only for the thirds still short of what `balance` will keep.

Printed per build: kept queries, prompt tokens (the server's count, all stages), kept
queries per 100,000 prompt tokens, the thirds, what balance removed, the rounds, and the
share of the tokens spent after balance. Target: the steered build keeps at least 1.5x the
queries per 100,000 prompt tokens, with thirds at least as even. The last line bounds what
steering can do on the run: one-shot's tokens against the same build with its spending
before balance cut in proportion to what balance keeps.

How much steering can save depends on how uneven one-shot generation's thirds are before
balance. The mock writes up to 3 questions per chunk, all from the chunk, so its thirds
follow the chunk tags and come out fairly even. `--funnel paper` has the server answer
as FineWeb-PosQ's generator behaved instead (paper 000, appendix A.2): of 265,865
questions 6.0 % were tagged beginning, 75.1 % middle and 18.9 % end, and the rerankers
kept 81.8 %, 33.0 % and 75.8 % of them. Per third, the server writes as many questions per
chunk as give those shares, and makes a question stray (written from a chunk of another
third of the same passage, so the rerankers reject it) as often as gives those losses on
top of the mock's own. Both builds of a run get the same answers to the same requests.

    python benchmarks/quota_steering.py [--corpus FILE.jsonl] [--docs 40] [--funnel mock|paper]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from builder.backends.llm.mock_backend import mock_answer
from builder.backends.llm.mock_prompts import between, identify, prompt_text
from builder.recipe.model import parse_recipe
from builder.run.runner import Runner, RunOptions
from tests.support.openai_server import FakeOpenAIServer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from prefix_share import ARTICLES, ROOT, mock_responder, overrides  # noqa: E402

WRAPPED = ("generate_queries", "localize_spans", "segment_agreement")
THIRDS = ("beginning", "middle", "end")
# FineWeb-PosQ's funnel per third (paper 000, appendix A.2): questions generated, and kept
# by the three rerankers' agreement.
PAPER_GENERATED = {"beginning": 15_961, "middle": 199_742, "end": 50_162}
PAPER_AGREED = {"beginning": 13_061, "middle": 65_941, "end": 38_006}


class PaperFunnel:
    """The local server's answers, with chunk questions shaped like FineWeb-PosQ's funnel.

    Every request but chunk generation gets the mock's answer. A chunk's answer keeps, on
    average, the questions per chunk that give the paper's share of its third (one for the
    scarcest third, whose chunks then each bring one), and replaces a question by one written from a chunk of
    another third as often as gives the paper's reranker loss for the third. Decisions are
    seeded by the chunk's text, so the one-shot and the steered build get the same answer
    to the same chunk."""

    def __init__(self, corpus: Path) -> None:
        from types import SimpleNamespace

        from builder.stages.generate.chunked import make_splitter
        from builder.textutil.positions import split_with_offsets, tag_chunk

        recipe = yaml.safe_load((ROOT / "recipes" / "fineweb_posq.yaml").read_text(encoding="utf-8"))
        sample = next(e["sample_by_length"] for e in recipe["stages"] if "sample_by_length" in e)
        generate = next(e["generate_queries"] for e in recipe["stages"] if "generate_queries" in e)
        splitter = make_splitter(
            SimpleNamespace(chunk_size=generate["chunk_size"], chunk_overlap=0), lambda text: len(text.split())
        )
        self.chunks: dict[str, tuple[str, list[tuple[str, str]]]] = {}  # chunk -> (tag, the passage's chunks)
        tags: Counter[str] = Counter()
        for line in corpus.read_text(encoding="utf-8").splitlines():
            text = json.loads(line)["text"]
            if not sample["min_words"] <= len(text.split()) <= sample["max_words"]:
                continue
            parts = [
                (tag_chunk(start, end, len(text)), chunk) for start, end, chunk in split_with_offsets(splitter, text)
            ]
            for tag, chunk in parts:
                self.chunks[chunk] = (tag, parts)
                tags[tag] += 1
        # Questions per chunk, per third, in proportion to the paper's share over this corpus's
        # chunks, the scarcest third at one per chunk.
        density = {t: PAPER_GENERATED[t] / max(tags[t], 1) for t in THIRDS}
        self.per_chunk = {t: density[t] / min(density.values()) for t in THIRDS}
        self.keep = {t: PAPER_AGREED[t] / PAPER_GENERATED[t] for t in THIRDS}

    def __call__(self, body: dict[str, Any]) -> str:
        messages = body["messages"]
        excerpt = between(prompt_text(messages), "excerpt") if identify(messages) == "chunk_qa" else None
        if excerpt is None or excerpt.strip() not in self.chunks:
            return mock_responder(body)
        tag, parts = self.chunks[excerpt.strip()]
        rng = random.Random(excerpt)
        share = self.per_chunk[tag]
        n = int(share) + (rng.random() < share - int(share))
        items = self._questions(body, n)
        others = [chunk for other, chunk in parts if other != tag]
        for k, _ in enumerate(items):
            if others and rng.random() >= self.keep[tag]:
                # Seeded apart from the mock's own answer for that chunk, so the stray is
                # not word for word a question the other chunk brings.
                stray = self._ask(messages, excerpt, rng.choice(others), rng.randrange(1 << 30))
                if stray:
                    items[k] = rng.choice(stray)
        return json.dumps(items, ensure_ascii=False)

    @staticmethod
    def _questions(body: dict[str, Any], n: int) -> list[dict[str, str]]:
        """Up to `n` distinct questions about the chunk: the mock writes at most 3 per
        answer, so further answers with other seeds add to them."""
        items: list[dict[str, str]] = []
        for seed in range(4):
            for item in json.loads(mock_answer(body["messages"], seed=seed) or "[]"):
                if len(items) < n and item["question"] not in {i["question"] for i in items}:
                    items.append(item)
        return items

    @staticmethod
    def _ask(messages: list[dict[str, str]], excerpt: str, chunk: str, seed: int) -> list[dict[str, str]]:
        moved = [{**m, "content": m["content"].replace(excerpt, chunk)} for m in messages]
        return json.loads(mock_answer(moved, seed=seed) or "[]")


def responder_for(funnel: str, corpus: Path) -> Callable[[dict[str, Any]], str]:
    return PaperFunnel(corpus) if funnel == "paper" else mock_responder


@dataclass(frozen=True)
class BuildReport:
    build: str
    kept: int
    prompt_tokens: int
    thirds: dict[str, int]
    balanced_out: int
    rounds: list[dict[str, Any]]
    after_balance: int  # prompt tokens of the stages after balance, paid per kept query either way
    balance_in: int  # queries that reached balance

    @property
    def ideal_tokens(self) -> float:
        """Prompt tokens had generation asked only for what balance keeps: the spending
        before balance cut in proportion, the stages after it unchanged."""
        before = self.prompt_tokens - self.after_balance
        kept = self.balance_in - self.balanced_out
        return self.after_balance + (before * kept / self.balance_in if self.balance_in else before)

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
        return (
            f"{self.build:<9} kept {self.kept:>4}  prompt tokens {self.prompt_tokens:>9,}  "
            f"per 100k {self.per_100k:6.1f}  thirds {thirds} (spread {self.spread:.2f})  "
            f"balance removed {self.balanced_out}  rounds (calls->kept) {rounds}  "
            f"after balance {self.after_balance / self.prompt_tokens:.0%} of the tokens"
        )


def steered_recipe(work: Path) -> Path:
    """fineweb_posq.yaml with generation, localization and the reranker agreement wrapped
    in generate_to_quota (the LLM agreement after balance stays where it is)."""
    recipe = yaml.safe_load((ROOT / "recipes" / "fineweb_posq.yaml").read_text(encoding="utf-8"))
    stages, wrapped, at = [], [], 0
    for entry in recipe["stages"]:
        ((name, params),) = entry.items()
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


def build(
    name: str,
    recipe: Path,
    work: Path,
    corpus: Path,
    docs: int,
    responder: Callable[[dict[str, Any]], str] = mock_responder,
) -> BuildReport:
    os.environ.setdefault("PREFIX_SHARE_KEY", "local")
    with FakeOpenAIServer(responder=responder) as srv:
        loaded = parse_recipe(recipe, overrides("fineweb_posq", srv.base_url, corpus, docs))
        out = work / "out"
        result = Runner(loaded, RunOptions(run_root=work / "runs", out_dir=out)).run()
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    queries = result.bench.queries
    thirds = Counter(t for t in queries["chunk_tag"].to_list() if t)
    stages = stats["stages"]
    balanced = sum(s.get("dropped", {}).get("balanced_out", 0) for s in stages)
    rounds = next((s["rounds"] for s in stages if "rounds" in s), [])
    balance = next(s for s in stages if s["stage"].endswith("_balance"))
    at = int(balance["stage"].split("_")[0])
    after = sum(s["prompt_tokens"] for s in stats["llm"]["stages"] if int(s["stage"].split("_")[0]) > at)
    return BuildReport(
        name,
        queries.height,
        int(stats["llm"]["total"]["prompt_tokens"]),
        dict(thirds),
        balanced,
        rounds,
        after,
        balance["queries_in"],
    )


def compare(
    work: Path, corpus: Path = ARTICLES, docs: int = 40, funnel: str = "mock"
) -> tuple[BuildReport, BuildReport]:
    """The one-shot and the steered build over the same documents, in this order."""
    (work / "oneshot").mkdir(parents=True)
    (work / "steered").mkdir(parents=True)
    responder = responder_for(funnel, corpus)
    oneshot = build("one-shot", ROOT / "recipes" / "fineweb_posq.yaml", work / "oneshot", corpus, docs, responder)
    steered = build("steered", steered_recipe(work / "steered"), work / "steered", corpus, docs, responder)
    return oneshot, steered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=ARTICLES, help="jsonl with id and text")
    parser.add_argument("--docs", type=int, default=40, help="documents the build samples")
    parser.add_argument(
        "--funnel",
        choices=("mock", "paper"),
        default="mock",
        help="how the server's generator behaves: the mock's, or FineWeb-PosQ's per-third funnel",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        oneshot, steered = compare(Path(tmp), args.corpus, args.docs, args.funnel)
    print(oneshot.line())
    print(steered.line())
    print(f"steered / one-shot, kept per 100k prompt tokens: {steered.per_100k / oneshot.per_100k:.2f}x (target 1.5x)")
    # Steering changes what is asked before balance; the stages after it cost the same per kept query.
    print(
        f"perfect steering (one-shot's spending before balance cut to what balance keeps): "
        f"{oneshot.prompt_tokens / oneshot.ideal_tokens:.2f}x"
    )


if __name__ == "__main__":
    main()
