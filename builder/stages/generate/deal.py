"""Dealing positional regions to whole-document calls instead of drawing one per call."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from math import gcd, lcm

from builder.textutil.positions import REGIONS
from builder.util.stable import derive_seed


def deal_regions(call_ids: Sequence[str], weights: Mapping[str, float], seed: int) -> dict[str, str]:
    """Each call's region, dealt in turn so the counts follow `weights` closely.

    Why: drawing a region per call independently leaves a small build's thirds far apart
    (PosIR-style, 12 documents: 15 / 1 / 4 questions kept). Here the calls are ranked by a
    seeded hash of their id (so corpus row order does not matter) and dealt a smooth weighted
    round-robin cycle from a seeded offset: with equal weights any run of calls gets every
    region within one of the others; a region of weight 0 never comes up.

    Trade-off: a new call takes a rank among the old ones, and every call ranked after it
    moves one place along the cycle, so adding documents re-deals the regions of
    later-ranked calls and their cached answers no longer apply.
    """
    cycle = smooth_cycle(weights)
    ranked = sorted(call_ids, key=lambda call_id: (derive_seed(seed, call_id), call_id))
    offset = derive_seed(seed, "offset") % len(cycle)
    dealt = {call_id: cycle[(offset + i) % len(cycle)] for i, call_id in enumerate(ranked)}
    return {call_id: dealt[call_id] for call_id in call_ids}


def smooth_cycle(weights: Mapping[str, float]) -> list[str]:
    """One period of smooth weighted round-robin over the regions of positive weight: each
    step every region gains its weight and the richest (first in REGIONS on a tie) is dealt
    and pays the total. Shares are read to 1/100 so the period stays short (1/3 stays 1/3)."""
    positive = {r: weights[r] for r in REGIONS if weights.get(r, 0) > 0}
    total = sum(positive.values())
    shares = {r: max(Fraction(w / total).limit_denominator(100), Fraction(1, 100)) for r, w in positive.items()}
    scale = lcm(*(s.denominator for s in shares.values()))
    ints = {r: int(s * scale) for r, s in shares.items()}
    common = gcd(*ints.values())
    ints = {r: w // common for r, w in ints.items()}
    period = sum(ints.values())
    credit = dict.fromkeys(ints, 0)
    cycle = []
    for _ in range(period):
        for r, w in ints.items():
            credit[r] += w
        dealt = max(credit, key=credit.__getitem__)
        credit[dealt] -= period
        cycle.append(dealt)
    return cycle
