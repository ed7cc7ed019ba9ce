"""Refusing to call an empty or failed build a success.

A build that ends with no documents or no queries, or in which no LLM call got an
answer, almost always means something upstream went wrong (an outage, a filter set too
tight). It exits 1 naming the stage that removed the most and why, unless the user
said an empty result is fine (`--allow-empty`). So does a build whose queries have no
position at all: a position benchmark without positions is not a result either.
"""

from __future__ import annotations

from builder.backends.llm import LLMUsage
from builder.bench import Bench
from builder.records.stage_record import StageRecord
from builder.stages.position_columns import PLACING_COLUMNS, placed_queries

# What would help, by the reason that removed the most: the usual remedies a user controls.
_REMEDIES = {
    "llm_unparseable": "a larger model, or a server that enforces JSON schemas (structured_output)",
    "llm_truncated": "a larger max_tokens, or a larger model that repeats itself less",
    "doc_unusable": "a larger model (small ones call good documents unusable), or cleaner documents",
    "span_not_found": (
        "a larger model that copies passages verbatim, or localize_spans with methods "
        "[exact, normalized, fuzzy] and a lower fuzzy_min_score"
    ),
    "off_target_region": "a larger model, or drop_off_target: false",
    "llm_not_higher": "a larger judge model, or llm_relevance with contrast: false",
    "outside_length_buckets": "wider sample_by_length buckets",
    "contrast_not_higher": "span_contrast with require: any, or rerankers that tell the span apart better",
    "span_beyond_window": "rerankers with a longer max_length, or beyond_window: window",
}


def _remedy(reason: str) -> str | None:
    base = reason.split(":", 1)[0]
    if base.startswith("llm_grade_below"):
        return "a larger judge model, or a lower min_grade"
    return _REMEDIES.get(base)


class EmptyResult(RuntimeError):
    """The build produced nothing usable; nothing was written."""


def _removed(st: StageRecord) -> tuple[float, int, int]:
    """(share of the stage's input it removed, rows removed, rows in)."""
    rows_in = (st.docs_in or 0) + (st.queries_in or 0)
    removed = st.n_dropped
    return (removed / rows_in if rows_in else 0.0), removed, rows_in


def _reasons(st: StageRecord) -> tuple[str, str]:
    """The stage's three commonest drop reasons as text, and what may help with the first."""
    top = sorted(st.dropped.items(), key=lambda kv: -kv[1])[:3]
    remedy = _remedy(top[0][0]) if top else None
    return ", ".join(f"{reason} {count}" for reason, count in top), (f"; what may help: {remedy}" if remedy else "")


def _last_queries(stats: list[StageRecord]) -> str | None:
    """Where the queries ran out: the last stage that was given some and kept none."""
    emptied = [st for st in stats if st.queries_in and st.queries_out == 0 and st.dropped]
    if not emptied:
        return None
    st = emptied[-1]
    reasons, remedy = _reasons(st)
    return f"{st.stage} removed the last {st.queries_in} queries ({reasons}){remedy}"


def _worst_stage(stats: list[StageRecord]) -> str:
    """The stage that removed the largest share of what it was given (a sampler that
    keeps 100 of 10,000 documents is doing its job; a stage that drops all 100 is not)."""
    worst = max(stats, key=_removed, default=None)
    if worst is None or not worst.dropped:
        return "no stage dropped anything"
    _, removed, rows_in = _removed(worst)
    reasons, remedy = _reasons(worst)
    return f"{worst.stage} removed the most: {removed} of {rows_in} rows ({reasons}){remedy}"


def check_result(bench: Bench, stats: list[StageRecord], usage: LLMUsage, budget_stop: str | None = None) -> None:
    """Raise EmptyResult for a build with nothing usable; `budget_stop` is the stage where
    the run's budget ran out, if it did (then that, not the model, is why)."""
    counts = bench.counts()
    all_failed = usage.failures > 0 and usage.calls == 0 and usage.cache_hits == 0
    if counts["docs"] and counts["queries"] and not all_failed:
        if not placed_queries(bench.queries):
            raise EmptyResult(
                f"build failed: none of the {counts['queries']} queries has a position (no "
                f"{', '.join(PLACING_COLUMNS)}): add localize_spans after the stage that makes the "
                "queries, or position_metadata after one that sets spans; nothing was written; "
                "pass --allow-empty to write it anyway"
            )
        return
    what = (
        f"every LLM call failed ({usage.failures})"
        if all_failed
        else f"the result has {counts['docs']} documents and {counts['queries']} queries"
    )
    parts = [f"build failed: {what}", _worst_stage(stats)]
    if budget_stop is not None:
        parts[1:] = [
            f"the budget was spent in {budget_stop} and the later requests were not sent: "
            "run again with a higher budget to resume (answers already received are kept)"
        ]
    last = _last_queries(stats) if not all_failed else None
    if last is not None and not last.startswith(parts[1].split(" removed", 1)[0] + " "):
        parts.append(last)
    last_error = usage.last_error if all_failed else usage.last_transport_error
    if last_error:
        parts.append(f"last LLM error: {last_error}")
    parts.append("nothing was written; pass --allow-empty to write an empty result anyway")
    raise EmptyResult("; ".join(parts))
