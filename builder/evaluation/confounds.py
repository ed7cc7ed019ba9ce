"""What else differs between position groups: the confounds a PSI may be measuring.

In an observed benchmark the start, middle and end groups can differ in more than where
the evidence sits. Per query: `overlap` (the share of the query's content words, as BM25
tokenizes them without stopwords, found in the evidence span), `span_bm25` (BM25 of the
query against its span alone, the spans as the corpus), `span_words`, `doc_words`, and
the question type (its first word: what, when, who, ...). Per group of at least
`min_group` queries: mean and standard deviation of each, and the question-type mix; a
standardized mean difference (difference of means / root of the mean of the two
variances; for a question type, of its indicator) above 0.2 between two groups is a
warning naming the confound. `psi_by_overlap` takes PSI with its null within overlap
tertiles, so a reader sees whether a position effect survives holding overlap fixed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from itertools import combinations

import numpy as np
import polars as pl

from builder.backends.rerankers import BM25Config
from builder.backends.rerankers.bm25 import BM25Scorer, stopwords, terms_of
from builder.evaluation.data import EvalData
from builder.evaluation.metrics import group_universe
from builder.evaluation.positions import first_span
from builder.evaluation.psi_null import NullSettings, psi_null_text, psi_with_null
from builder.io.built_folder import BuiltFolder

FEATURES = ("overlap", "span_bm25", "span_words", "doc_words")
QUESTION_TYPES = ("what", "when", "where", "who", "which", "why", "how")
SMD_LIMIT = 0.2


def question_type(text: str) -> str:
    first = text.strip().split(maxsplit=1)[0].lower().strip("?,.:;\"'") if text.strip() else ""
    return first if first in QUESTION_TYPES else "other"


def overlap_share(query: str, span: str, stop: frozenset[str]) -> float | None:
    """The share of the query's distinct content words that occur in the span."""
    wanted = set(terms_of(query, stop))
    return len(wanted & set(terms_of(span, stop))) / len(wanted) if wanted else None


def _with_spans(data: EvalData) -> pl.DataFrame:
    """The evaluated queries with their span columns: eval keeps only the span start, so the
    spans come from the folder's queries.parquet where it has them."""
    if first_span(data.queries) is not None:
        return data.queries
    path = BuiltFolder.open(data.folder).path("queries")
    if not path.is_file():
        return data.queries
    columns = [c for c in ("query_id", "spans", "pos_char_span") if c in pl.read_parquet_schema(path)]
    if len(columns) < 2:
        return data.queries
    spans = pl.read_parquet(path, columns=columns).with_columns(pl.col("query_id").cast(pl.Utf8))
    return data.queries.join(spans, on="query_id", how="left")


def query_features(data: EvalData) -> pl.DataFrame | None:
    """One row per query with an evidence span: the features above; None without spans."""
    queries = _with_spans(data)
    span = first_span(queries)
    if span is None:
        return None
    wanted = queries.select(pl.col("doc_id").unique())["doc_id"].to_list()
    docs = dict(data.corpus.select(set(wanted)).select("doc_id", "text").iter_rows())
    return span_features(queries, docs)


def span_features(queries: pl.DataFrame, doc_texts: Mapping[str, str]) -> pl.DataFrame | None:
    """The features of every query of `queries` (query_id, text, doc_id and a span column
    `first_span` reads) that has a span, its document's text from `doc_texts`; None
    where no query has one. The build's stats and eval share it."""
    span = first_span(queries)
    if span is None:
        return None
    rows = queries.select("query_id", "text", "doc_id", span.alias("_span")).filter(pl.col("_span").is_not_null())
    if rows.height == 0:
        return None
    stop = stopwords(BM25Config())
    spans, out = [], []
    for qid, query, doc, (start, end) in rows.iter_rows():
        text = doc_texts.get(doc) or ""
        evidence = text[int(start) : int(end)]
        spans.append((query, evidence))
        out.append(
            (qid, overlap_share(query, evidence, stop), len(evidence.split()), len(text.split()), question_type(query))
        )
    frame = pl.DataFrame(
        out,
        schema={
            "query_id": pl.Utf8,
            "overlap": pl.Float64,
            "span_words": pl.Int64,
            "doc_words": pl.Int64,
            "question_type": pl.Utf8,
        },
        orient="row",
    )
    bm25 = BM25Scorer("span BM25", BM25Config()).score_pairs(spans)
    return frame.with_columns(pl.Series("span_bm25", bm25, dtype=pl.Float64))


def smd(a: np.ndarray, b: np.ndarray) -> float | None:
    """(mean a - mean b) / sqrt((var a + var b) / 2); None where neither varies."""
    if len(a) < 2 or len(b) < 2:
        return None
    spread = math.sqrt((np.var(a, ddof=1) + np.var(b, ddof=1)) / 2)
    return float((np.mean(a) - np.mean(b)) / spread) if spread > 1e-12 else None


