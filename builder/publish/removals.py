"""Why the queries of an older version are missing from a newer one, read from the newer
version's drop log (`drops.parquet`): each removed query with the stage and reason that
removed it, and whether documents the older version lacks caused it.

A removal is put down to new documents when its drop names rivals (the documents a false
negative was found in, see builder/bench.py) of which one is new, or when its document
lost its place in a full length bucket (`not_sampled`) to the documents added. Every other
removal, and every one the drop log does not explain, is counted apart with its reason.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import polars as pl

NEW_CAUSE = "because_of_new_documents"
NOT_MADE = "not made again"  # no drop names it: the new version never generated it
NO_LOG = "no drop log in the new version"
_DISPLACED = ("not_sampled", "doc_removed:not_sampled")


def removal_reasons(
    removed_ids: list[str], drops: pl.DataFrame | None, old_docs: set[str], docs_added: int
) -> dict[str, Any]:
    """Counts by cause and reason, and per removed query (by id) its stage, reason and the
    new documents that caused it (empty when none did)."""
    found: dict[str, tuple[str | None, str, list[str]]] = {}
    if drops is not None:
        rivals = drops["rivals"].to_list() if "rivals" in drops.columns else [None] * drops.height
        # The first drop of a query is the one that took it out.
        for stage, kind, qid, reason, named in zip(
            *(drops[c].to_list() for c in ("stage", "kind", "id", "reason")), rivals
        ):
            if kind == "query" and qid not in found:
                found[qid] = (stage, reason, list(named or []))
    why = []
    for qid in sorted(removed_ids):
        stage, reason, named = found.get(qid, (None, NOT_MADE if drops is not None else NO_LOG, []))
        new = [d for d in named if d not in old_docs]
        caused = bool(new) or (reason in _DISPLACED and docs_added > 0)
        why.append(
            {
                "id": qid,
                "stage": stage,
                "reason": reason,
                "cause": NEW_CAUSE if caused else "other",
                "new_documents": new,
            }
        )
    out: dict[str, Any] = {}
    for cause in (NEW_CAUSE, "other"):
        rows = [w for w in why if w["cause"] == cause]
        out[cause] = {"count": len(rows), "by_reason": dict(sorted(Counter(w["reason"] for w in rows).items()))}
    out["why"] = why
    return out


def removal_summary(removed: dict[str, Any]) -> str | None:
    """`1 because of new documents (false_negative_confirmed 1), 2 for other reasons (...)`;
    None when nothing was removed."""
    if not removed.get("count") or NEW_CAUSE not in removed:
        return None
    parts = []
    for cause, words in ((NEW_CAUSE, "because of new documents"), ("other", "for other reasons")):
        part = removed[cause]
        reasons = ", ".join(f"{r} {n}" for r, n in part["by_reason"].items())
        parts.append(f"{part['count']} {words}" + (f" ({reasons})" if reasons else ""))
    return ", ".join(parts)


def changelog_line(removed: dict[str, Any], most: int = 10) -> str | None:
    """The changelog's sentence: how many removals the new documents caused, by reason with
    the ids (at most `most` each), then the others by reason."""
    if not removed.get("count") or NEW_CAUSE not in removed:
        return None
    caused = []
    for reason, n in removed[NEW_CAUSE]["by_reason"].items():
        ids = [w["id"] for w in removed["why"] if w["cause"] == NEW_CAUSE and w["reason"] == reason]
        shown = ", ".join(ids[:most]) + (f" and {len(ids) - most} more" if len(ids) > most else "")
        caused.append(f"{reason} {n}: {shown}")
    other = ", ".join(f"{r} {n}" for r, n in removed["other"]["by_reason"].items())
    return (
        f"Removed queries of the previous release: {removed[NEW_CAUSE]['count']} because of the new documents"
        + (f" ({'; '.join(caused)})" if caused else "")
        + f", {removed['other']['count']} for other reasons"
        + (f" ({other})" if other else "")
        + "."
    )
