"""Benchmark reference localization on FineWeb documents, beside a plain rapidfuzz peer.

Builds seeded (document, reference) pairs from real web text, perturbs each
reference the way LLM quotes drift, and measures two things. Rates are per
second of process CPU time, which stays steady when other jobs share the
machine.

1. Head to head (``--peer-pairs``, 600 by default): the stage's matcher
   (``localize_spans`` picks, per document, the direct matcher or the index by
   how many references point into it) against the obvious code, one
   ``rapidfuzz.fuzz.partial_ratio_alignment`` per pair on the case-folded texts
   (score >= 80), on the same pairs in the same run, interleaved document by
   document; each side's time per document is the least of ``--repeats`` runs.
   Both are judged strictly (below) and leniently (any span with IoU >= 0.9 of
   the true one counts, "not found" for absent references).
2. Per matching path (``--pairs``, 10,000 by default, about 20 per document, so
   the index serves them): index builds apart, then each group's look-ups.

Correctness criteria (strict):

- exact/normalized set: the returned span must equal the true span exactly;
- fuzzy set: the returned span must overlap the true span with
  intersection-over-union >= 0.9 (a miss or an ambiguity verdict counts as
  wrong). Edits are kept to interior words so the true extent stays defined;
- absent set (sentences taken from another document): the only correct
  answer is ``span_not_found``; this measures false matches and how fast
  failing look-ups return.

Without the FineWeb sample (../shared/data next to the repository, or --data)
it says so and exits without measuring. Run from the repository root::

    PYTHONPATH=. python benchmarks/localize.py
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rapidfuzz import fuzz

from builder.textutil.direct_spans import matcher_for
from builder.textutil.spans import DocumentIndex, Span, SpanFailure, normalize_text

DEFAULT_DATA = Path(__file__).resolve().parents[1] / "../shared/data/fineweb_sample/fineweb_10bt_docs_1000.jsonl"

EXACT_KINDS = ("exact", "whitespace", "quotes_dashes", "case", "final_punct")
FUZZY_KINDS = ("word_substituted", "word_deleted", "typo")
GROUPS = {"exact/normalized": EXACT_KINDS, "fuzzy": FUZZY_KINDS, "absent": ("absent",)}
# Share of pairs per kind (sums to 1).
KIND_WEIGHTS = {
    "exact": 0.12,
    "whitespace": 0.12,
    "quotes_dashes": 0.12,
    "case": 0.10,
    "final_punct": 0.12,
    "word_substituted": 0.13,
    "word_deleted": 0.13,
    "typo": 0.10,
    "absent": 0.06,
}

TARGET_EXACT_RATE = 20_000.0
TARGET_FUZZY_RATE = 500.0
TARGET_FUZZY_CORRECT = 0.98
PEER_MIN_SCORE = 80.0
FUZZY_IOU = 0.9
MIN_REF, MAX_REF = 80, 300

_clock = time.process_time

# A sentence: starts at a non-space, ends at . ! or ? before whitespace, or at
# the end of its line.
_SENTENCE = re.compile(r"\S[^\n]*?(?:[.!?](?=\s)|[.!?]?$)", re.MULTILINE)
_WORD = re.compile(r"\S+")
_QUOTE_SWAP = str.maketrans({"'": "’", '"': "”", "-": "–", "’": "'", "‘": "'", "“": '"', "”": '"', "–": "-", "—": "-"})

Perturb = Callable[[str, random.Random], str]


@dataclass(frozen=True)
class Pair:
    doc_id: int
    kind: str
    reference: str
    start: int  # true span; -1 for absent references
    end: int


@dataclass
class Tally:
    """CPU time and outcomes of one group of look-ups."""

    seconds: float = 0.0
    total: int = 0
    correct: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)

    def add(self, ok: bool, outcome: str) -> None:
        self.total += 1
        self.correct += ok
        self.outcomes[outcome] += 1

    @property
    def rate(self) -> float:
        return self.total / self.seconds if self.seconds else float("inf")

    @property
    def accuracy(self) -> float:
        return self.correct / self.total if self.total else 0.0


# --- documents -------------------------------------------------------------------


def load_texts(path: Path) -> list[str] | None:
    """The sample's texts, or None (after saying why) when it is not there."""
    if not path.is_file():
        print(
            f"skipped: data file not found: {path}\n"
            "(the FineWeb sample is expected under ../shared/data/ next to the repository; pass --data)",
            file=sys.stderr,
        )
        return None
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line)["text"] for line in handle if line.strip()]


