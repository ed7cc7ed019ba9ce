"""Offline question templates: a cloze question over one sentence in the requested third.

These questions are lexical by construction (they quote their evidence), so they are a
control condition and a smoke test, not a substitute for LLM-written questions.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from builder.stages.generate.records import GenerationOutcome, QueryDraft
from builder.stages.generate.whole_document import pick_region
from builder.textutil.positions import requested_of_region
from builder.util.stable import query_id

if TYPE_CHECKING:
    import random

    import polars as pl

    from builder.stages.context import StageContext
    from builder.stages.generate.params import GenerateParams

_SENTENCE = re.compile(r"[^\n.!?。！？]+(?:[.!?。！？]+|$)", re.MULTILINE)
_KEYWORD = re.compile(r"[^\W\d_]{4,}|\d{2,}")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
_STOP = frozenset(
    "that this with from have which their there these those when where what will would "
    "into than then they them also been were such only some more other each must should "
    "does used uses using".split()
)
_TEMPLATES = (
    'Fill in the blank: "{masked}"',
    'Which word is missing from this statement: "{masked}"?',
)
_THIRDS = {"beginning": 0, "middle": 1, "end": 2}


def sentences(text: str) -> list[tuple[int, int]]:
    """[start, end) of each sentence-like piece, trimmed of surrounding whitespace."""
    out = []
    for m in _SENTENCE.finditer(text):
        start, end = m.span()
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if end > start:
            out.append((start, end))
    return out


def _usable(piece: str, text: str) -> bool:
    size = len(piece) if _CJK.search(piece) else len(piece.split())
    low, high = (12, 160) if _CJK.search(piece) else (6, 60)
    letters = sum(c.isalpha() for c in piece)
    return low <= size <= high and letters >= 0.6 * len(piece.replace(" ", "")) and text.count(piece) == 1


def _keyword(sentence: str) -> re.Match[str] | None:
    words = [m for m in _KEYWORD.finditer(sentence) if m.group().lower() not in _STOP]
    return max(words, key=lambda m: len(m.group()), default=None)


def _draft(doc_id: str, text: str, region: str, rng: random.Random, taken: set[tuple[int, int]]) -> QueryDraft | None:
    third = len(text) / 3
    lo, hi = _THIRDS[region] * third, (_THIRDS[region] + 1) * third
    candidates = [
        (s, e) for s, e in sentences(text) if lo <= s and e <= hi and (s, e) not in taken and _usable(text[s:e], text)
    ]
    rng.shuffle(candidates)
    for s, e in candidates:
        piece = text[s:e]
        key = _keyword(piece)
        if key is None:
            continue
        taken.add((s, e))
        masked = piece[: key.start()] + "____" + piece[key.end() :]
        question = rng.choice(_TEMPLATES).format(masked=" ".join(masked.split()))
        return QueryDraft(
            query_id=query_id(doc_id, f"generate_queries:cloze:{requested_of_region(region)}", question),
            doc_id=doc_id,
            text=question,
            answer=key.group(),
            qtype="cloze",
            requested_position=region,
            reference_texts=(piece,),
        )
    return None


def generate_extractive(
    corpus: pl.DataFrame, ctx: StageContext, p: GenerateParams, on_questions: Callable[[list[str]], None]
) -> GenerationOutcome:
    outcome = GenerationOutcome(notes={"no_sentence_in_region": 0})
    for doc in corpus.select("doc_id", "text").iter_rows(named=True):
        taken: set[tuple[int, int]] = set()
        for k in range(p.questions_per_call * p.calls_per_doc):
            key = f"{doc['doc_id']}/x{k}"
            region = pick_region(ctx, key, p.region_weights)
            draft = _draft(doc["doc_id"], doc["text"], region, ctx.item_rng(key), taken)
            if draft is None:
                outcome.notes["no_sentence_in_region"] += 1
            else:
                outcome.drafts.append(draft)
    on_questions([d.text for d in outcome.drafts])
    return outcome
