"""Cleanup of machine translations (PosIR B.5.1-B.5.2): strip chatty lead-ins, remove
refusals, answers in the wrong language and translations of absurd length.

Only translated rows (`source_doc_id != doc_id`) are looked at. Stripping a lead-in moves
the spans of the document's queries and refreshes their position fields; every removal
cascades (translated document -> its translated queries and qrels) and is counted per
language under `clean_translations` in the stage stats.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl
from pydantic import Field, model_validator

from builder.position_columns import PositionOptions
from builder.stages.base import Estimate, Flow, Stage, StageParams, register_stage
from builder.stages.refs import ModelRef, PromptRef
from builder.stages.translate.cleanup import refusal_hit, strip_prefixes
from builder.stages.translate.languages import Detection, detect, detectable, same_language
from builder.stages.translate.prefix_rows import apply_prefix_cuts
from builder.stages.translate.refusals import confirm_refusals

if TYPE_CHECKING:
    from builder.bench import Bench
    from builder.stages.context import StageContext

SHORT_REFUSAL = 300  # characters: a refusal is a sentence or two, not a page


@dataclass
class _Verdict:
    lang: str
    suspects: list[tuple[str, bool]] = field(default_factory=list)  # (text, refusal by heuristic)
    other: str | None = None  # wrong_language or length_ratio


class CleanTranslationsParams(StageParams):
    strip_prefixes: bool = Field(default=True, description="remove 'Here is the translation:' lead-ins")
    prefix_window: int = Field(default=500, ge=1, description="keyword at most this far before the line break")
    prefix_max_chars: int = Field(default=2000, ge=1, description="line breaks looked at, from the start")
    refusal_llm: ModelRef | None = Field(default=None, description="model that confirms suspected refusals")
    refusal_prompt: PromptRef = "refusal_check"
    refusal_chars: int = Field(default=1500, ge=50, description="characters shown to the refusal check")
    check_language: bool = Field(default=True, description="drop documents langdetect places elsewhere")
    min_confidence: float = Field(default=0.8, ge=0.0, le=1.0, description="langdetect probability needed")
    min_detect_chars: int = Field(default=20, ge=1, description="shorter texts get no language verdict")
    detect_chars: int = Field(default=2000, ge=100, description="characters langdetect reads per text")
    min_length_ratio: float = Field(default=0.2, gt=0.0, description="translated / source characters")
    max_length_ratio: float = Field(default=4.0, gt=0.0)
    positions: PositionOptions = PositionOptions()

    @model_validator(mode="after")
    def _ratio(self) -> CleanTranslationsParams:
        if self.min_length_ratio >= self.max_length_ratio:
            raise ValueError("min_length_ratio must be below max_length_ratio")
        return self


@register_stage
class CleanTranslations(Stage):
    """Strip translator lead-ins; drop refusals, wrong-language and odd-length translations."""

    name = "clean_translations"
    Params = CleanTranslationsParams
    params: CleanTranslationsParams

    prompt_variables = frozenset({"language", "output"})

    def problems(self, recipe: Any) -> list[tuple[str, str]]:
        translate = [s for s in recipe.stage_objects() if s.name == "translate"]
        if translate and translate[0].params.positions != self.params.positions:
            return [("positions", "must equal the translate stage's positions, or refreshed fields disagree")]
        return []

    def run(self, bench: Bench, ctx: StageContext) -> Bench:
        if "source_doc_id" not in bench.corpus.columns:
            ctx.stats["clean_translations"] = "no translated rows"
            return bench
        p = self.params
        stats: dict[str, dict[str, Any]] = {}
        if p.strip_prefixes:
            bench = self._strip(bench, ctx, stats)
        doc_reasons = self._judge_docs(bench, ctx, stats)
        query_reasons = self._judge_queries(bench, ctx, stats)
        bench = bench.drop_docs(doc_reasons, ctx.label).drop_queries(query_reasons, ctx.label)
        mine = bench.drops.filter(pl.col("stage") == ctx.label)
        for kind, item_id, reason in mine.select("kind", "id", "reason").iter_rows():
            counts = _lang_stats(stats, item_id.rsplit("@", 1)[-1]).setdefault(
                "docs_removed" if kind == "doc" else "queries_removed", {})
            counts[reason] = counts.get(reason, 0) + 1
        ctx.stats["clean_translations"] = stats
        return bench

    def _strip(self, bench: Bench, ctx: StageContext, stats: dict[str, dict[str, Any]]) -> Bench:
        p = self.params
        sources = _sources(bench.corpus, "doc_id")
        doc_cuts = {}
        for doc_id, src, lang, text, starts in _translated(bench.corpus, "doc_id", "source_doc_id", "piece_starts"):
            source_text, source_lang = sources.get(src, (None, None))
            new, cuts = strip_prefixes(text, starts or [0], source_text, source_lang, p.prefix_window,
                                       p.prefix_max_chars)
            if cuts:
                doc_cuts[doc_id] = (new, cuts)
                _count(stats, lang, "prefixes_stripped")
        query_sources = _sources(bench.queries, "query_id")
        query_cuts = {}
        for qid, src, lang, text, _ in _translated(bench.queries, "query_id", "source_query_id", None):
            source_text, source_lang = query_sources.get(src, (None, None))
            new, cuts = strip_prefixes(text, [0], source_text, source_lang, len(text), len(text))
            if cuts:
                query_cuts[qid] = new
                _count(stats, lang, "query_prefixes_stripped")
        return apply_prefix_cuts(bench, doc_cuts, query_cuts, ctx.tokenizer, p.positions, ctx.label)

    def _judge_docs(self, bench: Bench, ctx: StageContext, stats: dict[str, dict[str, Any]]) -> dict[str, str]:
        """Each translated piece is judged on its own: a refusal or a wrong language can hit
        any piece of a document translated piece by piece."""
        p = self.params
        sources = _sources(bench.corpus, "doc_id")
        verdicts: dict[str, _Verdict] = {}
        for doc_id, src, lang, text, starts in _translated(bench.corpus, "doc_id", "source_doc_id", "piece_starts"):
            source_text, source_lang = sources.get(src, (None, None))
            apologetic = refusal_hit(source_text or "", len(source_text or ""))
            verdict = verdicts[doc_id] = _Verdict(lang)
            wrong = False
            for piece in _pieces(text, starts):
                found = self._detect(piece)
                self._suspect(verdict, piece, found, source_lang, apologetic)
                wrong = wrong or (found is not None and detectable(lang) and not same_language(found.lang, lang))
            ratio = len(text) / len(source_text) if source_text else None
            odd = ratio is not None and not p.min_length_ratio <= ratio <= p.max_length_ratio
            verdict.other = "wrong_language" if wrong else ("length_ratio" if odd else None)
        return self._decide(verdicts, ctx, stats)

    def _judge_queries(self, bench: Bench, ctx: StageContext, stats: dict[str, dict[str, Any]]) -> dict[str, str]:
        """Queries are short, so langdetect is trusted only to spot one left in the source language."""
        sources = _sources(bench.queries, "query_id")
        verdicts: dict[str, _Verdict] = {}
        for qid, src, lang, text, _ in _translated(bench.queries, "query_id", "source_query_id", None):
            source_text, source_lang = sources.get(src, (None, None))
            found = self._detect(text)
            verdict = verdicts[qid] = _Verdict(lang)
            self._suspect(verdict, text, found, source_lang, refusal_hit(source_text or "", len(source_text or "")))
            if found is not None and same_language(found.lang, source_lang):
                verdict.other = "wrong_language"
        return self._decide(verdicts, ctx, stats)

    def _detect(self, text: str) -> Detection | None:
        """A confident language verdict, or None."""
        p = self.params
        if not p.check_language or len(text.strip()) < p.min_detect_chars:
            return None
        found = detect(text, p.detect_chars)
        return found if found is not None and found.prob >= p.min_confidence else None

    def _suspect(self, verdict: _Verdict, piece: str, found: Detection | None, source_lang: str | None,
                 apologetic: bool) -> None:
        """A piece is suspect when the pattern list hits or it reads as the source language.
        Without a refusal check, a hit counts when the piece is in the source language or
        short: a long piece in the target language is more likely a translated apology."""
        hit = refusal_hit(piece, self.params.refusal_chars) and not apologetic
        in_source = found is not None and same_language(found.lang, source_lang)
        if hit or in_source:
            verdict.suspects.append((piece, hit and (in_source or len(piece.strip()) < SHORT_REFUSAL)))

    def _decide(self, verdicts: dict[str, _Verdict], ctx: StageContext, stats: dict[str, dict[str, Any]]
                ) -> dict[str, str]:
        """Refusal when the refusal check (or, without one, the heuristic) says so for any
        suspect piece; otherwise the other reason, if any."""
        p = self.params
        shown = {f"{i}#{k}": (text, v.lang) for i, v in verdicts.items() for k, (text, _) in enumerate(v.suspects)}
        for v in verdicts.values():
            if v.suspects:
                _count(stats, v.lang, "refusal_suspects")
        confirmed: dict[str, bool] = {}
        if p.refusal_llm and shown:
            confirmed = confirm_refusals(shown, p.refusal_llm, p.refusal_prompt, p.refusal_chars, ctx)
        reasons = {}
        for i, v in verdicts.items():
            refusal = any(confirmed.get(f"{i}#{k}", guess) for k, (_, guess) in enumerate(v.suspects))
            reason = "refusal" if refusal else v.other
            if reason:
                reasons[i] = reason
        return reasons

    def plan(self, flow: Flow) -> tuple[Flow, Estimate]:
        if not self.params.refusal_llm:
            return flow, Estimate()
        calls = max(1, flow.docs // 100)  # suspects are rare
        return flow, Estimate(calls=calls, prompt_tokens=calls * 600, completion_tokens=calls * 10,
                              notes=["refusal checks: about 1% of translated documents assumed suspect"])


def _sources(table: pl.DataFrame, key: str) -> dict[str, tuple[str | None, str | None]]:
    return {i: (t, lang) for i, t, lang in table.select(key, "text", "lang").iter_rows()}


def _translated(table: pl.DataFrame, key: str, source_key: str, extra: str | None) -> Any:
    """(id, source id, lang, text, extra column) of each translated row that has a text."""
    if source_key not in table.columns:
        return []
    rows = table.filter((pl.col(source_key) != pl.col(key)) & pl.col("text").is_not_null())
    cols = [key, source_key, "lang", "text", extra if extra and extra in table.columns else pl.lit(None)]
    return rows.select(cols).iter_rows()


def _pieces(text: str, starts: list[int] | None) -> list[str]:
    bounds = sorted({0, *(s for s in starts or [] if 0 < s < len(text))}) + [len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]


def _lang_stats(stats: dict[str, dict[str, Any]], lang: str) -> dict[str, Any]:
    return stats.setdefault(lang, {})


def _count(stats: dict[str, dict[str, Any]], lang: str, what: str) -> None:
    mine = _lang_stats(stats, lang)
    mine[what] = mine.get(what, 0) + 1