def _truncate_words(text: str, n_words: int) -> str:
    words = list(_WORD.finditer(text))
    return text if len(words) <= n_words else text[: words[n_words - 1].end()]


def build_documents(texts: Iterable[str], target_words: int) -> list[str]:
    """Join consecutive texts (cutting long ones) into documents of about ``target_words``."""
    documents: list[str] = []
    parts: list[str] = []
    words = 0
    for text in texts:
        parts.append(_truncate_words(text, target_words - words))
        words += len(_WORD.findall(parts[-1]))
        if words >= target_words * 0.9:
            documents.append("\n\n".join(parts))
            parts, words = [], 0
    return documents


def _unique(haystack: str, needle: str) -> bool:
    first = haystack.find(needle)
    return first >= 0 and haystack.find(needle, first + 1) < 0


def candidate_spans(doc: str) -> list[tuple[int, int]]:
    """Sentences of 80-300 characters that occur once, even after normalization."""
    normalized = normalize_text(doc)
    spans = []
    for match in _SENTENCE.finditer(doc):
        text = match.group().rstrip()
        if MIN_REF <= len(text) <= MAX_REF and _unique(doc, text) and _unique(normalized, normalize_text(text)):
            spans.append((match.start(), match.start() + len(text)))
    return spans


# --- perturbations -----------------------------------------------------------------


def _interior_words(text: str) -> list[re.Match[str]]:
    return list(_WORD.finditer(text))[1:-1]


def _edit_count(text: str, rng: random.Random) -> int:
    # Two edits only in long quotes: the 90-point threshold allows roughly one
    # changed character in ten, so two word edits in 80 characters exceed it.
    return 1 if len(text) < 160 else rng.choice((1, 2))


def perturb_whitespace(text: str, rng: random.Random) -> str:
    gaps = [m.start() for m in re.finditer(" ", text)]
    chosen = set(rng.sample(gaps, min(len(gaps), rng.randint(1, 3))))
    return "".join(rng.choice(("  ", "\n", " \n ")) if i in chosen else c for i, c in enumerate(text))


def perturb_quotes(text: str, rng: random.Random) -> str:
    swapped = text.translate(_QUOTE_SWAP)
    return swapped.replace("–", "—") if rng.random() < 0.5 else swapped


def perturb_case(text: str, rng: random.Random) -> str:
    return rng.choice((str.upper, str.lower, str.swapcase))(text)


def perturb_substitute(text: str, rng: random.Random, vocabulary: Sequence[str]) -> str:
    chosen = rng.sample(_interior_words(text), _edit_count(text, rng))
    for match in sorted(chosen, key=lambda m: -m.start()):
        replacement = rng.choice([w for w in rng.sample(vocabulary, 5) if w != match.group()] or ["the"])
        text = text[: match.start()] + replacement + text[match.end() :]
    return text


def perturb_delete(text: str, rng: random.Random) -> str:
    chosen = rng.sample(_interior_words(text), _edit_count(text, rng))
    for match in sorted(chosen, key=lambda m: -m.start()):
        text = text[: match.start()] + text[match.end() + 1 :]
    return text


def _typo(text: str, rng: random.Random) -> str:
    word = rng.choice([m for m in _interior_words(text) if len(m.group()) >= 3])
    at = rng.randrange(word.start() + 1, word.end() - 1)
    letter = rng.choice("aeiorst")
    return rng.choice(
        (
            text[:at] + text[at + 1] + text[at] + text[at + 2 :],  # swap two letters
            text[:at] + text[at + 1 :],  # drop a letter
            text[:at] + letter + text[at:],  # extra letter
            text[:at] + letter + text[at + 1 :],  # wrong letter
        )
    )


def perturb_typo(text: str, rng: random.Random) -> str:
    for _ in range(_edit_count(text, rng)):
        # Retry edits that change nothing (swapping "ll", replacing "a" by "a").
        edited = _typo(text, rng)
        while edited == text:
            edited = _typo(text, rng)
        text = edited
    return text


def keep(text: str, rng: random.Random) -> str:
    return text


