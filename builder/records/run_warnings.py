"""The warnings of a run, read from its stage records: what the stages warned about
themselves, plus the checks the runner applies to every stage (position thirds kept
unevenly, more than a share of a kind of row removed: 30 % unless the recipe's
`warn_removed_above` says otherwise), and one on the finished benchmark: a position
third that holds no queries, or almost none. The summary prints them; stats.json and
the data card carry the same list.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from builder.records.stage_record import StageRecord, stage_base_name

SKEW_POINTS = 10  # kept shares of two thirds further apart than this get a warning
LARGE_REMOVAL = 0.3  # a stage that removes more than this share of a kind of row gets a warning
# Where a recipe sets another share, the runner keeps it in each stage record under this key.
THRESHOLD_FIGURE = "warn_removed_above"
_CASCADE = "doc_removed:"  # a query that went with its document
THIN_GROUP = 0.05  # a position third with a smaller share of the final queries gets a warning


def skew(kept: dict | None) -> float | None:
    """Largest gap, in percentage points, between the kept shares of the position thirds."""
    shares = [row["share"] for row in (kept or {}).values() if row.get("share") is not None]
    return 100 * (max(shares) - min(shares)) if len(shares) > 1 else None


def _removal_check(label: str) -> tuple[bool, frozenset[str]]:
    """Whether the runner's large-removal check applies, and the drop reasons it leaves out.
    Stages that warn about their removals themselves are exempt; sampling stages count
    only what they could not have kept (e.g. documents outside the length buckets), not
    what they left out by choice."""
    from builder.stages import STAGES

    cls = STAGES.get(stage_base_name(label))
    if cls is None:
        return True, frozenset()
    if cls.warns_on_removals or (cls.removes_by_design and cls.chosen_reasons is None):
        return False, frozenset()
    return True, cls.chosen_reasons or frozenset()


def _top_reason(dropped: dict[str, int], kind: str, chosen: frozenset[str]) -> tuple[str, int] | None:
    """The most frequent reason among the removals of `kind` (a document's own reasons
    leave out the queries that went with it)."""
    counts = {
        r: n
        for r, n in dropped.items()
        if r.removeprefix(_CASCADE) not in chosen and (kind == "queries" or not r.startswith(_CASCADE))
    }
    if not counts:
        return None
    reason = max(counts, key=lambda r: (counts[r], r))
    return reason, counts[reason]


def _removals(record: StageRecord, chosen: frozenset[str]) -> list[str]:
    limit = float(record.figures.get(THRESHOLD_FIGURE, LARGE_REMOVAL))
    out = []
    for kind, got, added, dropped in (
        ("documents", record.docs_in, record.docs_added, record.docs_dropped),
        ("queries", record.queries_in, record.queries_added, record.queries_dropped),
    ):
        total = (got or 0) + (added or 0)
        if chosen and dropped:
            # Only removals with a reason the stage did not choose (a query that went with a
            # document left out by choice is by choice too); no reason recorded, no warning.
            own = sum(
                n
                for r, n in record.dropped.items()
                if r.removeprefix(_CASCADE) not in chosen and (kind == "queries" or not r.startswith(_CASCADE))
            )
            dropped = min(dropped, own)
        if not (dropped and total and dropped / total > limit):
            continue
        line = f"{record.stage} removed {dropped / total:.0%} of the {kind} it had ({dropped} of {total})"
        top = _top_reason(record.dropped, kind, chosen)
        if top is not None:
            line += f"; top reason: {top[0]} ({top[1]})"
        out.append(line)
    return out


def stage_warnings(record: StageRecord) -> list[str]:
    """Every warning about one stage, each a sentence that starts with its label."""
    out = [f"{record.stage}: {text}" for text in record.warnings]
    gap = skew(record.kept_by_third)
    if gap is not None and gap > SKEW_POINTS:
        out.append(
            f"{record.stage} kept position thirds unevenly ({gap:.0f} points apart): "
            "check the scorers' max_length and beyond_window"
        )
    checked, chosen = _removal_check(record.stage)
    if checked:
        out += _removals(record, chosen)
    return out


def run_warnings(records: Iterable[StageRecord]) -> list[str]:
    return [text for record in records for text in stage_warnings(record)]


def position_group_warnings(tags: Mapping[str, int]) -> list[str]:
    """A warning for each position third (tag -> queries in the finished benchmark) that
    holds fewer than `THIN_GROUP` of its queries; none for a benchmark without positions."""
    total = sum(tags.values())
    if not total:
        return []
    return [
        f"the benchmark is lopsided: {n} of its {total} queries ({n / total:.0%}) locate their evidence in "
        f"the {tag} third (under {THIN_GROUP:.0%}); position-group figures on it say little, so check the "
        "generation stage's thirds and the filters that removed queries"
        for tag, n in tags.items()
        if n / total < THIN_GROUP
    ]
