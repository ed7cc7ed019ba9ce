"""The row-parallel part of `clean_translations`: lead-in stripping and each translated
row's refusal / language verdict, one row at a time and without looking at other rows.

The block functions are module-level and pure (langdetect is seeded per call), so an
executor can run them on any worker; what to drop is decided on the driver.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from builder.stages.translate.cleanup import Cut, refusal_hit, strip_prefixes
from builder.textutil.languages import Detection, detect, detectable, same_language

SHORT_REFUSAL = 300  # characters: a refusal is a sentence or two, not a page

# strip_prefixes' arguments: text, piece starts, source text, source language, window, max chars
StripRow = tuple[str, list[int], str | None, str | None, int, int]
# lang, text, piece starts (None for a query), source text, source language
JudgeRow = tuple[str, str, list[int] | None, str | None, str | None]


@dataclass(frozen=True)
class CheckSettings:
    check_language: bool
    min_confidence: float
    min_detect_chars: int
    detect_chars: int
    refusal_chars: int
    min_length_ratio: float
    max_length_ratio: float


@dataclass
class Verdict:
    lang: str
    suspects: list[tuple[str, bool]] = field(default_factory=list)  # (text, refusal by heuristic)
    other: str | None = None  # wrong_language or length_ratio


def strip_block(block: list[StripRow]) -> list[tuple[str, list[Cut]] | None]:
    """Per row: the text without lead-ins and the cuts made, or None when nothing was cut
    (so unchanged texts do not travel back)."""
    out: list[tuple[str, list[Cut]] | None] = []
    for row in block:
        new, cuts = strip_prefixes(*row)
        out.append((new, cuts) if cuts else None)
    return out


def judge_doc_block(settings: CheckSettings, block: list[JudgeRow]) -> list[Verdict]:
    """Each translated piece is judged on its own: a refusal or a wrong language can hit
    any piece of a document translated piece by piece."""
    out = []
    for lang, text, starts, source_text, source_lang in block:
        apologetic = refusal_hit(source_text or "", len(source_text or ""))
        verdict = Verdict(lang)
        wrong = False
        for piece in _pieces(text, starts):
            found = _detect(settings, piece)
            _suspect(settings, verdict, piece, found, source_lang, apologetic)
            wrong = wrong or (found is not None and detectable(lang) and not same_language(found.lang, lang))
        ratio = len(text) / len(source_text) if source_text else None
        odd = ratio is not None and not settings.min_length_ratio <= ratio <= settings.max_length_ratio
        verdict.other = "wrong_language" if wrong else ("length_ratio" if odd else None)
        out.append(verdict)
    return out


def judge_query_block(settings: CheckSettings, block: list[JudgeRow]) -> list[Verdict]:
    """Queries are short, so langdetect is trusted only to spot one left in the source language."""
    out = []
    for lang, text, _, source_text, source_lang in block:
        found = _detect(settings, text)
        verdict = Verdict(lang)
        _suspect(settings, verdict, text, found, source_lang, refusal_hit(source_text or "", len(source_text or "")))
        if found is not None and same_language(found.lang, source_lang):
            verdict.other = "wrong_language"
        out.append(verdict)
    return out


def _detect(settings: CheckSettings, text: str) -> Detection | None:
    """A confident language verdict, or None."""
    if not settings.check_language or len(text.strip()) < settings.min_detect_chars:
        return None
    found = detect(text, settings.detect_chars)
    return found if found is not None and found.prob >= settings.min_confidence else None


def _suspect(
    settings: CheckSettings,
    verdict: Verdict,
    piece: str,
    found: Detection | None,
    source_lang: str | None,
    apologetic: bool,
) -> None:
    """A piece is suspect when the pattern list hits or it reads as the source language.
    Without a refusal check, a hit counts when the piece is in the source language or
    short: a long piece in the target language is more likely a translated apology."""
    hit = refusal_hit(piece, settings.refusal_chars) and not apologetic
    in_source = found is not None and same_language(found.lang, source_lang)
    if hit or in_source:
        verdict.suspects.append((piece, hit and (in_source or len(piece.strip()) < SHORT_REFUSAL)))


def _pieces(text: str, starts: list[int] | None) -> list[str]:
    bounds = sorted({0, *(s for s in starts or [] if 0 < s < len(text))}) + [len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]