_PERTURBATIONS: dict[str, Perturb] = {
    "exact": keep,
    "whitespace": perturb_whitespace,
    "quotes_dashes": perturb_quotes,
    "case": perturb_case,
    "word_deleted": perturb_delete,
    "typo": perturb_typo,
}


def perturb(kind: str, text: str, rng: random.Random, vocabulary: Sequence[str]) -> str:
    if kind == "word_substituted":
        return perturb_substitute(text, rng, vocabulary)
    return _PERTURBATIONS[kind](text, rng)


def _eligible(kind: str, normalized_doc: str, text: str) -> bool:
    if kind == "quotes_dashes":
        return any(c in text for c in "'\"-’‘“”–—")
    if kind == "final_punct":
        # One stop after a letter or digit, and the sentence without it must
        # still be unique.
        return re.search(r"\w[.!?]$", text) is not None and _unique(normalized_doc, normalize_text(text[:-1]))
    if kind in FUZZY_KINDS:
        interior = _interior_words(text)
        return len(interior) >= 2 and any(len(m.group()) >= 3 for m in interior)
    return True


def final_punct_pair(doc_id: int, text: str, start: int, rng: random.Random) -> Pair:
    """The stop dropped (a verbatim prefix), replaced, or dropped with lower case."""
    core = text[:-1]
    other_stop = rng.choice([c for c in "!?;…." if c != text[-1]])
    reference = rng.choice((core, core + other_stop, core.lower()))
    return Pair(doc_id, "final_punct", reference, start, start + len(core))


def absent_pair(
    doc_id: int, documents: Sequence[str], sentences: Sequence[Sequence[tuple[int, int]]], rng: random.Random
) -> Pair | None:
    """A sentence of another document that does not occur in this one."""
    other = rng.choice([i for i in range(len(documents)) if i != doc_id and sentences[i]])
    start, end = rng.choice(sentences[other])
    text = documents[other][start:end]
    if normalize_text(text) in normalize_text(documents[doc_id]):
        return None
    return Pair(doc_id, "absent", text, -1, -1)


def build_pairs(documents: Sequence[str], n_pairs: int, rng: random.Random) -> list[Pair]:
    """Deal sentences round-robin over the documents; kinds drawn by weight.

    A kind that does not fit the sentence (no quote to swap, no final stop)
    falls back to a case change.
    """
    sentences = [rng.sample(spans, len(spans)) for spans in map(candidate_spans, documents)]
    normalized = [normalize_text(doc) for doc in documents]
    vocabularies = [_WORD.findall(doc) for doc in documents]
    kinds, weights = list(KIND_WEIGHTS), list(KIND_WEIGHTS.values())
    pairs: list[Pair] = []
    for round_ in range(max(map(len, sentences))):
        for doc_id, spans in enumerate(sentences):
            if round_ >= len(spans) or len(pairs) == n_pairs:
                continue
            start, end = spans[round_]
            text = documents[doc_id][start:end]
            kind = rng.choices(kinds, weights)[0]
            if kind == "absent":
                pair = absent_pair(doc_id, documents, sentences, rng)
                pairs.extend([pair] if pair else [])
                continue
            if not _eligible(kind, normalized[doc_id], text):
                kind = "case"
            if kind == "final_punct":
                pairs.append(final_punct_pair(doc_id, text, start, rng))
                continue
            pairs.append(Pair(doc_id, kind, perturb(kind, text, rng, vocabularies[doc_id]), start, end))
    return pairs


# --- measurement -----------------------------------------------------------------


def iou(a: tuple[int, int], b: tuple[int, int]) -> float:
    inter = max(0, min(a[1], b[1]) - max(a[0], b[0]))
    union = max(a[1], b[1]) - min(a[0], b[0])
    return inter / union if union else 0.0


def judge(pair: Pair, found: Span | SpanFailure) -> tuple[bool, str]:
    """Whether the answer is right for the pair's kind, and what it was."""
    if isinstance(found, SpanFailure):
        return pair.kind == "absent" and found is SpanFailure.NOT_FOUND, found.value
    truth = (pair.start, pair.end)
    if pair.kind == "absent":
        return False, found.method
    if pair.kind in EXACT_KINDS:
        return (found.start, found.end) == truth, found.method
    return iou((found.start, found.end), truth) >= FUZZY_IOU, found.method


