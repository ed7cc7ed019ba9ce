"""Span localization on the fuzzy path: the local executor against Ray with two workers.

Builds (reference, document) pairs from FineWeb sentences (../shared/data/fineweb_sample),
each reference edited the way LLM quotes drift (a word dropped or changed, a typo) so the
exact and normalized searches fail and the fuzzy alignment does the work. The pairs go
through `localize_spans`' own matching (`builder.stages.localize_spans.match_queries`) once
in this process and once on a private Ray instance (num_cpus=2, so two workers); both
must give identical spans. Ray's start-up, and a warm-up that starts every worker and
loads the matcher there, are timed apart from the matching.

    PYTHONPATH=. python benchmarks/scale_out_spans.py [--pairs 20000] [--block-size 256]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.localize import (  # noqa: E402
    DEFAULT_DATA,
    _eligible,
    build_documents,
    candidate_spans,
    load_texts,
    perturb,
)
from builder.executors import ExecutorConfig, LocalExecutor, make_executor  # noqa: E402
from builder.stages.localize_spans import match_queries  # noqa: E402
from builder.textutil.span_blocks import Match  # noqa: E402
from builder.textutil.spans import ALL_METHODS, normalize_text  # noqa: E402

FUZZY_EDITS = ("word_deleted", "word_substituted", "typo")
TARGET_SPEEDUP = 1.6
FUZZY_MIN_SCORE = 90.0


def build_pairs(documents: list[str], n_pairs: int, seed: int) -> list[tuple[str, list[str]]]:
    """`(doc_id, [reference])` pairs dealt round-robin over the documents' sentences; a
    sentence is reused with a fresh edit once every sentence has had its turn."""
    rng = random.Random(seed)
    normalized = [normalize_text(doc) for doc in documents]
    vocabularies = [doc.split() for doc in documents]
    sentences = [
        [(s, e) for s, e in candidate_spans(doc) if _eligible("typo", normalized[i], doc[s:e])]
        for i, doc in enumerate(documents)
    ]
    if not any(sentences):
        sys.exit("no sentence in the data fits a fuzzy edit")
    pairs: list[tuple[str, list[str]]] = []
    round_ = 0
    while len(pairs) < n_pairs:
        for i, spans in enumerate(sentences):
            if not spans or len(pairs) == n_pairs:
                continue
            start, end = spans[round_ % len(spans)]
            reference = perturb(FUZZY_EDITS[(round_ + i) % 3], documents[i][start:end], rng, vocabularies[i])
            if normalize_text(reference) not in normalized[i]:  # must miss exact and normalized
                pairs.append((f"d{i}", [reference]))
        round_ += 1
    return pairs


def timed(
    executor: object, texts: dict[str, str], pairs: list[tuple[str, list[str]]], block_size: int
) -> tuple[float, list[Match]]:
    began = time.perf_counter()
    found = match_queries(executor, block_size, texts, pairs, FUZZY_MIN_SCORE, ALL_METHODS)  # type: ignore[arg-type]
    return time.perf_counter() - began, found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=20_000, help="(reference, document) pairs (default 20000)")
    parser.add_argument("--block-size", type=int, default=256, help="queries per Ray task (default 256)")
    parser.add_argument("--doc-words", type=int, default=500, help="words per document (default 500)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    texts = load_texts(args.data)
    if texts is None:
        return 0
    documents = build_documents(texts, args.doc_words)
    pairs = build_pairs(documents, args.pairs, args.seed)
    texts = {f"d{i}": doc for i, doc in enumerate(documents)}
    print(f"pairs: {len(pairs):,} over {len({d for d, _ in pairs}):,} documents of ~{args.doc_words} words")

    local_s, local = timed(LocalExecutor(args.block_size), texts, pairs, args.block_size)
    began = time.perf_counter()
    ray_ex = make_executor(ExecutorConfig(kind="ray", num_cpus=2, block_size=args.block_size))
    try:
        workers = ray_ex.workers
        # Warm-up: start every worker and load the matcher there, as an earlier stage would have.
        warm = pairs[: 4 * workers]
        timed(ray_ex, texts, warm, 1)
        startup_s = time.perf_counter() - began
        ray_s, on_ray = timed(ray_ex, texts, pairs, args.block_size)
    finally:
        ray_ex.close()

    outcomes = Counter(m if isinstance(m, str) else "+".join(s["method"] for s in m) for m in local)
    print("outcomes: " + ", ".join(f"{k} {v:,}" for k, v in outcomes.most_common()))
    print(f"local seconds: {local_s:.2f}")
    print(f"ray seconds:   {ray_s:.2f} ({workers} workers; start-up and worker warm-up {startup_s:.2f} s not included)")
    speedup = local_s / ray_s if ray_s else float("inf")
    verdict = "met" if speedup >= TARGET_SPEEDUP else "MISSED"
    print(f"speed-up:      {speedup:.2f}x (target >= {TARGET_SPEEDUP}x: {verdict})")
    same = on_ray == local
    print(f"identical spans: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
