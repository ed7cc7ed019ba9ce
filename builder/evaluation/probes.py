"""ColDeR's probe test (paper 004, §3.3-3.4): does a retriever score document D1 above D2?

A `colder_probes` build lists each query's document pairs in `pairs.parquet` (A = the
paper's D1). The retriever scores both documents of every pair for the query, the raw
score it ranks by (BM25 with the whole corpus's statistics, the bi-encoder's cosine, the
reranker's score), and a paired t-test (`scipy.stats.ttest_rel`) runs per probe, in the
paper's direction: R(D1) - R(D2), except the moving-evidence probe, which the paper
reports as R(D_i) - R(D_1) (evidence at sentence i against evidence first; negative means
the retriever prefers the evidence early), one test per position i. Effect size: Cohen's
d for paired samples (mean difference / standard deviation of the differences). The tests
of one probe kind (the 19 positions of moving evidence, say) are one family, Holm-corrected.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import polars as pl
from scipy import stats

from builder.evaluation.data import EvalData, EvalError
from builder.evaluation.multiple import apply_holm
from builder.evaluation.retrievers import RerankerFactory, RetrieverSpec, document_inputs, get_scorer
from builder.io.built_folder import TABLE_FILES, BuiltFolder
from builder.util.atomic import write_text_atomic

PAIRS_FILE = TABLE_FILES["pairs"]
MOVING = "position_i"  # the probe the paper reports as R(D_i) - R(D_1)
PairScorer = Callable[[Sequence[tuple[str, str]]], list[float]]


def probe_pairs(data: EvalData) -> pl.DataFrame | None:
    """The (query, doc_a, doc_b) pairs of a ColDeR build whose query and documents are
    evaluated, with each document's variant name; None for any other folder."""
    path = BuiltFolder.open(data.folder).path("pairs")
    if not path.is_file() or "variant" not in data.queries.columns:
        return None
    pairs = pl.read_parquet(path).select("query_id", "setting", "doc_a", "doc_b")
    texts = data.queries.select("query_id", pl.col("text").alias("query"))
    docs = data.corpus.doc_ids.implode()
    pairs = pairs.join(texts, on="query_id", how="inner").filter(
        pl.col("doc_a").is_in(docs) & pl.col("doc_b").is_in(docs)
    )
    return pairs if pairs.height else None


def pair_scorer(
    spec: RetrieverSpec, data: EvalData, batch_size: int = 32, rerankers: Mapping[str, RerankerFactory] | None = None
) -> PairScorer:
    """Scores (query, document input) pairs as `spec` ranks them."""
    if spec.kind == "rerank":
        assert spec.reranker is not None
        scorer = get_scorer(spec.reranker, rerankers)
        return lambda pairs: [s for q, t in pairs for s in scorer(q, [t])]
    if spec.kind == "bm25":
        from builder.backends.rerankers import BM25Config
        from builder.backends.rerankers.bm25 import BM25Scorer

        bm25 = BM25Scorer(spec.label, BM25Config())
        bm25.fit(document_inputs(data.corpus.frame())[0])  # the corpus's term statistics, as in retrieval
        return bm25.score_pairs
    from builder.evaluation.dense import dense_scorer

    return dense_scorer(spec, batch_size).score_pairs


def probe_scores(pairs: pl.DataFrame, data: EvalData, score: PairScorer) -> pl.DataFrame:
    """`pairs` with the retriever's score of each document: score_a, score_b."""
    documents = data.corpus.select(set(pairs["doc_a"]) | set(pairs["doc_b"]))
    inputs = dict(zip(documents["doc_id"], document_inputs(documents)[0]))
    queries = pairs["query"].to_list()
    a = score([(q, inputs[d]) for q, d in zip(queries, pairs["doc_a"])])
    b = score([(q, inputs[d]) for q, d in zip(queries, pairs["doc_b"])])
    if len(a) != pairs.height or len(b) != pairs.height:
        raise EvalError(f"the retriever returned {len(a)} and {len(b)} scores for {pairs.height} pairs")
    return pairs.with_columns(pl.Series("score_a", a, dtype=pl.Float64), pl.Series("score_b", b, dtype=pl.Float64))


def paired_t(first: np.ndarray, second: np.ndarray) -> dict:
    """ttest_rel(first, second): t, two-sided p, mean of first - second, Cohen's d (paired)."""
    n = len(first)
    difference = first - second
    out: dict = {
        "n": n,
        "mean_difference": float(difference.mean()) if n else None,
        "t": None,
        "p": None,
        "cohens_d": None,
    }
    spread = float(difference.std(ddof=1)) if n > 1 else 0.0
    if n < 2 or spread <= 1e-12 * max(1.0, float(np.abs(difference).max())):
        return out  # no spread beyond rounding: t and d are undefined
    result = stats.ttest_rel(first, second)
    return {
        **out,
        "t": float(result.statistic),
        "p": float(result.pvalue),
        "cohens_d": float(difference.mean() / spread),
    }


