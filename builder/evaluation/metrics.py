"""Per-query nDCG@10 and Recall@100, grouped means, PSI and the position trend.

Ranks follow trec_eval (and so BEIR, MTEB, pytrec_eval, ir_measures): score descending,
ties by document id descending, whatever order the retriever returned them in. nDCG uses
the judged grade as gain and log2(rank + 1) as discount; Recall@100 counts documents
judged 1 or higher.

PSI = 1 - min(s) / max(s) over the mean scores s of the position groups (Zeng et al.);
groups without queries are left out of s and counted. PosIR reports it inside each
length bucket over 20 equal-width relative-position bins.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from builder.evaluation.positions import Definition, bin_of

NDCG, RECALL = "ndcg@10", "recall@100"
METRICS = (NDCG, RECALL)
N_BINS = 20
TAGS = ("beginning", "middle", "end")


def trec_order(scores: dict[str, float]) -> list[str]:
    """Documents best first, as trec_eval ranks them: score descending, then id descending."""
    return sorted(scores, key=lambda doc: (scores[doc], doc), reverse=True)


def ndcg_at(judged: dict[str, int], ranking: list[str], k: int = 10) -> float:
    gains = sorted((g for g in judged.values() if g > 0), reverse=True)[:k]
    ideal = sum(g / math.log2(rank + 2) for rank, g in enumerate(gains))
    if ideal == 0:
        return 0.0
    found = sum(max(judged.get(doc, 0), 0) / math.log2(rank + 2) for rank, doc in enumerate(ranking[:k]))
    return found / ideal


def recall_at(judged: dict[str, int], ranking: list[str], k: int = 100) -> float:
    relevant = {doc for doc, g in judged.items() if g >= 1}
    return len(relevant.intersection(ranking[:k])) / len(relevant) if relevant else 0.0


def per_query_scores(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]]) -> pl.DataFrame:
    """One row per judged query; a query with nothing retrieved scores 0."""
    query_ids = list(qrels)
    rankings = [trec_order(run.get(q, {})) for q in query_ids]
    return pl.DataFrame(
        {"query_id": query_ids,
         NDCG: [ndcg_at(qrels[q], r) for q, r in zip(query_ids, rankings)],
         RECALL: [recall_at(qrels[q], r) for q, r in zip(query_ids, rankings)]},
        schema={"query_id": pl.Utf8, NDCG: pl.Float64, RECALL: pl.Float64},
    )


@dataclass(frozen=True)
class PSI:
    value: float | None  # None when no group scores above zero
    groups: int  # groups with at least one query
    empty: int  # groups without queries, left out of the min and max


def psi(scores: Sequence[float | None]) -> PSI:
    present = [s for s in scores if s is not None]
    empty = len(scores) - len(present)
    if not present or max(present) <= 0:
        return PSI(None, len(present), empty)
    return PSI(1.0 - min(present) / max(present), len(present), empty)


def means(scores: pl.DataFrame) -> dict[str, float | int | None]:
    """Query count and mean of each metric (None for no queries)."""
    row = scores.select(pl.len().alias("n"), *[pl.col(m).mean() for m in METRICS]).row(0, named=True)
    return {"n": row["n"], **{m: row[m] for m in METRICS}}


def group_universe(column: str, observed: Sequence[object]) -> list[object]:
    """Every group a column can hold, so that empty groups are seen and counted."""
    seen = [v for v in observed if v is not None]
    if column in ("position_bin", "rel_bin"):
        top = max([N_BINS - 1, *(int(v) for v in seen)])
        return list(range(top + 1))
    if column == "position_tag":
        return [*TAGS, *sorted({str(v) for v in seen} - set(TAGS))]
    return sorted(set(seen), key=_natural_key)


def _natural_key(label: object) -> tuple:
    """'0-100' < '100-200' < '500+'; 'Q2' < 'Q10'."""
    text = str(label)
    number = re.search(r"\d+", text)
    return (int(number.group()) if number else float("inf"), text)


def grouped(scores: pl.DataFrame, column: str) -> dict:
    """Means per group (empty groups listed with n=0 and no scores) and the PSI over nDCG@10."""
    universe = group_universe(column, scores[column].unique().to_list())
    stats = {row[column]: row for row in scores.group_by(column).agg(
        pl.len().alias("n"), *[pl.col(m).mean() for m in METRICS]
    ).iter_rows(named=True)}
    groups = [
        {"group": g, "n": stats[g]["n"] if g in stats else 0, **{m: stats[g][m] if g in stats else None for m in METRICS}}
        for g in universe
    ]
    index = psi([g[NDCG] for g in groups])
    return {"groups": groups, "psi": index.value, "groups_with_queries": index.groups, "empty_groups": index.empty}


def with_relative_bins(scores: pl.DataFrame, definition: Definition = "native") -> pl.DataFrame:
    """Add `rel_bin`: the 20-bin index of rel_pos under `definition`, else the dataset's own bin."""
    if "rel_pos" in scores.columns:
        bins = pl.col("rel_pos").map_elements(lambda r: bin_of(definition, r, N_BINS), return_dtype=pl.Int64)
    elif "position_bin" in scores.columns:
        bins = pl.col("position_bin").cast(pl.Int64)
    else:
        bins = pl.lit(None, dtype=pl.Int64)
    return scores.with_columns(bins.alias("rel_bin"))


def by_length_bucket(scores: pl.DataFrame) -> dict[str, dict]:
    """PosIR parity: the means of each length bucket and the PSI over its 20 position bins."""
    if "length_bucket" not in scores.columns:
        return {}
    out = {}
    labels = sorted(scores["length_bucket"].drop_nulls().unique().to_list(), key=_natural_key)
    for label in labels:
        part = scores.filter(pl.col("length_bucket") == label)
        bins = grouped(part.drop_nulls("rel_bin"), "rel_bin") if part["rel_bin"].null_count() < part.height else None
        out[label] = {
            **means(part),
            "psi_bins": bins["psi"] if bins else None,
            "bins_with_queries": bins["groups_with_queries"] if bins else 0,
            "empty_bins": bins["empty_groups"] if bins else N_BINS,
        }
    return out


def position_trend(scores: pl.DataFrame) -> dict[str, float | int | None]:
    """Least-squares slope and Spearman correlation of per-query nDCG@10 against rel_pos."""
    if "rel_pos" not in scores.columns:
        return {"n": 0, "slope": None, "spearman": None}
    part = scores.drop_nulls("rel_pos")
    if part.height < 2:
        return {"n": part.height, "slope": None, "spearman": None}
    row = part.select(
        (pl.cov("rel_pos", NDCG) / pl.col("rel_pos").var()).alias("slope"),
        pl.corr("rel_pos", NDCG, method="spearman").alias("spearman"),
    ).row(0, named=True)
    return {"n": part.height, **{k: _finite(v) for k, v in row.items()}}


def _finite(value: float | None) -> float | None:
    """Constant inputs give NaN or inf; report those as undefined."""
    if value is None or not math.isfinite(value):
        return None
    return float(value)
