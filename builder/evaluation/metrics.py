"""Per-query nDCG@10 and Recall@100, relative-position bins and the position trend.

Ranks follow trec_eval (and so BEIR, MTEB, pytrec_eval, ir_measures): score descending,
ties by document id descending, whatever order the retriever returned them in. nDCG uses
the judged grade as gain and log2(rank + 1) as discount; Recall@100 counts documents
judged 1 or higher.

PSI = 1 - min(s) / max(s) over the mean scores s of the position groups (Zeng et al.);
groups without queries are left out of s and counted (figures.py, with its interval).
PosIR reports it inside each length bucket over 20 equal-width relative-position bins.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

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
        {
            "query_id": query_ids,
            NDCG: [ndcg_at(qrels[q], r) for q, r in zip(query_ids, rankings)],
            RECALL: [recall_at(qrels[q], r) for q, r in zip(query_ids, rankings)],
        },
        schema={"query_id": pl.Utf8, NDCG: pl.Float64, RECALL: pl.Float64},
    )


def group_universe(column: str, observed: Sequence[object]) -> list[object]:
    """Every group a column can hold, so that empty groups are seen and counted."""
    seen = [v for v in observed if v is not None]
    if column in ("position_bin", "rel_bin"):
        top = max([N_BINS - 1, *(int(v) for v in seen)])
        return list(range(top + 1))
    if column == "position_tag":
        return [*TAGS, *sorted({str(v) for v in seen} - set(TAGS))]
    return sorted(set(seen), key=natural_key)


def natural_key(label: object) -> tuple:
    """'0-100' < '100-200' < '500+'; 'Q2' < 'Q10'."""
    text = str(label)
    number = re.search(r"\d+", text)
    return (int(number.group()) if number else float("inf"), text)


def with_relative_bins(scores: pl.DataFrame, definition: Definition = "native") -> pl.DataFrame:
    """Add `rel_bin`: the 20-bin index of rel_pos under `definition`, else the dataset's own bin."""
    if "rel_pos" in scores.columns:
        bins = pl.col("rel_pos").map_elements(lambda r: bin_of(definition, r, N_BINS), return_dtype=pl.Int64)
    elif "position_bin" in scores.columns:
        bins = pl.col("position_bin").cast(pl.Int64)
    else:
        bins = pl.lit(None, dtype=pl.Int64)
    return scores.with_columns(bins.alias("rel_bin"))
