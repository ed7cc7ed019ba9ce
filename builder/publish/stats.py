"""Statistics of a built benchmark, as the papers report them.

Every figure is optional: a table may lack the columns it needs (a quickstart build
has no queries, an early stage no spans), and then the figure is left out with a note
instead of failing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from builder.bench import Bench
from builder.io.files.locate import file_position_stats
from builder.publish.confounds import MIN_GROUP, confound_controls, position_confounds
from builder.publish.qtypes import QUERY_TYPES, query_type
from builder.records.group_ledger import SPENT_FIELDS, group_ledger, round_spent
from builder.records.qc_scorers import recorded_qc_scorers
from builder.records.run_warnings import position_group_warnings, run_warnings
from builder.records.stage_record import StageRecord
from builder.textutil.positions import length_bucket, position_bin, rel_pos, third_of

N_BINS = 20
LENGTH_BUCKET = 256
LENGTH_QUARTERS = ("Q1", "Q2", "Q3", "Q4")
TAGS = ("beginning", "middle", "end")
LLM_FIELDS = ("calls", "cache_hits", "retries", "failures", "prompt_tokens", "completion_tokens", "cached_tokens")
# The share of the answered calls that came through a provider batch (only when there was one).
BATCH_FIELDS = ("batch_calls", "batch_prompt_tokens", "batch_completion_tokens", "batch_cached_tokens")


StageItem = Mapping[str, Any] | StageRecord
RunStats = Mapping[str, Any] | Sequence[StageItem] | None


def stage_list(run_stats: RunStats) -> list[StageRecord]:
    """The per-stage records, whether given the run summary (as stats.json keeps it) or its
    `stages` list, as records or as their JSON objects."""
    if run_stats is None:
        return []
    items = run_stats.get("stages", []) if isinstance(run_stats, Mapping) else run_stats
    return [StageRecord.from_json(s) for s in items]


def compute_stats(bench: Bench, run_stats: RunStats = None, confound_min_group: int = MIN_GROUP) -> dict[str, Any]:
    """All figures for stats.json, the terminal tables, the plots and the card; thirds of
    at least `confound_min_group` queries are compared for confounds."""
    stages = stage_list(run_stats)
    notes: list[str] = []
    positions = _query_positions(bench, notes)
    summary = _position_summary(positions)
    confounds = position_confounds(bench.queries, bench.corpus, positions["position_tag"], confound_min_group)
    return {
        "counts": {
            **bench.counts(),
            "drops": bench.drops.height,
            "languages": _n_unique(bench.corpus, "lang"),
            "domains": _n_unique(bench.corpus, "domain"),
        },
        "doc_lengths": _doc_lengths(bench.corpus, stages),
        "positions": summary,
        "length_buckets": _length_buckets(positions),
        "position_by_length": _position_by_length(positions),
        "query_types": _query_types(bench.queries),
        "languages": _per_group(bench, "lang"),
        "domains": _per_group(bench, "domain"),
        "stage_table": _stage_table(stages),
        "drop_table": _drop_table(bench.drops),
        "llm": _llm_usage(stages, bench.queries.height, summary["tags"]),
        "confounds": confounds,
        # Only builds that control a confound carry the key, so others' stats.json stay as they were.
        **({"confound_controls": controls} if (controls := confound_controls(stages)) else {}),
        "warnings": run_warnings(stages)
        + position_group_warnings(summary["tags"])
        + (confounds["warnings"] if confounds else []),
        "qc_scorers": recorded_qc_scorers(stages),
        "notes": notes,
        # Only for documents read from files: the evidence's page beside its share of the text.
        **({"file_positions": located} if (located := file_position_stats(bench.queries, bench.corpus)) else {}),
    }


def _n_unique(df: pl.DataFrame, col: str) -> int:
    return int(df[col].drop_nulls().n_unique()) if col in df.columns and df.height else 0


def _doc_lengths(corpus: pl.DataFrame, stages: list[StageRecord]) -> dict[str, Any]:
    tokenizer = next((s.tokenizer for s in stages if s.tokenizer is not None), None)
    lengths = corpus["n_tokens"].drop_nulls()
    if lengths.is_empty():
        return {"bucket_size": LENGTH_BUCKET, "buckets": [], "tokenizer": tokenizer}
    counts = Counter(int(n) // LENGTH_BUCKET for n in lengths.to_list())
    buckets = [
        {"range": f"{k * LENGTH_BUCKET}-{(k + 1) * LENGTH_BUCKET - 1}", "docs": counts.get(k, 0)}
        for k in range(max(counts) + 1)
    ]
    return {
        "bucket_size": LENGTH_BUCKET,
        "buckets": buckets,
        "tokenizer": tokenizer,
        "min": int(lengths.min()),
        "max": int(lengths.max()),
        "mean": round(float(lengths.mean()), 1),
        "median": float(lengths.median()),
    }


def _query_positions(bench: Bench, notes: list[str]) -> pl.DataFrame:
    """One row per query: relative position, bin, tag and length bucket (each may be null)."""
    q = bench.queries
    docs = bench.corpus.select("doc_id", "n_tokens", pl.col("text").str.len_chars().alias("_chars"))
    q = q.join(docs, on="doc_id", how="left")
    rel = _rel_positions(q, notes)
    rel = [r if r is not None and 0.0 <= r <= 1.0 else None for r in rel]
    bins = (
        q["position_bin"].cast(pl.Int64).to_list()
        if "position_bin" in q.columns
        else [None if r is None else position_bin(r, N_BINS) for r in rel]
    )
    tags = (
        q["position_tag"].cast(pl.Utf8).to_list()
        if "position_tag" in q.columns
        else [None if r is None else third_of(r) for r in rel]
    )
    if "length_bucket" in q.columns:
        buckets = q["length_bucket"].cast(pl.Utf8).to_list()
    else:
        buckets = [None if n is None else length_bucket(n) for n in q["n_tokens"].to_list()]
        if q.height:
            notes.append("length buckets derived from document token counts (PosIR edges 512/1024/1536)")
    return pl.DataFrame(
        {"rel_pos": rel, "position_bin": bins, "position_tag": tags, "length_bucket": buckets},
        schema={"rel_pos": pl.Float64, "position_bin": pl.Int64, "position_tag": pl.Utf8, "length_bucket": pl.Utf8},
    )


def _rel_positions(q: pl.DataFrame, notes: list[str]) -> list[float | None]:
    if "rel_pos" in q.columns:
        return q["rel_pos"].cast(pl.Float64).to_list()
    if "spans" not in q.columns:
        if q.height:
            notes.append("queries carry no spans or positions yet: position figures skipped")
        return [None] * q.height
    out: list[float | None] = []
    for spans, chars in zip(q["spans"].to_list(), q["_chars"].to_list()):
        pairs = [(s["start"], s["end"]) for s in spans or [] if s and s.get("start") is not None]
        ok = pairs and chars and all(0 <= a <= b for a, b in pairs)
        out.append(rel_pos(pairs, chars) if ok else None)
    notes.append("relative positions computed from span starts")
    return out


def _position_summary(pos: pl.DataFrame) -> dict[str, Any]:
    bins = pos["position_bin"].drop_nulls()
    tags = Counter(pos["position_tag"].drop_nulls().to_list())
    counts = Counter(int(b) for b in bins.to_list() if 0 <= b < N_BINS)
    rel = pos["rel_pos"].drop_nulls()
    return {
        "available": not bins.is_empty(),
        "n_queries": int(bins.len()),
        "n_bins": N_BINS,
        "bins": [counts.get(k, 0) for k in range(N_BINS)],
        "tags": {t: tags.get(t, 0) for t in TAGS},
        "mean_rel_pos": round(float(rel.mean()), 4) if not rel.is_empty() else None,
    }


def _length_buckets(pos: pl.DataFrame) -> dict[str, int]:
    """Queries per length bucket of their positive document (edges are the recipe's)."""
    queries = Counter(pos["length_bucket"].drop_nulls().to_list())
    return {b: queries.get(b, 0) for b in LENGTH_QUARTERS}


def _position_by_length(pos: pl.DataFrame) -> dict[str, Any] | None:
    both = pos.drop_nulls(["position_bin", "length_bucket"])
    if both.is_empty():
        return None
    cells = Counter(zip(both["length_bucket"].to_list(), both["position_bin"].to_list()))
    matrix = [[cells.get((b, k), 0) for k in range(N_BINS)] for b in LENGTH_QUARTERS]
    return {"rows": list(LENGTH_QUARTERS), "n_bins": N_BINS, "matrix": matrix}


def _query_types(queries: pl.DataFrame) -> dict[str, Any]:
    langs = queries["lang"].to_list()
    counts = Counter(query_type(t, lang) for t, lang in zip(queries["text"].to_list(), langs))
    out: dict[str, Any] = {"by_interrogative": {t: counts.get(t, 0) for t in QUERY_TYPES}}
    if "qtype" in queries.columns:
        labels = Counter(str(v) for v in queries["qtype"].drop_nulls().to_list())
        out["labels"] = dict(sorted(labels.items(), key=lambda kv: (-kv[1], kv[0])))
    return out


def _per_group(bench: Bench, col: str) -> list[dict[str, Any]]:
    """Docs, queries and qrels per language or domain (a query counts where its positive doc is)."""
    corpus = bench.corpus.with_columns(pl.col(col).fill_null("unknown"))
    doc_key = corpus.select("doc_id", pl.col(col).alias("_g"))
    if col == "lang":
        queries = bench.queries.with_columns(pl.col("lang").fill_null("unknown").alias("_g"))
    else:
        queries = bench.queries.join(doc_key, on="doc_id", how="left").with_columns(pl.col("_g").fill_null("unknown"))
    qrels = bench.qrels.join(queries.select("query_id", "_g"), on="query_id", how="left")
    rows = []
    for group in sorted(set(corpus[col].to_list()) | set(queries["_g"].to_list())):
        docs = corpus.filter(pl.col(col) == group)
        qs = queries.filter(pl.col("_g") == group)
        rows.append(
            {
                col: group,
                "docs": docs.height,
                "queries": qs.height,
                "qrels": qrels.filter(pl.col("_g") == group).height,
                "mean_doc_tokens": _mean(docs["n_tokens"]),
                "mean_query_chars": _mean(qs["text"].str.len_chars()),
            }
        )
    return rows


def _mean(series: pl.Series) -> float | None:
    series = series.drop_nulls()
    return round(float(series.mean()), 1) if not series.is_empty() else None


def _stage_table(stages: list[StageRecord]) -> list[dict[str, Any]]:
    return [
        {
            "stage": s.stage,
            "docs_in": s.docs_in,
            "docs_out": s.docs_out,
            "queries_in": s.queries_in,
            "queries_out": s.queries_out,
            "dropped": s.n_dropped,
            "yield": _yield(s),
            "seconds": s.seconds,
            "resumed": s.resumed,
        }
        for s in stages
    ]


def _drop_table(drops: pl.DataFrame) -> list[dict[str, Any]]:
    if drops.is_empty():
        return []
    table = (
        drops.group_by("stage", "kind", "reason")
        .len("count")
        .sort(["stage", "count", "reason"], descending=[False, True, False])
    )
    return table.to_dicts()


def _yield(s: StageRecord) -> float | None:
    """Queries a stage kept over those it handled: its input plus those it made."""
    asked = (s.queries_in or 0) + (s.queries_added or 0)
    return round(s.queries_out / asked, 4) if asked and s.queries_out is not None else None


def _llm_usage(stages: list[StageRecord], kept: int, kept_by_group: Mapping[str, int]) -> dict[str, Any]:
    """Per LLM stage: its usage, its money (`usd`, when every model it called has a price)
    and its yield; in total, per query the build kept, and per position group (see
    records/group_ledger.py)."""
    rows, asked = [], []
    for s in stages:
        llm = s.llm or {}
        if not any(llm.get(f) for f in LLM_FIELDS):
            continue
        row: dict[str, Any] = {"stage": s.stage, **{f: int(llm.get(f, 0)) for f in LLM_FIELDS}}
        if llm.get("batch_calls"):
            row.update({f: int(llm.get(f, 0)) for f in BATCH_FIELDS})
        row["usd"] = llm.get("usd")
        if llm.get("usd_synchronous") is not None:
            row["usd_synchronous"] = llm["usd_synchronous"]
        row["yield"] = _yield(s)
        rows.append(row)
        asked.append(s.figures.get("asked_by_group"))
    total: dict[str, Any] = {f: sum(r[f] for r in rows) for f in LLM_FIELDS}
    if any("batch_calls" in r for r in rows):
        total.update({f: sum(r.get(f, 0) for r in rows) for f in BATCH_FIELDS})
    if not rows:  # a build without an LLM has no ledger
        return {"stages": rows, "total": total}
    priced = rows and all(r["usd"] is not None for r in rows)
    total["usd"] = round(sum(r["usd"] for r in rows), 6) if priced else None
    if priced and any("usd_synchronous" in r for r in rows):
        # Some answers came through a provider batch: what paying for all of them one by one
        # would have cost, beside what was paid.
        total["usd_synchronous"] = round(sum(r.get("usd_synchronous", r["usd"]) for r in rows), 6)
    per_kept = {f: round_spent(f, total[f] / kept) if kept and total[f] is not None else None for f in SPENT_FIELDS}
    return {
        "stages": rows,
        "total": total,
        "kept_queries": kept,
        "per_kept_query": per_kept,
        "by_group": group_ledger(rows, asked, kept_by_group),
    }