def run_matcher(documents: Sequence[str], pairs: Sequence[Pair]) -> tuple[float, dict[str, Tally], dict[str, Tally]]:
    """Time index builds and each group's look-ups separately, per document."""
    by_doc: dict[int, list[Pair]] = {}
    for pair in pairs:
        by_doc.setdefault(pair.doc_id, []).append(pair)
    index_seconds = 0.0
    per_group = {name: Tally() for name in GROUPS}
    per_kind = {kind: Tally() for kind in KIND_WEIGHTS}
    for doc_id, doc_pairs in by_doc.items():
        began = _clock()
        index = DocumentIndex(documents[doc_id])
        index_seconds += _clock() - began
        for name, kinds in GROUPS.items():
            chosen = [p for p in doc_pairs if p.kind in kinds]
            began = _clock()
            results = [index.locate(p.reference) for p in chosen]
            per_group[name].seconds += _clock() - began
            for pair, found in zip(chosen, results):
                ok, outcome = judge(pair, found)
                per_group[name].add(ok, outcome)
                per_kind[pair.kind].add(ok, outcome)
    return index_seconds, per_group, per_kind


def peer_locate(document: str, reference: str) -> Span | SpanFailure:
    """The obvious code: one partial_ratio alignment of the case-folded texts."""
    found = fuzz.partial_ratio_alignment(reference.strip().casefold(), document.casefold(), score_cutoff=PEER_MIN_SCORE)
    return SpanFailure.NOT_FOUND if found is None else Span(found.dest_start, found.dest_end, "fuzzy", found.score)


def judge_leniently(pair: Pair, found: Span | SpanFailure) -> bool:
    if pair.kind == "absent" or isinstance(found, SpanFailure):
        return pair.kind == "absent" and found is SpanFailure.NOT_FOUND
    return iou((found.start, found.end), (pair.start, pair.end)) >= FUZZY_IOU


@dataclass
class Side:
    """One contender of the head-to-head: CPU time and verdicts per kind."""

    seconds: float = 0.0
    strict: Counter[str] = field(default_factory=Counter)
    lenient: Counter[str] = field(default_factory=Counter)
    pairs: Counter[str] = field(default_factory=Counter)

    def add(self, pairs: Sequence[Pair], results: Sequence[Span | SpanFailure]) -> None:
        for pair, found in zip(pairs, results):
            self.pairs[pair.kind] += 1
            self.strict[pair.kind] += judge(pair, found)[0]
            self.lenient[pair.kind] += judge_leniently(pair, found)

    @property
    def total(self) -> int:
        return sum(self.pairs.values())


def _timed(run: Callable[[], list[Span | SpanFailure]], repeats: int) -> tuple[float, list[Span | SpanFailure]]:
    best, results = float("inf"), []
    for _ in range(repeats):
        began = _clock()
        results = run()
        best = min(best, _clock() - began)
    return best, results


def run_head_to_head(documents: Sequence[str], pairs: Sequence[Pair], repeats: int) -> tuple[Side, Side]:
    """The stage's matcher and the peer on the same pairs, document by document."""
    by_doc: dict[int, list[Pair]] = {}
    for pair in pairs:
        by_doc.setdefault(pair.doc_id, []).append(pair)
    ours, peer = Side(), Side()
    for doc_id, doc_pairs in by_doc.items():
        text = documents[doc_id]

        def stage(text: str = text, doc_pairs: list[Pair] = doc_pairs) -> list[Span | SpanFailure]:
            matcher = matcher_for(text, len(doc_pairs))  # what localize_spans' match_block does
            return [matcher.locate(p.reference) for p in doc_pairs]

        seconds, results = _timed(stage, repeats)
        ours.seconds += seconds
        ours.add(doc_pairs, results)
        seconds, results = _timed(lambda t=text, ps=doc_pairs: [peer_locate(t, p.reference) for p in ps], repeats)
        peer.seconds += seconds
        peer.add(doc_pairs, results)
    return ours, peer


# --- report ----------------------------------------------------------------------


def _verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def print_kinds(per_kind: dict[str, Tally]) -> None:
    print(f"{'kind':<18}{'pairs':>7}{'correct':>10}  outcomes")
    for kind, tally in per_kind.items():
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(tally.outcomes.items()))
        print(f"{kind:<18}{tally.total:>7}{tally.accuracy:>10.2%}  {outcomes}")


