"""The padding walk. One screen serves a whole grid: every query sits in every cell, so a
passage may pad a document of a cell only when it repeats no query's evidence or span and
the judge finds it answers none of the queries (each passage judged once against all of
them). Each walk (a query's padding, or a distractor's) takes its pool of passages in its
own seeded order, keeping those the screen passes, until its longest length can be
filled. Judges that cost a call per passage see the walks' candidates in rounds of
`judge.batch` per walk, so no passage is judged far past the need."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from builder.stages.grid.judges import Ask, PaddingJudge, Verdict
from builder.stages.grid.padding import Passage, Piece, Repeats, cut_paragraphs, fill


@dataclass(frozen=True)
class Target:
    query: str
    evidence: str


class Screen:
    """Verdicts on padding texts against every query of the grid, each text judged once;
    `excluded` counts the distinct texts left out, by reason."""

    def __init__(self, targets: Sequence[Target], repeats: Repeats, judge: PaddingJudge) -> None:
        self.targets, self.repeats, self.judge = targets, repeats, judge
        self.verdicts: dict[str, Verdict] = {}
        self.excluded: Counter[str] = Counter()

    @property
    def batch(self) -> int | None:
        return self.judge.batch

    def check(self, texts: Iterable[str]) -> None:
        fresh = list(dict.fromkeys(t for t in texts if t not in self.verdicts))
        twins = {t for t in fresh if self.repeats(t)}
        asked = tuple(t for t in fresh if t not in twins)
        verdicts: dict[str, Verdict] = {t: "near_duplicate_of_evidence" for t in twins}
        if asked and self.targets:
            answers = self.judge.judge([Ask(x.query, x.evidence, asked) for x in self.targets])
            for k, text in enumerate(asked):
                verdicts[text] = next((a[k] for a in answers if a[k]), None)
        for text in fresh:
            reason = verdicts.get(text)
            self.verdicts[text] = reason
            if reason:
                self.excluded[reason] += 1

    def ok(self, text: str) -> bool:
        self.check([text])
        return self.verdicts[text] is None


@dataclass
class Walk:
    pool: list[Passage]  # in this walk's order
    need: int  # padding tokens the longest length takes
    slack: int  # how many of them may stay empty
    at: int = 0  # passages of the pool walked so far
    usable: list[Passage] = field(default_factory=list)
    have: int = 0
    full: bool = False

    @property
    def done(self) -> bool:
        return self.full or self.at >= len(self.pool)


def walk_all(walks: Sequence[Walk], screen: Screen, tokens: dict[str, int]) -> None:
    """Advance every walk until it is full or its pool runs out."""
    while pending := [w for w in walks if not w.done]:
        chunks = [w.pool[w.at : w.at + (screen.batch or len(w.pool))] for w in pending]
        screen.check(x.text for chunk in chunks for x in chunk)
        for w, chunk in zip(pending, chunks):
            for passage in chunk:
                if w.full:
                    break
                w.at += 1
                if screen.verdicts[passage.text] is None:
                    w.usable.append(passage)
                    w.have += sum(tokens[s] for s in passage.sentences)
                    w.full = w.have >= w.need and padding(w.usable, tokens, w.need, w.slack, screen) is not None


def padding(
    usable: list[Passage], tokens: dict[str, int], budget: int, slack: int, screen: Screen
) -> list[Piece] | None:
    """The fill of `budget` tokens from the usable passages in order, a paragraph cut short
    kept only when the screen passes it as cut (a shorter text can score higher); None when
    they cannot fill it."""
    passages = list(usable)
    while (pieces := fill(passages, tokens, budget, slack)) is not None:
        failed = {text for text in cut_paragraphs(pieces, passages) if not screen.ok(text)}
        if not failed:
            return pieces
        used = {p.passage for p in pieces}
        passages = [
            x
            for n, x in enumerate(passages)
            if not (n in used and " ".join(p.text for p in pieces if p.passage == n) in failed)
        ]
    return None
