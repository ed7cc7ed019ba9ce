"""MS MARCO FarRelevant document assembly (paper 001, appendix B.2), as pure functions.

A document is K1 distractor passages whose token total first exceeds `min_start`, then
K2 more distractors with the relevant passage put at a random place among them. K2 is
the largest count that keeps the document within a target length drawn uniformly from
[min_start + C_t, max_length] (C_t: the relevant passage's tokens): passages are drawn
until one would overflow, and that one is discarded.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Passage:
    doc_id: str
    text: str
    n_tokens: int


@dataclass(frozen=True)
class Limits:
    min_start: int = 512
    max_length: int = 1431
    max_draws: int = 1000  # rejected draws allowed per distractor before giving up


@dataclass(frozen=True)
class Assembly:
    passages: tuple[Passage, ...]  # in document order
    gold_index: int
    target: int  # the drawn target length in tokens

    def text_and_span(self, separator: str) -> tuple[str, int, int]:
        """The document text and the gold passage's [start, end) character offsets."""
        start = sum(len(p.text) + len(separator) for p in self.passages[: self.gold_index])
        text = separator.join(p.text for p in self.passages)
        return text, start, start + len(self.passages[self.gold_index].text)


class _Sampler:
    """Draws distractors at random, rejecting relevant, already used and empty passages."""

    def __init__(
        self,
        pool: Sequence[Passage],
        excluded_ids: set[str],
        excluded_texts: set[str],
        rng: random.Random,
        max_draws: int,
    ) -> None:
        self.pool, self.rng, self.max_draws = pool, rng, max_draws
        self.excluded_ids, self.excluded_texts = set(excluded_ids), excluded_texts

    def draw(self, max_tokens: int | None = None) -> Passage | None:
        """A new passage (of at most `max_tokens`), or None after `max_draws` rejections."""
        for _ in range(self.max_draws):
            p = self.pool[self.rng.randrange(len(self.pool))]
            usable = p.n_tokens > 0 and p.doc_id not in self.excluded_ids and p.text not in self.excluded_texts
            if usable and (max_tokens is None or p.n_tokens <= max_tokens):
                self.excluded_ids.add(p.doc_id)
                return p
        return None


def assemble(
    gold: Passage,
    pool: Sequence[Passage],
    *,
    banned_ids: set[str],
    banned_texts: set[str],
    limits: Limits,
    rng: random.Random,
) -> Assembly | str:
    """One FarRelevant document around `gold`, or the reason none can be built.

    `banned_ids`/`banned_texts` are the query's relevant passages, never used as
    distractors. A K1 distractor that would leave no room for the gold passage under
    `max_length` is rejected and redrawn (the paper's rejection sampling).
    """
    c_t = gold.n_tokens
    if c_t == 0:
        return "relevant_passage_empty"
    if limits.min_start + 1 + c_t > limits.max_length:
        return "relevant_passage_too_long"
    if not pool:
        return "distractors_exhausted"
    target = rng.randint(limits.min_start + c_t, limits.max_length)
    sampler = _Sampler(pool, banned_ids | {gold.doc_id}, banned_texts | {gold.text}, rng, limits.max_draws)
    head: list[Passage] = []
    total = 0
    while total <= limits.min_start:
        p = sampler.draw(max_tokens=limits.max_length - c_t - total)
        if p is None:
            return "distractors_exhausted"
        head.append(p)
        total += p.n_tokens
    budget = target - c_t - total
    tail: list[Passage] = []
    while (p := sampler.draw()) is not None and p.n_tokens <= budget:
        tail.append(p)
        budget -= p.n_tokens
    at = rng.randint(0, len(tail))
    tail.insert(at, gold)
    return Assembly(tuple(head + tail), len(head) + at, target)