def describe(features: pl.DataFrame, labels: pl.Series, min_group: int, grouping: str) -> dict:
    """Per group: n, mean and sd of each feature, question-type shares; SMDs between groups
    of at least `min_group` queries and the warnings they raise."""
    frame = features.with_columns(labels.alias("_group")).filter(pl.col("_group").is_not_null())
    types = sorted(set(frame["question_type"].to_list()))
    groups, arrays = [], {}
    for group in group_universe(grouping, frame["_group"].to_list()):
        part = frame.filter(pl.col("_group") == group)
        if part.height == 0:
            continue
        entry: dict = {"group": group, "n": part.height}
        for feature in FEATURES:
            values = part[feature].drop_nulls().to_numpy().astype(float)
            entry[feature] = {
                "mean": float(values.mean()) if values.size else None,
                "sd": float(values.std(ddof=1)) if values.size > 1 else None,
            }
        entry["question_types"] = {t: float((part["question_type"] == t).mean()) for t in types}
        groups.append(entry)
        if part.height >= min_group:
            arrays[group] = {
                **{f: part[f].drop_nulls().to_numpy().astype(float) for f in FEATURES},
                **{f"question type '{t}'": (part["question_type"] == t).to_numpy().astype(float) for t in types},
            }
    differences, warnings = [], []
    for first, second in combinations(arrays, 2):
        for name in arrays[first]:
            value = smd(arrays[first][name], arrays[second][name])
            differences.append({"a": first, "b": second, "feature": name, "smd": value})
            if value is not None and abs(value) > SMD_LIMIT:
                warnings.append(
                    f"{grouping} {first} and {second} differ in {name} (standardized mean difference "
                    f"{value:+.2f}): PSI over {grouping} measures it too"
                )
    return {"groups": groups, "smd": differences, "warnings": warnings, "compared_groups": list(arrays)}


def psi_by_overlap(
    scores: pl.DataFrame, features: pl.DataFrame, grouping: str, settings: NullSettings, metric: str = "ndcg@10"
) -> list[dict]:
    """PSI with its null within each overlap tertile (strata: length bucket where known)."""
    joined = scores.join(features.select("query_id", "overlap"), on="query_id", how="inner").filter(
        pl.col("overlap").is_not_null() & pl.col(grouping).is_not_null()
    )
    if joined.height < 3:
        return []
    edges = np.quantile(joined["overlap"].to_numpy(), [1 / 3, 2 / 3])
    universe = group_universe(grouping, joined[grouping].to_list())
    index = {g: i for i, g in enumerate(universe)}
    out = []
    tertile = np.searchsorted(edges, joined["overlap"].to_numpy(), side="right")
    buckets = joined["length_bucket"].to_list() if "length_bucket" in joined.columns else None
    for k, name in enumerate(("low", "middle", "high")):
        part = tertile == k
        codes = np.array([index[g] for g in joined[grouping].to_list()])[part]
        strata = None
        if buckets is not None:
            kept = [b for b, keep in zip(buckets, part) if keep]
            order = {b: i for i, b in enumerate(dict.fromkeys(kept))}
            strata = np.array([order[b] for b in kept])
        values = joined[metric].to_numpy()[part]
        low = float(edges[k - 1]) if k else float(joined["overlap"].min())
        high = float(edges[k]) if k < 2 else float(joined["overlap"].max())
        sizes = np.bincount(codes, minlength=len(universe))
        out.append(
            {
                "tertile": name,
                "overlap_from": low,
                "overlap_to": high,
                "n": int(part.sum()),
                "group_n": {str(g): int(sizes[i]) for i, g in enumerate(universe)},
                "psi": psi_with_null(values, codes, universe, settings, strata),
            }
        )
    return out


def overlap_psi_text(tertile: dict, min_group: int) -> str:
    """`low overlap (0.333-0.500, n 3): <PSI with its null>`, or which groups were too small."""
    return f"{tertile_label(tertile)[:-1]}, n {tertile['n']}): {tertile_psi_text(tertile, min_group)}"


def tertile_label(tertile: dict) -> str:
    return f"{tertile['tertile']} overlap ({tertile['overlap_from']:.3f}-{tertile['overlap_to']:.3f})"


def tertile_psi_text(tertile: dict, min_group: int) -> str:
    """The tertile's PSI with its null; without one, the size of each group it holds."""
    if tertile["psi"]["value"] is not None:
        return psi_null_text(tertile["psi"])
    sizes = ", ".join(f"{g}: {n}" for g, n in tertile.get("group_n", {}).items() if n)
    return f"no PSI: fewer than 2 groups of at least {min_group} queries ({sizes})"
