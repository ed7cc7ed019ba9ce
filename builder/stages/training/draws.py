"""Which train queries a train set takes: shares across position thirds chosen up front
(even, the split's own, or a stated skew such as 60/25/15), optionally even across length
buckets inside each third. Every set is drawn from the same per-query random draw, so two
sets differ only where their shares make them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from builder.textutil.positions import REGIONS


class TrainSetParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    shares: Literal["balanced", "natural"] | list[float] = Field(
        default="balanced",
        description="shares of beginning / middle / end: balanced (a third each), natural "
        "(as the train split has them) or three numbers adding up to 1, e.g. [0.6, 0.25, 0.15]",
    )
    by_length: bool = Field(default=False, description="also even out length buckets inside each third")

    @field_validator("shares")
    @classmethod
    def _three_shares(cls, shares: str | list[float]) -> str | list[float]:
        if isinstance(shares, list) and (len(shares) != 3 or min(shares) < 0 or abs(sum(shares) - 1) > 1e-6):
            raise ValueError("shares must be three non-negative numbers (beginning, middle, end) adding up to 1")
        return shares


@dataclass(frozen=True)
class Candidate:
    query_id: str
    third: str
    length_bucket: str | None
    draw: float


def target_shares(params: TrainSetParams, pool: Sequence[Candidate]) -> dict[str, float]:
    if params.shares == "balanced":
        return dict.fromkeys(REGIONS, 1 / 3)
    if params.shares == "natural":
        counts = {r: sum(c.third == r for c in pool) for r in REGIONS}
        total = sum(counts.values()) or 1
        return {r: counts[r] / total for r in REGIONS}
    return dict(zip(REGIONS, params.shares))


def reachable(shares: Mapping[str, float], pool: Sequence[Candidate]) -> int:
    """The largest set the pool can fill at these shares."""
    counts = {r: sum(c.third == r for c in pool) for r in REGIONS}
    return min((int(counts[r] / s + 1e-9) for r, s in shares.items() if s > 0), default=0)


def quotas(shares: Mapping[str, float], size: int) -> dict[str, int]:
    """Queries per third: the largest-remainder rounding of size x share."""
    exact = {r: size * shares[r] for r in REGIONS}
    out = {r: int(exact[r]) for r in REGIONS}
    for r in sorted(REGIONS, key=lambda r: (out[r] - exact[r], REGIONS.index(r)))[: size - sum(out.values())]:
        out[r] += 1
    return out


def _interleaved(members: list[Candidate], by_length: bool) -> list[Candidate]:
    """A third's queries in draw order; by length, one from each bucket in turn."""
    ordered = sorted(members, key=lambda c: (c.draw, c.query_id))
    if not by_length:
        return ordered
    buckets: dict[str, list[Candidate]] = {}
    for c in ordered:
        buckets.setdefault(str(c.length_bucket), []).append(c)
    out: list[Candidate] = []
    queues = [buckets[b] for b in sorted(buckets)]
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
    return out


def draw_set(params: TrainSetParams, pool: Sequence[Candidate], size: int) -> list[Candidate]:
    """`size` queries of the pool at the set's shares (the caller checks it is reachable)."""
    wanted = quotas(target_shares(params, pool), size)
    chosen: list[Candidate] = []
    for region in REGIONS:
        members = [c for c in pool if c.third == region]
        chosen += _interleaved(members, params.by_length)[: wanted[region]]
    return chosen


def achieved(chosen: Sequence[Candidate], by_length: bool) -> dict[str, dict[str, float]]:
    n = len(chosen) or 1
    out = {"thirds": {r: round(sum(c.third == r for c in chosen) / n, 4) for r in REGIONS}}
    if by_length:
        buckets = sorted({str(c.length_bucket) for c in chosen})
        out["length_buckets"] = {b: round(sum(str(c.length_bucket) == b for c in chosen) / n, 4) for b in buckets}
    return out
