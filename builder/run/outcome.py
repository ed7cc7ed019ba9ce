"""Refusing to call an empty or failed build a success.

A build that ends with no documents or no queries, or in which no LLM call got an
answer, almost always means something upstream went wrong (an outage, a filter set too
tight). It exits 1 naming the stage that removed the most and why, unless the user
said an empty result is fine (`--allow-empty`).
"""

from __future__ import annotations

from typing import Any

from builder.backends.llm import LLMUsage
from builder.bench import Bench
from builder.run.llm_watch import TransportLog


class EmptyResult(RuntimeError):
    """The build produced nothing usable; nothing was written."""


def _worst_stage(stats: list[dict[str, Any]]) -> str:
    removed = [(sum(st.get("dropped", {}).values()), st) for st in stats]
    n, worst = max(removed, key=lambda pair: pair[0], default=(0, None))
    if worst is None or n == 0:
        return "no stage dropped anything"
    top = sorted(worst["dropped"].items(), key=lambda kv: -kv[1])[:3]
    reasons = ", ".join(f"{reason} {count}" for reason, count in top)
    return f"{worst['stage']} removed the most: {n} ({reasons})"


def check_result(bench: Bench, stats: list[dict[str, Any]], usage: LLMUsage,
                 transport: TransportLog) -> None:
    counts = bench.counts()
    all_failed = usage.failures > 0 and usage.calls == 0 and usage.cache_hits == 0
    if counts["docs"] and counts["queries"] and not all_failed:
        return
    what = (f"every LLM call failed ({usage.failures})" if all_failed else
            f"the result has {counts['docs']} documents and {counts['queries']} queries")
    parts = [f"build failed: {what}", _worst_stage(stats)]
    if transport.last_error:
        parts.append(f"last LLM error: {transport.last_error}")
    parts.append("nothing was written; pass --allow-empty to write an empty result anyway")
    raise EmptyResult("; ".join(parts))
