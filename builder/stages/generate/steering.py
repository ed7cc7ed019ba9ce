"""Quota steering for generation: which calls to make in each round.

A group is a position third within a stratum (length bucket, language, domain). Every
group has candidate calls (chunks of that third, or documents to ask about that region);
each round asks some of them, and the queries that survive the round's stages count
toward the group's quota. Without an explicit quota the target is what `balance` would
keep: as many as the stratum's scarcest third can reach, projected from the yield seen
so far (queries kept per call).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from builder.textutil.positions import REGION_OF_NAME

if TYPE_CHECKING:
    import polars as pl

    from builder.stages.context import StageContext
    from builder.stages.generate.params import GenerateParams

Stratum = tuple[str, ...]
Group = tuple[str, Stratum]  # (third, stratum)


@dataclass
class Tally:
    """One group: calls not asked yet, calls asked, queries kept."""

    left: list[str] = field(default_factory=list)
    asked: int = 0
    kept: int = 0

    def rate(self, prior: float) -> float:
        return self.kept / self.asked if self.asked else prior


def third_of_value(value: str | None) -> str | None:
    """beginning / middle / end from a tag or a requested region, in either vocabulary."""
    return REGION_OF_NAME.get(value, value) if value is not None else None


def strata(corpus: pl.DataFrame, per: Sequence[str], buckets: Sequence[int] | None) -> dict[str, Stratum]:
    """Each document's stratum: its values of `per`, then its length bucket's lower edge."""
    out = {}
    for row in corpus.select("doc_id", "n_tokens", *per).iter_rows(named=True):
        key = tuple(str(row[c]) for c in per)
        if buckets:
            at = max(0, bisect_right(list(buckets), row["n_tokens"] or 0) - 1)
            key += (f"{buckets[at]}+",)
        out[row["doc_id"]] = key
    return out


def candidate_calls(corpus: pl.DataFrame, ctx: StageContext, p: GenerateParams) -> list[tuple[str, str, str]]:
    """(doc_id, call id, third) for every call generation could make over `corpus`."""
    if p.mode == "chunked":
        from builder.stages.generate.chunked import chunk_calls

        return [(doc_id, call_id, tag) for doc_id, call_id, _, _, tag, _ in chunk_calls(corpus, ctx, p)]
    from builder.stages.generate.whole_document import region_calls

    return region_calls(corpus, p)


def targets(tallies: dict[Group, Tally], quota: int | None, prior: float) -> dict[Stratum, float]:
    """Per stratum, how many queries each third should reach: `quota`, or the projected
    reach of its scarcest third (kept so far plus the calls left times the yield seen)."""
    out: dict[Stratum, float] = {}
    for (_, stratum), t in tallies.items():
        reach = quota if quota is not None else t.kept + len(t.left) * t.rate(prior)
        out[stratum] = min(out.get(stratum, math.inf), reach)
    return out


def plan_round(tallies: dict[Group, Tally], quota: int | None, prior: float, first_share: float) -> dict[Group, int]:
    """How many more calls each group asks this round (groups at their target ask none).

    The first round asks `first_share` of each group's candidates to learn its yield (or,
    with a quota, enough for the quota at `prior` queries per call); later rounds ask what
    the yield seen says the shortfall needs."""
    if all(t.asked == 0 for t in tallies.values()):
        if quota is None:
            return {g: min(len(t.left), math.ceil(first_share * len(t.left))) for g, t in tallies.items() if t.left}
        return {g: min(len(t.left), math.ceil(quota / prior)) for g, t in tallies.items() if t.left}
    goal = targets(tallies, quota, prior)
    out = {}
    for group, t in tallies.items():
        short = goal[group[1]] - t.kept
        if short <= 0 or not t.left:
            continue
        rate = t.rate(prior)
        out[group] = min(len(t.left), math.ceil(short / rate) if rate > 0 else max(1, t.asked))
    return out


def stop_reason(tallies: dict[Group, Tally], quota: int | None, prior: float) -> str:
    """Why no round is left to ask: every group met its target, or a short one ran out."""
    goal = targets(tallies, quota, prior)
    met = all(t.kept >= goal[s] for (_, s), t in tallies.items())
    return "quotas_met" if met else "candidates_exhausted"
