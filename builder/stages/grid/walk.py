"""The padding walk: each query's pool of passages taken in order, near-duplicates of its
evidence and passages the judge says could answer left out (and counted), until the
longest length is filled. Judges that cost a call per passage see it in rounds of
`judge.batch` candidates per query, so no query is judged far past its need."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from builder.stages.grid.judges import Ask, PaddingJudge, Verdict
from builder.stages.grid.padding import Passage, near_duplicate, shingles


@dataclass
class Walk:
    query: str
    evidence: str
    pool: list[Passage]
    need: int  # padding tokens the longest length takes
    at: int = 0  # passages of the pool walked so far
    usable: list[Passage] = field(default_factory=list)
    have: int = 0

    @property
    def full(self) -> bool:
        return self.have > self.need

    @property
    def done(self) -> bool:
        return self.full or self.at >= len(self.pool)


def walk_all(walks: Sequence[Walk], judge: PaddingJudge, tokens: dict[str, int], near_share: float,
             excluded: Counter[str]) -> None:
    """Advance every walk until it is full or its pool runs out; `excluded` counts, per
    reason, the passages left out of what the walks took in."""
    trigrams = {w.evidence: shingles(w.evidence) for w in walks}
    while pending := [w for w in walks if not w.done]:
        chunks = [w.pool[w.at: w.at + (judge.batch or len(w.pool))] for w in pending]
        twins = [[near_duplicate(w.evidence, trigrams[w.evidence], x.text, near_share) for x in chunk]
                 for w, chunk in zip(pending, chunks)]
        asks = [Ask(w.query, w.evidence, tuple(x.text for x, twin in zip(chunk, dup) if not twin))
                for w, chunk, dup in zip(pending, chunks, twins)]
        for w, chunk, dup, verdicts in zip(pending, chunks, twins, judge.judge(asks)):
            _take(w, chunk, dup, iter(verdicts), tokens, excluded)


def _take(w: Walk, chunk: list[Passage], twins: list[bool], verdicts: Iterator[Verdict], tokens: dict[str, int],
          excluded: Counter[str]) -> None:
    for passage, twin in zip(chunk, twins):
        if w.full:
            return
        w.at += 1
        reason = "near_duplicate_of_evidence" if twin else next(verdicts)
        if reason:
            excluded[reason] += 1
        else:
            w.usable.append(passage)
            w.have += sum(tokens[s] for s in passage.sentences)
