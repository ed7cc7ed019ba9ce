"""The warnings of a run, read from its stage records: what the stages warned about
themselves, plus the checks the runner applies to every stage (position thirds kept
unevenly, over half of a kind of row removed), and one on the finished benchmark: a
position third that holds no queries, or almost none. The summary prints them;
stats.json and the data card carry the same list.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from builder.run.stage_record import StageRecord

SKEW_POINTS = 10  # kept shares of two thirds further apart than this get a warning
LARGE_REMOVAL = 0.5  # a stage that removes more than this share of a kind of row gets a warning
THIN_GROUP = 0.05  # a position third with a smaller share of the final queries gets a warning


def skew(kept: dict | None) -> float | None:
    """Largest gap, in percentage points, between the kept shares of the position thirds."""
    shares = [row["share"] for row in (kept or {}).values() if row.get("share") is not None]
    return 100 * (max(shares) - min(shares)) if len(shares) > 1 else None


def _checks_removals(label: str) -> bool:
    """Whether the runner's large-removal check applies: not to sampling stages, nor to
    stages that warn about their removals themselves."""
    from builder.publish.citations import stage_base_name
    from builder.stages import STAGES

    cls = STAGES.get(stage_base_name(label))
    return cls is None or not (cls.removes_by_design or cls.warns_on_removals)


def stage_warnings(record: StageRecord) -> list[str]:
    """Every warning about one stage, each a sentence that starts with its label."""
    out = [f"{record.stage}: {text}" for text in record.warnings]
    gap = skew(record.kept_by_third)
    if gap is not None and gap > SKEW_POINTS:
        out.append(f"{record.stage} kept position thirds unevenly ({gap:.0f} points apart): "
                   "check the scorers' max_length and beyond_window")
    if _checks_removals(record.stage):
        for kind, got, added, dropped in (
                ("documents", record.docs_in, record.docs_added, record.docs_dropped),
                ("queries", record.queries_in, record.queries_added, record.queries_dropped)):
            total = (got or 0) + (added or 0)
            if dropped and total and dropped / total > LARGE_REMOVAL:
                out.append(f"{record.stage} removed {dropped / total:.0%} of the {kind} it had "
                           f"({dropped} of {total})")
    return out


def run_warnings(records: Iterable[StageRecord]) -> list[str]:
    return [text for record in records for text in stage_warnings(record)]


def position_group_warnings(tags: Mapping[str, int]) -> list[str]:
    """A warning for each position third (tag -> queries in the finished benchmark) that
    holds fewer than `THIN_GROUP` of its queries; none for a benchmark without positions."""
    total = sum(tags.values())
    if not total:
        return []
    return [f"the benchmark is lopsided: {n} of its {total} queries ({n / total:.0%}) locate their evidence in "
            f"the {tag} third (under {THIN_GROUP:.0%}); position-group figures on it say little, so check the "
            "generation stage's thirds and the filters that removed queries"
            for tag, n in tags.items() if n / total < THIN_GROUP]