def print_groups(index_seconds: float, per_group: dict[str, Tally]) -> None:
    exact, fuzzy, absent = per_group["exact/normalized"], per_group["fuzzy"], per_group["absent"]
    exact_ok = exact.rate >= TARGET_EXACT_RATE and exact.accuracy == 1.0
    fuzzy_ok = fuzzy.rate >= TARGET_FUZZY_RATE and fuzzy.accuracy >= TARGET_FUZZY_CORRECT
    print(
        f"exact/normalized set: {exact.rate:>9,.0f} spans/s, {exact.accuracy:.2%} exact offsets "
        f"(target >= {TARGET_EXACT_RATE:,.0f}/s and 100%: {_verdict(exact_ok)})"
    )
    print(
        f"fuzzy set:            {fuzzy.rate:>9,.0f} spans/s, {fuzzy.accuracy:.2%} with IoU >= {FUZZY_IOU} "
        f"(target >= {TARGET_FUZZY_RATE:,.0f}/s and {TARGET_FUZZY_CORRECT:.0%}: {_verdict(fuzzy_ok)})"
    )
    print(f"absent set:           {absent.rate:>9,.0f} look-ups/s, {absent.accuracy:.2%} correctly not found")
    total = sum(t.total for t in per_group.values())
    seconds = index_seconds + sum(t.seconds for t in per_group.values())
    print(f"all pairs, index builds included: {total / seconds:,.0f} look-ups/s")


def print_head_to_head(ours: Side, peer: Side) -> None:
    print(f"{'kind':<18}{'pairs':>6}  {'ours strict':>11} {'lenient':>8}  {'peer strict':>11} {'lenient':>8}")
    for kind in KIND_WEIGHTS:
        n = ours.pairs[kind]
        if n:
            print(
                f"{kind:<18}{n:>6}  {ours.strict[kind] / n:>11.1%} {ours.lenient[kind] / n:>8.1%}  "
                f"{peer.strict[kind] / n:>11.1%} {peer.lenient[kind] / n:>8.1%}"
            )
    ours_rate, peer_rate = ours.total / ours.seconds, peer.total / peer.seconds
    ours_right = sum(ours.strict.values()) / ours.total
    peer_right = sum(peer.strict.values()) / peer.total
    ours_lenient = sum(ours.lenient.values()) / ours.total
    peer_lenient = sum(peer.lenient.values()) / peer.total
    met = ours_rate >= peer_rate and ours_right >= peer_right and ours_lenient >= peer_lenient
    print(f"stage's matcher: {ours_rate:>7,.0f} pairs/CPU-s, {ours_right:.1%} right ({ours_lenient:.1%} leniently)")
    print(f"rapidfuzz peer:  {peer_rate:>7,.0f} pairs/CPU-s, {peer_right:.1%} right ({peer_lenient:.1%} leniently)")
    print(
        f"-> {ours_rate / peer_rate:.2f}x the peer's speed "
        f"(target: at least as fast and as often right: {_verdict(met)})"
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--pairs", type=int, default=10_000)
    parser.add_argument("--peer-pairs", type=int, default=600)
    parser.add_argument("--repeats", type=int, default=3, help="head to head: least CPU time of so many runs")
    parser.add_argument("--words", type=int, default=1_500, help="target document length in words")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    texts = load_texts(args.data.resolve())
    if texts is None:
        return
    documents = build_documents(texts, args.words)
    few = build_pairs(documents, args.peer_pairs, random.Random(args.seed))
    used = sorted({p.doc_id for p in few})
    mean_chars = sum(len(documents[i]) for i in used) / len(used)
    print(
        f"head to head: {len(few)} pairs over {len(used)} documents (mean {mean_chars:,.0f} chars), "
        f"rates per CPU second"
    )
    print_head_to_head(*run_head_to_head(documents, few, args.repeats))

    pairs = build_pairs(documents, args.pairs, random.Random(args.seed))
    index_seconds, per_group, per_kind = run_matcher(documents, pairs)
    used = sorted({p.doc_id for p in pairs})
    print()
    print(
        f"per path: {len(pairs)} pairs over {len(used)} documents, each indexed once "
        f"({index_seconds * 1000 / len(used):.3f} ms per document)"
    )
    print()
    print_kinds(per_kind)
    print()
    print_groups(index_seconds, per_group)


if __name__ == "__main__":
    main()
