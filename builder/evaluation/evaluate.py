"""Run each retriever once per dataset (cached), then score it by position, length and window."""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from builder.evaluation.comparison import comparison_table
from builder.evaluation.confounds import describe, psi_by_overlap, query_features
from builder.evaluation.data import EvalData
from builder.evaluation.figures import Averaging, Figures
from builder.evaluation.intervals import BootstrapSettings
from builder.evaluation.metrics import NDCG, per_query_scores, with_relative_bins
from builder.evaluation.psi_null import null_settings
from builder.evaluation.retrievers import RerankerFactory, Retrieval, RetrieverSpec, get_scorer, rerank
from builder.evaluation.runs import (
    PER_QUERY_FILE,
    judged_at,
    per_query_columns,
    run_file_name,
    run_summary,
    write_per_query,
    write_run,
)
from builder.evaluation.search import first_stage
from builder.evaluation.significance import compare_retrievers
from builder.evaluation.trend import position_trend
from builder.families import families
from builder.util.atomic import write_text_atomic

if TYPE_CHECKING:
    from builder.backends.rerankers.neural import BiEncoderScorer

TOP_K = 100
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


def retrieve(
    spec: RetrieverSpec,
    data: EvalData,
    cache: RunCache,
    batch_size: int = 32,
    rerankers: Mapping[str, RerankerFactory] | None = None,
    encoders: Mapping[str, BiEncoderScorer] | None = None,
) -> tuple[Retrieval, bool]:
    """The retrieval for `spec` and whether it came from the cache; a dense first stage
    takes its bi-encoder from `encoders` (by spec label) where one is there."""
    cached = cache.load(spec)
    if cached is not None:
        return cached, True
    if spec.kind == "rerank":
        assert spec.first is not None and spec.reranker is not None
        scorer = get_scorer(spec.reranker, rerankers)
        base, _ = retrieve(spec.first, data, cache, batch_size, rerankers, encoders)
        result = rerank(base, data, scorer, TOP_K)
    else:
        result = first_stage(
            spec, data, TOP_K, batch_size, scratch=cache.scratch(), encoder=(encoders or {}).get(spec.label)
        )
    cache.save(spec, result)
    return result, False


def evaluate(
    data: EvalData,
    specs: list[RetrieverSpec],
    cache_dir: Path,
    batch_size: int = 32,
    rerankers: Mapping[str, RerankerFactory] | None = None,
    log: Log = lambda _: None,
    bootstrap: BootstrapSettings = BootstrapSettings(),
    averaging: Averaging | None = None,
    runs_dir: Path | None = None,
) -> dict:
    """The whole report (the content of eval.json) for every retriever; with `runs_dir`,
    each retriever's TREC run file and the per-query table are written there."""
    cache = RunCache(cache_dir, data.fingerprint)
    averaging = averaging or default_averaging(data)
    report: dict = {
        "dataset": _describe(data),
        "definitions": definitions(data, bootstrap, averaging),
        "retrievers": {},
    }
    # What a stage family adds per retriever (e.g. ColDeR's probe tests), where the data has it.
    extras = [f.retriever_figures(data) for f in families() if f.retriever_figures is not None]
    features = query_features(data)
    if features is not None:
        report["confounds"] = confounds_by_grouping(data, features, bootstrap.min_group)
    per_query: dict[str, pl.DataFrame] = {}
    tables: dict[str, pl.DataFrame] = {}
    for spec in specs:
        started = time.perf_counter()
        log(f"retrieving with {spec.label}")
        retrieval, cached = retrieve(spec, data, cache, batch_size, rerankers)
        per_query[spec.label] = scores_of(data, retrieval)
        section = analyze(data, retrieval, bootstrap, averaging, per_query[spec.label])
        section["run"] = run_summary(data.qrels, retrieval.run)
        if features is not None:
            section["psi_by_overlap"] = {
                g: psi_by_overlap(per_query[spec.label], features, g, null_settings(bootstrap))
                for g in data.groupings()
            }
        if runs_dir is not None:
            path = write_run(
                Path(runs_dir) / run_file_name(spec.label),
                retrieval.run,
                data.queries["query_id"].to_list(),
                spec.label,
            )
            section["run"]["file"] = str(path)
            tables[spec.label] = per_query[spec.label].join(
                judged_at(data.qrels, retrieval.run), on="query_id", how="left"
            )
        for extra in extras:
            if extra is not None:
                section.update(extra(spec, batch_size, rerankers, cache.path(spec), log))
        # Notes about this retriever's figures (e.g. a quality-control stage that used it).
        section["notes"] = []
        section.update(cached=cached, seconds=round(time.perf_counter() - started, 2))
        report["retrievers"][spec.label] = section
        log(f"{spec.label}: nDCG@10 {section['overall'][NDCG]['value']:.4f}" + (" (cached run)" if cached else ""))
    if len(per_query) > 1:
        report["comparisons"] = compare_retrievers(per_query, compared_partitions(data, per_query), bootstrap)
    report["comparison_table"] = comparison_table(report)
    if runs_dir is not None and tables:
        columns = per_query_columns(next(iter(tables.values())), data.groupings())
        report["per_query_file"] = str(
            write_per_query(Path(runs_dir) / PER_QUERY_FILE, {k: v.select(columns) for k, v in tables.items()})
        )
    return report


