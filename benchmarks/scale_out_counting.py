"""Load + count + sample on Ray against the local load: the overhead of spreading it.

The fast tokenizer already uses every core in one process, so Ray cannot win much on one
machine; what it must show is bounded overhead (Ray at least 0.8x the local speed) and a
driver whose memory follows the sample: workers read the shards and send back counts,
never texts. Each mode runs in a fresh process: `local` is today's streamed load, `ray`
the same recipe with a private two-CPU Ray instance (its start is timed apart).

The corpus is the 500-3,000-word synthetic one of benchmarks/streaming_sample.py; an
existing /tmp/build_bench_streaming/corpus_300000.jsonl is used read-only (its first
--docs documents, through the recipe's `limit`), otherwise one of --docs documents is
written under --folder.

    python benchmarks/scale_out_counting.py [--docs 200000] [--modes local,ray]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.streaming_sample import TOKENIZER, make_corpus  # noqa: E402

SHARED_CORPUS = Path("/tmp/build_bench_streaming/corpus_300000.jsonl")
RECIPE = """name: scale_out_counting
seed: 1
sources: [{{type: jsonl, path: "{path}", limit: {docs}}}]
tokenizer: {{kind: hf, name: "{tokenizer}"}}
executor: {{kind: {kind}, num_cpus: 2}}
stages:
  - sample_by_length: {{n_docs: 2000}}
"""


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(kind: str, corpus: Path, docs: int, folder: Path) -> dict[str, float | str]:
    from rich.console import Console

    from builder.backends.tokenizers import make_counter
    from builder.bench import Bench
    from builder.executors import make_executor
    from builder.recipe.model import parse_recipe
    from builder.run.load import load_corpus
    from tests.helpers import make_ctx

    recipe_path = folder / f"scale_out_{kind}_{docs}.yaml"
    recipe_path.write_text(RECIPE.format(path=corpus, docs=docs, tokenizer=TOKENIZER, kind=kind), encoding="utf-8")
    recipe = parse_recipe(recipe_path).recipe
    counter = make_counter(recipe.tokenizer)
    t0 = time.perf_counter()
    executor = make_executor(recipe.executor)
    started = time.perf_counter() - t0
    base = _rss_mb()
    t0 = time.perf_counter()
    table, bad = load_corpus(recipe, None, None, counter, Console(stderr=True), executor)
    out = recipe.stage_objects()[0].run(
        Bench.of(corpus=table), make_ctx(folder, seed=recipe.seed, label="01_sample_by_length")
    )
    seconds = time.perf_counter() - t0
    executor.close()
    digest = hashlib.sha256()
    for doc_id, text in sorted(out.corpus.select("doc_id", "text").iter_rows()):
        digest.update(f"{doc_id}\t{text}\n".encode())
    return {
        "docs": table.height + bad.height,
        "seconds": seconds,
        "start_s": started,
        "peak_mb": _rss_mb(),
        "base_mb": base,
        "sampled": out.corpus.height,
        "digest": digest.hexdigest()[:12],
    }


def _corpus_for(docs: int, folder: Path) -> Path:
    if SHARED_CORPUS.exists():
        return SHARED_CORPUS  # read only, through the recipe's limit
    path = folder / f"corpus_{docs}.jsonl"
    if not path.exists():
        make_corpus(docs, path)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=200_000)
    parser.add_argument("--modes", default="local,ray")
    parser.add_argument("--folder", type=Path, default=Path("/tmp/build_bench_scale_out"))
    parser.add_argument("--measure", choices=["local", "ray"], help=argparse.SUPPRESS)
    parser.add_argument("--corpus", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.folder.mkdir(parents=True, exist_ok=True)
    if args.measure:
        print(json.dumps(measure(args.measure, args.corpus, args.docs, args.folder)))
        return 0
    corpus = _corpus_for(args.docs, args.folder)
    print(f"corpus {corpus} (first {args.docs:,} documents), MiniLM WordPiece, n_docs 2000")
    print(f"{'mode':>6} {'docs':>8} {'seconds':>8} {'docs/s':>7} {'start s':>7} {'driver peak RSS MiB':>19}  sample")
    speed: dict[str, float] = {}
    for mode in args.modes.split(","):
        cmd = [
            sys.executable,
            __file__,
            "--measure",
            mode,
            "--corpus",
            str(corpus),
            "--docs",
            str(args.docs),
            "--folder",
            str(args.folder),
        ]
        run = subprocess.run(cmd, capture_output=True, text=True, env=os.environ)
        if run.returncode != 0:
            print(f"{mode}: failed\n{run.stderr[-3000:]}", file=sys.stderr)
            return 1
        r = json.loads(run.stdout.strip().splitlines()[-1])
        speed[mode] = r["docs"] / r["seconds"]
        print(
            f"{mode:>6} {r['docs']:>8} {r['seconds']:>8.1f} {speed[mode]:>7.0f} {r['start_s']:>7.1f} "
            f"{r['peak_mb']:>19.0f}  {r['sampled']} docs, sha256 {r['digest']}",
            flush=True,
        )
    if "local" in speed and "ray" in speed:
        print(f"ray / local speed: {speed['ray'] / speed['local']:.2f} (target >= 0.8)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
