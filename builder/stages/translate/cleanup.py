"""Spotting translator chatter: lead-in prefixes ("Here is the translation:") and refusals.

Two prefix rules (PosIR B.5.1, our own lists): a fixed list of lead-in patterns in the
usual languages, and a looser rule — a translation keyword shortly before a line break
near the start — that only counts when langdetect says the lead-in is written in the
source language, i.e. the model spoke to us instead of translating. Neither applies when
the source itself opens with such words, since then the translation should keep them.
"""

from __future__ import annotations

import re

from builder.textutil.languages import detect, same_language

_I = re.IGNORECASE
PREFIX_PATTERNS = [
    re.compile(p, _I)
    for p in (
        r"^\s*(?:(?:sure|certainly|of course|okay|ok)[!.,]?\s*)?(?:here is|here's|below is|the following is)"
        r"[^\n]{0,160}?translat\w*[^\n]{0,120}?(?:[:：]\s*|\n\s*)",
        r"^\s*(?:\w+\s){0,3}translation(?:\s*\([^)\n]{0,40}\))?(?:\s+(?:in|into|to)\s+\w+)?\s*[:：]\s*",
        r"^\s*translated text\s*[:：]\s*",
        r"^\s*voici (?:la|une|ma) traduction[^\n]{0,120}?(?:[:：]\s*|\n\s*)",
        r"^\s*traduction(?:\s+en\s+\w+)?\s*[:：]\s*",
        r"^\s*aqu[ií] (?:est[aá]|tienes|tiene) (?:la|una|a) tradu[cç][aã]?[oió]n?[^\n]{0,120}?(?:[:：]\s*|\n\s*)",
        r"^\s*tradu(?:cción|ção|zione)(?:\s+a[lo]?\s+\w+)?\s*[:：]\s*",
        r"^\s*hier (?:ist|die) (?:die )?übersetzung[^\n]{0,120}?(?:[:：]\s*|\n\s*)",
        r"^\s*übersetzung(?:\s+ins\s+\w+)?\s*[:：]\s*",
        r"^\s*ecco la traduzione[^\n]{0,120}?(?:[:：]\s*|\n\s*)",
        r"^\s*вот перевод[^\n]{0,120}?(?:[:：]\s*|\n\s*)",
        r"^\s*перевод(?:\s+на\s+\w+(?:\s+\w+)?)?\s*[:：]\s*",
        r"^\s*以下是[^\n]{0,60}?(?:翻译|翻譯|译文)[^\n]{0,40}?(?:[:：]\s*|\n\s*)",
        r"^\s*(?:翻译|翻譯|译文)\s*[:：]\s*",
        r"^\s*(?:إليك|هذه هي|فيما يلي) (?:ال)?ترجمة[^\n]{0,120}?(?:[:：]\s*|\n\s*)",
        r"^\s*الترجمة\s*[:：]\s*",
        r"^\s*다음은[^\n]{0,60}?번역[^\n]{0,40}?(?:[:：]\s*|\n\s*)",
        r"^\s*번역(?:문|본)?\s*[:：]\s*",
        r"^\s*(?:以下は|こちらは)[^\n]{0,60}?翻訳[^\n]{0,40}?(?:[:：]\s*|\n\s*)",
    )
]
KEYWORDS = re.compile(
    r"translat|here is|here's|voici|traduction|traducción|tradução|traduzione|aquí|übersetz|"
    r"ecco|перевод|вот|翻译|翻譯|译文|ترجمة|إليك|번역|다음은|翻訳",
    _I,
)
REFUSAL_PATTERNS = [
    re.compile(p, _I)
    for p in (
        r"\bI(?:'m| am) (?:sorry|afraid)\b",
        r"\bI apologi[sz]e\b",
        r"\bas an AI\b",
        r"\bI (?:can(?:no|')t|cannot|am unable to|'m unable to|won't|will not)\b[^.\n]{0,60}"
        r"(?:translat|help|assist|provide|comply|process)",
        r"\bje ne (?:peux|suis) pas\b[^.\n]{0,40}tradu",
        r"\bdésolée?\b",
        r"\bno puedo\b[^.\n]{0,40}tradu",
        r"\blo siento\b",
        r"\bkann\b[^.\n]{0,40}nicht übersetz",
        r"\bes tut mir leid\b",
        r"\bnon posso\b[^.\n]{0,40}tradu",
        r"\bmi dispiace\b",
        r"\bnão posso\b[^.\n]{0,40}tradu",
        r"\bdesculpe\b",
        r"не могу[^.\n]{0,40}перев",
        r"\bизвините\b",
        r"\bк сожалению\b",
        r"لا (?:أستطيع|يمكنني)",
        r"عذرًا|عذرا|آسف",
        r"죄송",
        r"번역할 수 없",
        r"抱歉",
        r"无法翻译|無法翻譯",
        r"我不能",
        r"申し訳",
        r"翻訳できません",
    )
]


def refusal_hit(text: str, max_chars: int = 1500) -> bool:
    head = text[:max_chars]
    return any(p.search(head) for p in REFUSAL_PATTERNS)


def find_prefix(
    text: str, source: str | None, source_lang: str | None, window: int = 500, max_chars: int = 2000
) -> int:
    """How many leading characters of a translation are translator chatter (0: none)."""
    if source is not None and (KEYWORDS.search(source[: max(window, 200)]) or _pattern_cut(source)):
        return 0
    cut = _pattern_cut(text) or _keyword_cut(text, source_lang, window, max_chars)
    # A refusal is no lead-in: stripping it would hide it from the refusal check.
    return 0 if cut and refusal_hit(text[:cut]) else cut


def _pattern_cut(text: str) -> int:
    for pattern in PREFIX_PATTERNS:
        m = pattern.match(text)
        if m and m.end() < len(text.rstrip()):
            return m.end()
    return 0


def _keyword_cut(text: str, source_lang: str | None, window: int, max_chars: int) -> int:
    """The first line break within `max_chars` that has a keyword at most `window`
    characters before it, when the text before it reads as the source language."""
    if source_lang is None:
        return 0
    for brk in re.finditer(r"\n", text[:max_chars]):
        lead = text[: brk.start()]
        if not lead.strip() or not KEYWORDS.search(lead[-window:]):
            continue
        found = detect(lead)
        if found is None or not same_language(found.lang, source_lang):
            return 0
        end = brk.end()
        while end < len(text) and text[end].isspace():
            end += 1
        return end if end < len(text) else 0
    return 0


Cut = tuple[int, int]  # [start, end) removed from a text


def strip_prefixes(
    text: str, starts: list[int], source: str | None, source_lang: str | None, window: int = 500, max_chars: int = 2000
) -> tuple[str, list[Cut]]:
    """Remove chatter at the start of every translated piece (`starts`: where each piece
    begins). Only the first piece is compared with the source's opening."""
    cuts: list[Cut] = []
    for i, start in enumerate(sorted(set(starts or [0]))):
        n = find_prefix(text[start:], source if i == 0 else None, source_lang, window, max_chars)
        if n:
            cuts.append((start, start + n))
    if not cuts:
        return text, []
    kept, at = [], 0
    for a, b in cuts:
        kept.append(text[at:a])
        at = b
    kept.append(text[at:])
    return "".join(kept), cuts


def shift(offset: int, cuts: list[Cut]) -> int | None:
    """Where a character offset lands once the cuts are removed (None: inside a cut)."""
    moved = offset
    for a, b in cuts:
        if offset >= b:
            moved -= b - a
        elif offset > a:
            return None
    return moved
