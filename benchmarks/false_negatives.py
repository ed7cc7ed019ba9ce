"""Benchmark the false-negative search: BM25 recall of the top 1,000 over 100,000 documents.

The SciFact abstracts (5,183) are replicated with light, seeded perturbation (about one
word in ten dropped, one in twenty swapped for a word from another abstract) until the
corpus holds `--docs` documents; the 300 SciFact claims, perturbed the same way, are
repeated up to `--queries` queries. Reported:

- fit: tokenizing the corpus into the shared lexicon, and building the bm25s index;
- recall: top-k retrieval, queries per second (the target is 200 q/s on 2 cores);
- rerank: BM25 rescoring of each query's positive plus its 1,000 candidates, as the
  `false_negatives` stage does with the `bm25` reranker;
- stage: the whole `false_negatives` stage (PosIR mode, bm25 retriever and reranker) on
  the same corpus with the SciFact claims and their cited abstracts as positives. The
  perturbed copies are near-duplicates, and BM25 often ranks other abstracts above a
  claim's positive, so this removes many documents: expected, with BM25 as the judge;
- peak RSS of the process.

Rates are wall-clock; other jobs on the machine make them noisy, so run it twice.

Run from the repository root::

    PYTHONPATH=. python benchmarks/false_negatives.py [--docs 100000] [--queries 2000]
"""

from __future__ import annotations

import argparse
import io
import json
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
from rich.console import Console

from builder.backends.bm25_index import BM25Index
from builder.backends.llm.prompt_templates import PromptLibrary
from builder.backends.rerankers import BM25Config, make_reranker
from builder.backends.rerankers.bm25 import BM25Scorer
from builder.backends.tokenizers import WordCounter
from builder.bench import Bench
from builder.run.progress import RichProgress
from builder.stages.context import StageContext
from builder.stages.qc.false_negatives import FalseNegativeParams, FalseNegatives

DATA = Path(__file__).resolve().parents[1] / "../shared/data/scifact_beir"
TARGET_QPS = 200.0
BLOCK = 64  # queries per search call, as in the stage


def _read(path: Path, field: str) -> list[str]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line)[field] for line in f]


def _perturb(text: str, rng: random.Random, pool: list[str]) -> str:
    out = []
    for word in text.split():
        roll = rng.random()
        if roll < 0.10:
            continue
        out.append(rng.choice(pool) if roll < 0.15 else word)
    return " ".join(out)


def build(n_docs: int, n_queries: int, seed: int = 0) -> tuple[list[str], list[str]]:
    docs = _read(DATA / "corpus.jsonl", "text")
    claims = _read(DATA / "queries.jsonl", "text")
    rng = random.Random(seed)
    pool = [w for d in docs[:500] for w in d.split()]
    corpus = list(docs)
    while len(corpus) < n_docs:
        corpus.append(_perturb(docs[len(corpus) % len(docs)], rng, pool))
    queries = [
        claims[i % len(claims)] if i < len(claims) else _perturb(claims[i % len(claims)], rng, pool)
        for i in range(n_queries)
    ]
    return corpus[:n_docs], queries


def _stage_bench(corpus: list[str]) -> Bench:
    """The corpus (original abstracts keep their ids) with each claim's first cited abstract."""
    ids = _read(DATA / "corpus.jsonl", "_id")
    doc_ids = [ids[i] if i < len(ids) else f"copy{i}" for i in range(len(corpus))]
    qrels = pl.read_csv(
        DATA / "qrels/test.tsv", separator="\t", schema_overrides={"query-id": pl.Utf8, "corpus-id": pl.Utf8}
    ).unique("query-id", keep="first", maintain_order=True)
    claims = dict(zip(_read(DATA / "queries.jsonl", "_id"), _read(DATA / "queries.jsonl", "text")))
    queries = pl.DataFrame(
        {"query_id": qrels["query-id"], "doc_id": qrels["corpus-id"], "text": [claims[q] for q in qrels["query-id"]]}
    )
    return Bench.of(
        pl.DataFrame({"doc_id": doc_ids, "text": corpus, "n_tokens": [0] * len(corpus)}),
        queries,
        queries.select("query_id", "doc_id", pl.lit(1).alias("score")),
    )


def _run_stage(corpus: list[str]) -> None:
    bench = _stage_bench(corpus)
    with tempfile.TemporaryDirectory() as work:
        ctx = StageContext(
            seed=0,
            label="01_false_negatives",
            index=1,
            tokenizer=WordCounter(),
            work_dir=Path(work),
            prompts=PromptLibrary(),
            progress=RichProgress(Console(file=io.StringIO()), "bench"),
            llm_factory=print,
            reranker_factory=lambda name: make_reranker(name, BM25Config(), print),
        )
        t0 = time.perf_counter()
        out = FalseNegatives(FalseNegativeParams()).run(bench, ctx)
        seconds = time.perf_counter() - t0
    n = bench.queries.height
    print(
        f"stage: {n} queries in {seconds:.1f}s incl. fitting ({n / seconds:.1f} queries/s); removed "
        f"{ctx.stats['false_negative_docs']} documents, {n - out.queries.height} queries with them"
    )


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def _recall(retriever: BM25Index, queries: list[str], k: int) -> tuple[list, float]:
    t0 = time.perf_counter()
    hits = []
    for at in range(0, len(queries), BLOCK):
        hits += retriever.search(queries[at : at + BLOCK], k)
    seconds = time.perf_counter() - t0
    qps = len(queries) / seconds
    mean_hits = sum(len(rows) for rows, _ in hits) / len(hits)
    print(
        f"recall: {qps:,.0f} queries/s (top {k}, mean {mean_hits:.0f} hits per query, {seconds:.1f}s)"
        f" - target {TARGET_QPS:.0f} q/s: {'met' if qps >= TARGET_QPS else 'NOT met'}"
    )
    return hits, qps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=2_000)
    parser.add_argument("--top-k", type=int, default=1000)
    parser.add_argument("--rerank-queries", type=int, default=300, help="queries rescored (slower step)")
    parser.add_argument("--stage", action="store_true", help="also time the whole false_negatives stage")
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    corpus, queries = build(args.docs, args.queries)
    print(f"data: {len(corpus):,} documents, {len(queries):,} queries ({time.perf_counter() - t0:.1f}s)")

    scorer = BM25Scorer("bm25", BM25Config())
    t0 = time.perf_counter()
    scorer.fit(corpus)
    t_fit = time.perf_counter() - t0
    assert scorer.lexicon is not None
    t0 = time.perf_counter()
    retriever = BM25Index.from_lexicon(scorer.lexicon)
    t_index = time.perf_counter() - t0
    print(
        f"fit: lexicon {t_fit:.1f}s ({len(scorer.lexicon.vocab):,} terms, "
        f"{scorer.lexicon.tf.nnz:,} postings), bm25s index {t_index:.1f}s"
    )

    hits, qps = _recall(retriever, queries, args.top_k)
    n = min(args.rerank_queries, len(queries))
    t0 = time.perf_counter()
    for query, (rows, _) in zip(queries[:n], hits[:n]):
        scorer.score(query, [corpus[0]] + [corpus[r] for r in rows])
    t_rerank = time.perf_counter() - t0
    print(f"rerank: {n / t_rerank:,.0f} queries/s (positive + {args.top_k} candidates each, BM25)")
    if args.stage:
        del hits, retriever, scorer
        _run_stage(corpus)
    print(f"peak RSS: {_peak_rss_mib():,.0f} MiB")
    return 0 if qps >= TARGET_QPS else 1


if __name__ == "__main__":
    sys.exit(main())