def probe_tests(scored: pl.DataFrame) -> list[dict]:
    """One t-test per probe (per position i for the moving-evidence probe), paper's direction;
    `scored` names each pair's documents by their role in it (variant_a, variant_b)."""
    out = []
    keys = (
        scored.select("setting", "variant_a", "variant_b")
        .unique(maintain_order=True)
        .sort("setting", "variant_b", maintain_order=True)
    )
    for setting, variant_a, variant_b in keys.iter_rows():
        part = scored.filter(
            (pl.col("setting") == setting) & (pl.col("variant_a") == variant_a) & (pl.col("variant_b") == variant_b)
        )
        a, b = part["score_a"].to_numpy(), part["score_b"].to_numpy()
        moving = setting == MOVING
        result = paired_t(b, a) if moving else paired_t(a, b)
        first, second = (variant_b, variant_a) if moving else (variant_a, variant_b)
        wins = float(np.mean((b > a) if moving else (a > b)))
        out.append(
            {
                "setting": setting,
                "difference": f"R({first}) - R({second})",
                **result,
                "share_first_higher": wins,
                "test": "paired t-test (scipy.stats.ttest_rel)",
            }
        )
    for setting in dict.fromkeys(row["setting"] for row in out):
        apply_holm([row for row in out if row["setting"] == setting], f"probe {setting}")
    return out


def colder_report(
    spec: RetrieverSpec,
    data: EvalData,
    pairs: pl.DataFrame,
    batch_size: int = 32,
    rerankers: Mapping[str, RerankerFactory] | None = None,
    cache_file: Path | None = None,
) -> list[dict]:
    """The probe tests of one retriever on a ColDeR build; the pair scores are kept in
    `cache_file` and reused while the pairs stay the same."""
    scored = _cached(cache_file, pairs)
    if scored is None:
        scored = probe_scores(pairs, data, pair_scorer(spec, data, batch_size, rerankers))
        if cache_file is not None:
            keep = {
                "pairs": pairs.select("query_id", "doc_a", "doc_b").rows(),
                "score_a": scored["score_a"].to_list(),
                "score_b": scored["score_b"].to_list(),
            }
            write_text_atomic(cache_file, json.dumps(keep))
    return probe_tests(with_roles(scored, data))


def _cached(cache_file: Path | None, pairs: pl.DataFrame) -> pl.DataFrame | None:
    if cache_file is None or not cache_file.is_file():
        return None
    try:
        kept = json.loads(cache_file.read_text(encoding="utf-8"))
        if [tuple(p) for p in kept["pairs"]] != pairs.select("query_id", "doc_a", "doc_b").rows():
            return None
        return pairs.with_columns(
            pl.Series("score_a", kept["score_a"], dtype=pl.Float64),
            pl.Series("score_b", kept["score_b"], dtype=pl.Float64),
        )
    except (ValueError, TypeError, KeyError):
        return None  # a damaged cache file is recomputed, not trusted


def with_roles(pairs: pl.DataFrame, data: EvalData) -> pl.DataFrame:
    """`variant_a` and `variant_b`: the role of each document in its query's pair (pos01,
    evidence_first, ...). A build names a probe document `<query id>-<variant>`; where two
    documents had the same text one was kept for both and lists the other's id in
    `same_text_ids`, so the role is read from the id made for this query, and from the
    kept document's own variant where no id says more."""
    path = BuiltFolder.open(data.folder).path("corpus")
    if not path.is_file():
        raise EvalError(f"{data.folder}: {PAIRS_FILE} needs corpus.parquet with a variant column")
    columns = [c for c in ("doc_id", "variant", "same_text_ids") if c in pl.read_parquet_schema(path)]
    corpus = pl.read_parquet(path, columns=columns)
    variant = dict(zip(corpus["doc_id"].cast(pl.Utf8), corpus["variant"].cast(pl.Utf8)))
    aliases = (
        dict(zip(corpus["doc_id"].to_list(), corpus["same_text_ids"].to_list())) if "same_text_ids" in columns else {}
    )

    def role(query: str, doc: str) -> str | None:
        for original in [doc, *(aliases.get(doc) or [])]:
            if original.startswith(f"{query}-"):
                return original[len(query) + 1 :]
        return variant.get(doc)

    rows = pairs.select("query_id", "doc_a", "doc_b").rows()
    return pairs.with_columns(
        pl.Series("variant_a", [role(q, a) for q, a, _ in rows], dtype=pl.Utf8),
        pl.Series("variant_b", [role(q, b) for q, _, b in rows], dtype=pl.Utf8),
    )
