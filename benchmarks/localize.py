"""Benchmark reference localization on FineWeb documents.

Builds seeded (document, reference) pairs from real web text, perturbs each
reference the way LLM quotes drift, locates it with
:class:`builder.textutil.spans.DocumentIndex` (one index per document, many
references each), and reports throughput and offset correctness per matching
path, plus a naive ``difflib`` baseline. Rates are per second of process CPU
time, which stays steady when other jobs share the machine.

Correctness criteria:

- exact/normalized set: the returned span must equal the true span exactly;
- fuzzy set: the returned span must overlap the true span with
  intersection-over-union >= 0.9 (a miss or an ambiguity verdict counts as
  wrong). Edits are kept to interior words so the true extent stays defined;
- absent set (sentences taken from another document): the only correct
  answer is ``span_not_found``; this measures false matches and how fast
  failing look-ups return.

Run from the repository root::

    PYTHONPATH=. python benchmarks/localize.py
"""

from __future__ import annotations

import argparse
import difflib
import json
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from builder.textutil.spans import DocumentIndex, Span, SpanFailure, normalize_text

DEFAULT_DATA = Path(__file__).resolve().parents[1] / "../shared/data/fineweb_sample/fineweb_10bt_docs_1000.jsonl"

EXACT_KINDS = ("exact", "whitespace", "quotes_dashes", "case", "final_punct")
FUZZY_KINDS = ("word_substituted", "word_deleted", "typo")
GROUPS = {"exact/normalized": EXACT_KINDS, "fuzzy": FUZZY_KINDS, "absent": ("absent",)}
# Share of pairs per kind (sums to 1).
KIND_WEIGHTS = {
    "exact": 0.12, "whitespace": 0.12, "quotes_dashes": 0.12, "case": 0.10, "final_punct": 0.12,
    "word_substituted": 0.13, "word_deleted": 0.13, "typo": 0.10, "absent": 0.06,
}

TARGET_EXACT_RATE = 20_000.0
TARGET_FUZZY_RATE = 500.0
TARGET_FUZZY_CORRECT = 0.98
FUZZY_IOU = 0.9
MIN_REF, MAX_REF = 80, 300

_clock = time.process_time

# A sentence: starts at a non-space, ends at . ! or ? before whitespace, or at
# the end of its line.
_SENTENCE = re.compile(r"\S[^\n]*?(?:[.!?](?=\s)|[.!?]?$)", re.MULTILINE)
_WORD = re.compile(r"\S+")
_QUOTE_SWAP = str.maketrans(
    {"'": "’", '"': "”", "-": "–", "’": "'", "‘": "'", "“": '"', "”": '"', "–": "-", "—": "-"}
)

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


def load_texts(path: Path) -> list[str]:
    if not path.is_file():
        sys.exit(f"data file not found: {path}\n"
                 "(expected the FineWeb sample under ../shared/data/ next to the repository; pass --data)")
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
    return rng.choice((
        text[:at] + text[at + 1] + text[at] + text[at + 2 :],  # swap two letters
        text[:at] + text[at + 1 :],  # drop a letter
        text[:at] + letter + text[at:],  # extra letter
        text[:at] + letter + text[at + 1 :],  # wrong letter
    ))


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


def absent_pair(doc_id: int, documents: Sequence[str], sentences: Sequence[Sequence[tuple[int, int]]],
                rng: random.Random) -> Pair | None:
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


def difflib_locate(matcher: difflib.SequenceMatcher[str], doc_len: int, reference: str) -> tuple[int, int]:
    """Anchor the quote on its longest common block with the document."""
    matcher.set_seq1(reference.lower())
    block = matcher.find_longest_match(0, len(reference), 0, doc_len)
    start = max(0, block.b - block.a)
    return start, start + len(reference)


def run_baseline(documents: Sequence[str], pairs: Sequence[Pair]) -> tuple[Tally, Tally]:
    """Our matcher versus difflib on the same pairs, both judged by IoU >= 0.9.

    Per-document preparation (difflib's character index, our DocumentIndex)
    happens outside the timed region for both.
    """
    ours, theirs = Tally(), Tally()
    for doc_id in sorted({p.doc_id for p in pairs}):
        chosen = [p for p in pairs if p.doc_id == doc_id]
        doc = documents[doc_id]
        matcher = difflib.SequenceMatcher(None, autojunk=False)
        matcher.set_seq2(doc.lower())
        index = DocumentIndex(doc)
        began = _clock()
        guesses = [difflib_locate(matcher, len(doc), p.reference) for p in chosen]
        theirs.seconds += _clock() - began
        began = _clock()
        results = [index.locate(p.reference) for p in chosen]
        ours.seconds += _clock() - began
        for pair, guess, found in zip(chosen, guesses, results):
            truth = (pair.start, pair.end)
            theirs.add(iou(guess, truth) >= FUZZY_IOU, "difflib")
            ours.add(isinstance(found, Span) and iou((found.start, found.end), truth) >= FUZZY_IOU, "ours")
    return ours, theirs


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
    print(f"exact/normalized set: {exact.rate:>9,.0f} spans/s, {exact.accuracy:.2%} exact offsets "
          f"(target >= {TARGET_EXACT_RATE:,.0f}/s and 100%: {_verdict(exact_ok)})")
    print(f"fuzzy set:            {fuzzy.rate:>9,.0f} spans/s, {fuzzy.accuracy:.2%} with IoU >= {FUZZY_IOU} "
          f"(target >= {TARGET_FUZZY_RATE:,.0f}/s and {TARGET_FUZZY_CORRECT:.0%}: {_verdict(fuzzy_ok)})")
    print(f"absent set:           {absent.rate:>9,.0f} look-ups/s, {absent.accuracy:.2%} correctly not found")
    total = sum(t.total for t in per_group.values())
    seconds = index_seconds + sum(t.seconds for t in per_group.values())
    print(f"all pairs, index builds included: {total / seconds:,.0f} look-ups/s")


def print_baseline(ours: Tally, theirs: Tally) -> None:
    print(f"difflib baseline on {theirs.total} pairs: {theirs.rate:,.1f} spans/s, "
          f"{theirs.accuracy:.2%} with IoU >= {FUZZY_IOU}")
    print(f"ours on the same pairs: {ours.rate:,.0f} spans/s, {ours.accuracy:.2%} "
          f"-> {ours.rate / theirs.rate:,.0f}x faster")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--pairs", type=int, default=10_000)
    parser.add_argument("--words", type=int, default=1_500, help="target document length in words")
    parser.add_argument("--baseline-pairs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    rng = random.Random(args.seed)
    documents = build_documents(load_texts(args.data.resolve()), args.words)
    pairs = build_pairs(documents, args.pairs, rng)
    index_seconds, per_group, per_kind = run_matcher(documents, pairs)
    present = [p for p in pairs if p.kind != "absent"]
    ours, theirs = run_baseline(documents, rng.sample(present, min(args.baseline_pairs, len(present))))

    used = sorted({p.doc_id for p in pairs})
    mean_chars = sum(len(documents[i]) for i in used) / len(used)
    print(f"documents: {len(used)} (mean {mean_chars:,.0f} chars); pairs: {len(pairs)}; rates per CPU second")
    print(f"index build: {index_seconds * 1000 / len(used):.3f} ms per document")
    print()
    print_kinds(per_kind)
    print()
    print_groups(index_seconds, per_group)
    print()
    print_baseline(ours, theirs)


if __name__ == "__main__":
    main()
