"""Benchmark eval's paired bootstrap: seconds to give every figure of one retriever its interval.

Synthetic per-query scores (seeded) with the groupings a PosIR-style build carries:
position tag (3), position bin (20), relative bin (20), length bucket (4) and the 80
bucket x bin cells; every query visible. Reported per query count: seconds for all
figures and intervals of one retriever, and the peak RSS of the process. Wall-clock on
a shared machine is noisy; run it twice.

Run from the repository root::

    PYTHONPATH=. python benchmarks/eval_intervals.py [--queries 1000 10000 100000] [--resamples 1000]
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np
import polars as pl

from builder.evaluation.figures import Figures
from builder.evaluation.intervals import BootstrapSettings


def scores(n: int, seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    return pl.DataFrame(
        {
            "query_id": [f"q{i}" for i in range(n)],
            "ndcg@10": rng.random(n),
            "recall@100": rng.random(n),
            "position_tag": rng.choice(["beginning", "middle", "end"], n).tolist(),
            "position_bin": rng.integers(0, 20, n),
            "rel_bin": rng.integers(0, 20, n),
            "length_bucket": rng.choice(["Q1", "Q2", "Q3", "Q4"], n).tolist(),
            "visibility": ["visible"] * n,
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--resamples", type=int, default=1000)
    args = parser.parse_args()
    for n in args.queries:
        table = scores(n)
        started = time.perf_counter()
        figures = Figures(table, ["position_tag", "position_bin"], BootstrapSettings(resamples=args.resamples))
        figures.length_buckets("bins")
        seconds = time.perf_counter() - started
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{n:>7} queries, {args.resamples} resamples: {seconds:6.1f} s, peak RSS {peak:,.0f} MiB")


if __name__ == "__main__":
    main()
