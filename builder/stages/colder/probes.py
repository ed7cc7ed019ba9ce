"""ColDeR controlled document variants (paper 004, §3.3–3.4 and appendix A.2).

Each setting turns one fact into documents that differ only in the factor under test.
Notation: `ev` is the single evidence sentence (head and tail), `neutral` are sentences
of the same document mentioning neither, `head_only` mention the head but not the tail.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

Setting = Literal["position_i", "first_vs_last", "brevity", "repetition", "answer_importance", "foil"]
SETTINGS: tuple[Setting, ...] = ("position_i", "first_vs_last", "brevity", "repetition", "answer_importance", "foil")


@dataclass(frozen=True)
class FactParts:
    head: str  # the head's surface text in the evidence sentence
    evidence: str
    neutral: tuple[str, ...]
    head_only: tuple[str, ...]


@dataclass(frozen=True)
class Variant:
    name: str
    sentences: tuple[str, ...]
    evidence_at: int | None  # index of the evidence sentence; None when absent

    def text_and_span(self) -> tuple[str, int | None, int | None]:
        """Sentences joined by spaces, and the evidence sentence's character offsets."""
        if self.evidence_at is None:
            return " ".join(self.sentences), None, None
        start = sum(len(s) + 1 for s in self.sentences[: self.evidence_at])
        return " ".join(self.sentences), start, start + len(self.sentences[self.evidence_at])


@dataclass(frozen=True)
class Probe:
    setting: Setting
    variants: tuple[Variant, ...]
    pairs: tuple[tuple[str, str], ...]  # (A, B) variant names; A is the paper's D1
    positive: str  # the variant that holds the evidence and stands as the query's document


def _position(f: FactParts) -> Probe:
    n = len(f.neutral)
    variants = tuple(Variant(f"pos{i + 1:02d}", f.neutral[:i] + (f.evidence,) + f.neutral[i:], i) for i in range(n + 1))
    pairs = tuple((variants[0].name, v.name) for v in variants[1:])
    return Probe("position_i", variants, pairs, variants[0].name)


def _first_vs_last(f: FactParts) -> Probe:
    first = Variant("evidence_first", (f.evidence, *f.neutral), 0)
    last = Variant("evidence_last", (*f.neutral, f.evidence), len(f.neutral))
    return Probe("first_vs_last", (first, last), (("evidence_first", "evidence_last"),), first.name)


def _brevity(f: FactParts) -> Probe:
    short = Variant("evidence_only", (f.evidence,), 0)
    long = Variant("evidence_and_rest", (f.evidence, *f.neutral), 0)
    return Probe("brevity", (short, long), ((short.name, long.name),), short.name)


def _repetition(f: FactParts) -> Probe:
    more = Variant("more_heads", (f.evidence, *f.head_only[:2]), 0)
    fewer = Variant("fewer_heads", (f.evidence, *f.neutral[:2]), 0)
    return Probe("repetition", (more, fewer), ((more.name, fewer.name),), more.name)


def _answer_importance(f: FactParts) -> Probe:
    present = Variant("answer_present", (f.evidence, *f.neutral), 0)
    absent = Variant("answer_absent", (f.head_only[0], *f.neutral), None)
    return Probe("answer_importance", (present, absent), ((present.name, absent.name),), present.name)


def foil_probe(f: FactParts, unrelated: tuple[str, ...], prefix: str) -> Probe:
    """Foil: the head repeated, then a head-only sentence (no answer); against the evidence
    wrapped in the same unrelated sentences before and after."""
    foil = Variant("foil", (prefix.format(head=f.head), f.head_only[0]), None)
    evidence = Variant("evidence_buried", (*unrelated, f.evidence, *unrelated), len(unrelated))
    return Probe("foil", (foil, evidence), ((foil.name, evidence.name),), evidence.name)


# What each setting needs: (neutral sentences, head-only sentences).
NEEDS: dict[Setting, tuple[int, int]] = {
    "position_i": (1, 0),
    "first_vs_last": (1, 0),
    "brevity": (1, 0),
    "repetition": (2, 2),
    "answer_importance": (1, 1),
    "foil": (0, 1),
}
BUILDERS: dict[Setting, Callable[[FactParts], Probe]] = {
    "position_i": _position,
    "first_vs_last": _first_vs_last,
    "brevity": _brevity,
    "repetition": _repetition,
    "answer_importance": _answer_importance,
}


def shortfall(setting: Setting, f: FactParts) -> str | None:
    """Why the fact cannot feed this setting, or None."""
    need_neutral, need_head = NEEDS[setting]
    if len(f.neutral) < need_neutral:
        return "too_few_neutral_sentences"
    if len(f.head_only) < need_head:
        return "too_few_head_only_sentences"
    return None
