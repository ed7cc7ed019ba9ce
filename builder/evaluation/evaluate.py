"""Run each retriever once per dataset (cached), then score it by position, length and window."""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import polars as pl

from builder.atomic import write_text_atomic
from builder.evaluation.data import EvalData
from builder.evaluation.metrics import (
    NDCG,
    by_length_bucket,
    grouped,
    means,
    per_query_scores,
    position_trend,
    with_relative_bins,
)
from builder.evaluation.retrievers import RerankerFactory, Retrieval, RetrieverSpec, get_scorer, rerank
from builder.evaluation.search import first_stage

TOP_K = 100
VISIBILITY = ("visible", "beyond", "unknown")
Log = Callable[[str], None]
# Bumped whenever a retriever's output changes for the same settings, so older cached runs
# are not reused; 2: BM25 and dense search through builder.backends.retrievers; 3: dense
# ties at the top-k cut go to the earlier document.
RUN_FORMAT = 3


class RunCache:
    """One JSON file per (dataset fingerprint, retriever settings); written atomically."""

    def __init__(self, root: Path, fingerprint: str) -> None:
        self.folder = Path(root) / fingerprint[:16]

    def path(self, spec: RetrieverSpec) -> Path:
        digest = hashlib.sha256(f"{RUN_FORMAT}:{spec.cache_key()}".encode()).hexdigest()[:12]
        slug = re.sub(r"[^A-Za-z0-9._]+", "_", spec.slug())[:60]
        return self.folder / f"{slug}-{digest}.json"

    def scratch(self) -> Path:
        """Where a retriever keeps its temporary files (in a folder of its own, removed after)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        return self.folder

    def load(self, spec: RetrieverSpec) -> Retrieval | None:
        path = self.path(spec)
        if not path.is_file():
            return None
        try:
            return Retrieval.from_json(json.loads(path.read_text(encoding="utf-8")))
        except (ValueError, TypeError):
            return None  # a damaged cache file is recomputed, not trusted

    def save(self, spec: RetrieverSpec, retrieval: Retrieval) -> None:
        write_text_atomic(self.path(spec), json.dumps(retrieval.to_json()))


def retrieve(spec: RetrieverSpec, data: EvalData, cache: RunCache, batch_size: int = 32,
             rerankers: Mapping[str, RerankerFactory] | None = None) -> tuple[Retrieval, bool]:
    """The retrieval for `spec` and whether it came from the cache."""
    cached = cache.load(spec)
    if cached is not None:
        return cached, True
    if spec.kind == "rerank":
        assert spec.first is not None and spec.reranker is not None
        scorer = get_scorer(spec.reranker, rerankers)
        base, _ = retrieve(spec.first, data, cache, batch_size, rerankers)
        result = rerank(base, data, scorer, TOP_K)
    else:
        result = first_stage(spec, data, TOP_K, batch_size, scratch=cache.scratch())
    cache.save(spec, result)
    return result, False


def evaluate(data: EvalData, specs: list[RetrieverSpec], cache_dir: Path, batch_size: int = 32,
             rerankers: Mapping[str, RerankerFactory] | None = None, log: Log = lambda _: None) -> dict:
    """The whole report (the content of eval.json) for every retriever."""
    cache = RunCache(cache_dir, data.fingerprint)
    report = {"dataset": _describe(data), "retrievers": {}}
    for spec in specs:
        started = time.perf_counter()
        log(f"retrieving with {spec.label}")
        retrieval, cached = retrieve(spec, data, cache, batch_size, rerankers)
        section = analyze(data, retrieval)
        section.update(cached=cached, seconds=round(time.perf_counter() - started, 2))
        report["retrievers"][spec.label] = section
        log(f"{spec.label}: nDCG@10 {section['overall'][NDCG]:.4f}" + (" (cached run)" if cached else ""))
    return report


def _describe(data: EvalData) -> dict:
    return {
        "path": str(data.folder), "fingerprint": data.fingerprint,
        "docs": data.corpus.height, "queries": data.queries.height,
        "unjudged_queries": data.unjudged_queries, "groupings": data.groupings(),
        "positions": data.positions,
        "has_rel_pos": "rel_pos" in data.queries.columns,
        "has_length_buckets": "length_bucket" in data.queries.columns,
    }


def analyze(data: EvalData, retrieval: Retrieval) -> dict:
    scores = per_query_scores(data.qrels, retrieval.run).join(data.queries, on="query_id", how="left")
    scores = with_relative_bins(scores, data.positions).with_columns(visibility(data, retrieval).alias("visibility"))
    has_bins = scores["rel_bin"].null_count() < scores.height
    return {
        "overall": means(scores),
        "groupings": {g: grouped(scores, g) for g in data.groupings()},
        "relative_bins": grouped(scores.drop_nulls("rel_bin"), "rel_bin") if has_bins else None,
        "length_buckets": by_length_bucket(scores),
        "trend": position_trend(scores),
        "truncation": _truncation(data, retrieval, scores),
    }


def visibility(data: EvalData, retrieval: Retrieval) -> pl.Series:
    """Per query: could the model read the start of the evidence in its positive document?

    'beyond' means every span starts after the last token the model reads, so the model
    never saw it; 'unknown' means the document is over the limit but the evidence
    position or the tokenizer offsets are missing.
    """
    limit = retrieval.max_length
    status = []
    for doc, start in data.queries.select("doc_id", "evidence_start").iter_rows():
        tokens = retrieval.doc_tokens.get(doc)
        if limit is None or (tokens is not None and tokens <= limit):
            status.append("visible")
        elif doc not in retrieval.window_end or start is None:
            status.append("unknown")
        else:
            status.append("beyond" if start >= retrieval.window_end[doc] else "visible")
    return pl.Series("visibility", status, dtype=pl.Utf8)


def _truncation(data: EvalData, retrieval: Retrieval, scores: pl.DataFrame) -> dict:
    limit = retrieval.max_length
    over = sum(1 for n in retrieval.doc_tokens.values() if limit is not None and n > limit)
    out = {
        "max_length": limit, "tokenizer": retrieval.tokenizer,
        "positive_docs": len({d for judged in data.qrels.values() for d in judged}),
        "positive_docs_over_limit": over,
        "queries": {v: means(scores.filter(pl.col("visibility") == v)) for v in VISIBILITY},
    }
    if out["queries"]["beyond"]["n"]:
        # Position effects among queries whose evidence the model did read.
        visible = scores.filter(pl.col("visibility") == "visible")
        out["visible_only"] = {g: grouped(visible, g) for g in data.groupings()}
    return out