def confounds_by_grouping(data: EvalData, features: pl.DataFrame, min_group: int) -> dict:
    """For each of the dataset's groupings, what else differs between its groups."""
    joined = features.join(data.queries.select("query_id", *data.groupings()), on="query_id", how="left")
    return {g: describe(features, joined[g], min_group, g) for g in data.groupings()}


def compared_partitions(data: EvalData, per_query: dict[str, pl.DataFrame]) -> list[str]:
    """The position groups two retrievers are tested on: the dataset's groupings, and the
    20 relative bins where the dataset has no bins of its own."""
    groupings = data.groupings()
    scores = next(iter(per_query.values()))
    if "position_bin" not in groupings and scores["rel_bin"].null_count() < scores.height:
        groupings.append("rel_bin")
    return groupings


def default_averaging(data: EvalData) -> Averaging:
    """PosIR averages a length bucket's bin means; build-bench's own figures average queries."""
    return "bins" if data.positions == "posir" else "queries"


def definitions(data: EvalData, bootstrap: BootstrapSettings, averaging: Averaging) -> dict:
    """How every figure was defined, named next to the figures."""
    return {
        "positions": data.positions,
        "anchor": data.anchor,
        "bins": "right-closed (PosIR)" if data.positions == "posir" else "left-closed",
        "length_averaging": averaging,
        "intervals": bootstrap.describe(),
        "tests": {
            "permutations": bootstrap.permutations,
            "correction": "Holm, within each family",
            "psi_null": "position labels shuffled among the queries of each length bucket; groups under "
            "min_group " + ("included" if bootstrap.psi_small_groups else "left out"),
        },
    }


def _describe(data: EvalData) -> dict:
    return {
        "path": str(data.folder),
        "fingerprint": data.fingerprint,
        "docs": data.corpus.height,
        "queries": data.queries.height,
        "unjudged_queries": data.unjudged_queries,
        "groupings": data.groupings(),
        "positions": data.positions,
        "has_rel_pos": "rel_pos" in data.queries.columns,
        "has_length_buckets": "length_bucket" in data.queries.columns,
    }


def scores_of(data: EvalData, retrieval: Retrieval) -> pl.DataFrame:
    """Per-query scores with the query's position groups, relative bin and visibility."""
    scores = per_query_scores(data.qrels, retrieval.run).join(data.queries, on="query_id", how="left")
    return with_relative_bins(scores, data.positions).with_columns(visibility(data, retrieval).alias("visibility"))


def analyze(
    data: EvalData,
    retrieval: Retrieval,
    bootstrap: BootstrapSettings = BootstrapSettings(),
    averaging: Averaging | None = None,
    scores: pl.DataFrame | None = None,
) -> dict:
    """One retriever's figures; `scores` are its per-query scores where already computed."""
    scores = scores_of(data, retrieval) if scores is None else scores
    figures = Figures(scores, data.groupings(), bootstrap)
    return {
        "overall": figures.overall(),
        "groupings": {g: figures.grouping(g) for g in data.groupings()},
        "relative_bins": figures.grouping("rel_bin") if figures.has("rel_bin") else None,
        "length_buckets": figures.length_buckets(averaging or default_averaging(data)),
        "trend": position_trend(scores, bootstrap),
        "truncation": _truncation(data, retrieval, figures),
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


def _truncation(data: EvalData, retrieval: Retrieval, figures: Figures) -> dict:
    limit = retrieval.max_length
    over = sum(1 for n in retrieval.doc_tokens.values() if limit is not None and n > limit)
    out = {
        "max_length": limit,
        "tokenizer": retrieval.tokenizer,
        "positive_docs": len({d for judged in data.qrels.values() for d in judged}),
        "positive_docs_over_limit": over,
        "queries": figures.visibility(),
    }
    if out["queries"]["beyond"]["n"]:
        # Position effects among queries whose evidence the model did read.
        out["visible_only"] = {g: figures.grouping(f"visible/{g}") for g in data.groupings()}
    return out
