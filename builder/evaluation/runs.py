"""Each retriever's run as a TREC run file, the per-query table, and what a run leaves out.

A run file has one line per retrieved document, `qid Q0 docid rank score tag`, ranked as
eval ranks (score descending, ties by document id descending, as trec_eval does), so
trec_eval, pytrec_eval, ir_measures and ranx read the same figures from it; scores have
6 decimals. `Judged@10` is the share of the documents a query retrieved in its top 10
that the qrels judge (any grade): over 10, or over the documents retrieved where the run
holds fewer (ir_measures' Judged@10, checked against it in the tests); a query the run
retrieves nothing for counts 0, as in ir_measures. The top 10 is eval's ranking (ties by
document id descending, as trec_eval and the run file); ir_measures' own Judged orders
tied scores by document id ascending, so where a tie straddles the 10th place the two
can differ by that tie. A one-positive set with a low Judged@10 says its nDCG counts
unjudged documents as misses.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from builder.evaluation.metrics import trec_order
from builder.util.atomic import write_text_atomic

JUDGED = "judged@10"
PER_QUERY_FILE = "per_query.tsv"


def run_file_name(label: str) -> str:
    """A file name for a retriever's run: its label with anything unsafe replaced."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("_")[:80] + ".run"


def run_lines(run: dict[str, dict[str, float]], query_ids: list[str], tag: str) -> list[str]:
    """TREC run lines for `query_ids` in that order; a query retrieving nothing has none."""
    tag = re.sub(r"\s+", "_", tag)
    return [
        f"{qid} Q0 {doc} {rank} {run[qid][doc]:.6f} {tag}"
        for qid in query_ids
        for rank, doc in enumerate(trec_order(run.get(qid, {})), start=1)
    ]


def write_run(path: Path, run: dict[str, dict[str, float]], query_ids: list[str], tag: str) -> Path:
    lines = run_lines(run, query_ids, tag)
    write_text_atomic(path, "\n".join(lines) + ("\n" if lines else ""))
    return path


def judged_at(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]], k: int = 10) -> pl.DataFrame:
    """Per judged query: the share of its top `k` (or of all it retrieved, where fewer)
    judged in the qrels, 0 where the run retrieved nothing; and whether it did."""
    rows = []
    for qid, judged in qrels.items():
        ranking = trec_order(run.get(qid, {}))[:k]
        share = sum(doc in judged for doc in ranking) / len(ranking) if ranking else 0.0
        rows.append((qid, share, not ranking))
    return pl.DataFrame(
        rows, schema={"query_id": pl.Utf8, JUDGED: pl.Float64, "missing_from_run": pl.Boolean}, orient="row"
    )


def run_summary(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]]) -> dict:
    """Judged@10 (mean over judged queries) and how many judged queries the run misses."""
    table = judged_at(qrels, run)
    return {
        JUDGED: float(table[JUDGED].mean()) if table.height else None,
        "queries_missing": int(table["missing_from_run"].sum()),
        "queries_judged": table.height,
    }


def write_per_query(path: Path, tables: dict[str, pl.DataFrame]) -> Path:
    """One row per (retriever, query): group labels and every metric, tab-separated."""
    frames = [table.select(pl.lit(label).alias("retriever"), pl.all()) for label, table in tables.items()]
    combined = pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()
    path.parent.mkdir(parents=True, exist_ok=True)
    combined.write_csv(path, separator="\t")
    return path


def per_query_columns(scores: pl.DataFrame, groupings: list[str]) -> list[str]:
    """The per-query table's columns that `scores` holds: id, group labels, metrics."""
    wanted = [
        "query_id",
        *groupings,
        "rel_pos",
        "rel_bin",
        "length_bucket",
        "visibility",
        "ndcg@10",
        "recall@100",
        JUDGED,
        "missing_from_run",
    ]
    return [c for c in dict.fromkeys(wanted) if c in scores.columns]
