"""Cleanup of machine translations (PosIR B.5.1-B.5.2): strip chatty lead-ins, remove
refusals, answers in the wrong language and translations of absurd length.

Only translated rows (`source_doc_id != doc_id`) are looked at. Stripping a lead-in moves
the spans of the document's queries and refreshes their position fields; every removal
cascades (translated document -> its translated queries and qrels) and is counted per
language under `clean_translations` in the stage stats.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import polars as pl
from pydantic import Field, model_validator

from builder.executors import map_blocks
from builder.stages.base import Estimate, Flow, Stage, StageParams, register_stage
from builder.stages.contracts import TRANSLATIONS
from builder.stages.position_columns import PositionOptions
from builder.stages.refs import ModelRef, PromptRef
from builder.stages.translate.prefix_rows import apply_prefix_cuts
from builder.stages.translate.refusals import confirm_refusals
from builder.stages.translate.row_checks import (
    CheckSettings,
    JudgeRow,
    StripRow,
    Verdict,
    judge_doc_block,
    judge_query_block,
    strip_block,
)

if TYPE_CHECKING:
    from builder.bench import Bench
    from builder.executors import Executor
    from builder.stages.context import StageContext

R = TypeVar("R")


class CleanTranslationsParams(StageParams):
    strip_prefixes: bool = Field(default=True, description="remove 'Here is the translation:' lead-ins")
    prefix_window: int = Field(default=500, ge=1, description="keyword at most this far before the line break")
    prefix_max_chars: int = Field(default=2000, ge=1, description="line breaks looked at, from the start")
    refusal_llm: ModelRef | None = Field(default=None, description="model that confirms suspected refusals")
    refusal_prompt: PromptRef = Field(
        default="refusal_check", description=("prompt that asks refusal_llm whether a suspected refusal is one")
    )
    refusal_chars: int = Field(default=1500, ge=50, description="characters shown to the refusal check")
    check_language: bool = Field(default=True, description="drop documents langdetect places elsewhere")
    min_confidence: float = Field(default=0.8, ge=0.0, le=1.0, description="langdetect probability needed")
    min_detect_chars: int = Field(default=20, ge=1, description="shorter texts get no language verdict")
    detect_chars: int = Field(default=2000, ge=100, description="characters langdetect reads per text")
    min_length_ratio: float = Field(default=0.2, gt=0.0, description="translated / source characters")
    max_length_ratio: float = Field(
        default=4.0, gt=0.0, description=("translated / source characters above this drop the translation")
    )
    positions: PositionOptions = Field(
        default=PositionOptions(), description=("how position fields are recomputed on the cleaned translations")
    )

    @model_validator(mode="after")
    def _ratio(self) -> CleanTranslationsParams:
        if self.min_length_ratio >= self.max_length_ratio:
            raise ValueError("min_length_ratio must be below max_length_ratio")
        return self


@register_stage
class CleanTranslations(Stage):
    """Strip translator lead-ins; drop refusals, wrong-language and odd-length translations."""

    name = "clean_translations"
    needs = frozenset({TRANSLATIONS})
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
        executor = ctx.executor
        if p.strip_prefixes:
            bench = self._strip(bench, ctx, executor, stats)
        doc_reasons = self._judge(bench.corpus, "doc_id", ctx, executor, stats)
        query_reasons = self._judge(bench.queries, "query_id", ctx, executor, stats)
        bench = bench.drop_docs(doc_reasons, ctx.label).drop_queries(query_reasons, ctx.label)
        mine = bench.drops.filter(pl.col("stage") == ctx.label)
        for kind, item_id, reason in mine.select("kind", "id", "reason").iter_rows():
            counts = _lang_stats(stats, item_id.rsplit("@", 1)[-1]).setdefault(
                "docs_removed" if kind == "doc" else "queries_removed", {}
            )
            counts[reason] = counts.get(reason, 0) + 1
        ctx.stats["clean_translations"] = stats
        return bench

    def _strip(self, bench: Bench, ctx: StageContext, executor: Executor, stats: dict[str, dict[str, Any]]) -> Bench:
        p = self.params
        sources = _sources(bench.corpus, "doc_id")
        docs = list(_translated(bench.corpus, "doc_id", "source_doc_id", "piece_starts"))
        rows: list[StripRow] = [
            (text, starts or [0], *sources.get(src, (None, None)), p.prefix_window, p.prefix_max_chars)
            for _, src, _, text, starts in docs
        ]
        cuts = _over_rows(ctx, executor, "stripping lead-ins", strip_block, rows)
        doc_cuts = {}
        for (doc_id, _, lang, _, _), cut in zip(docs, cuts):
            if cut:
                doc_cuts[doc_id] = cut
                _count(stats, lang, "prefixes_stripped")
        query_sources = _sources(bench.queries, "query_id")
        queries = list(_translated(bench.queries, "query_id", "source_query_id", None))
        rows = [
            (text, [0], *query_sources.get(src, (None, None)), len(text), len(text)) for _, src, _, text, _ in queries
        ]
        cuts = _over_rows(ctx, executor, "stripping query lead-ins", strip_block, rows)
        query_cuts = {}
        for (qid, _, lang, _, _), cut in zip(queries, cuts):
            if cut:
                query_cuts[qid] = cut[0]
                _count(stats, lang, "query_prefixes_stripped")
        return apply_prefix_cuts(bench, doc_cuts, query_cuts, ctx.tokenizer, p.positions, ctx.label)

    def _judge(
        self, table: pl.DataFrame, key: str, ctx: StageContext, executor: Executor, stats: dict[str, dict[str, Any]]
    ) -> dict[str, str]:
        """Verdicts for the translated rows of the corpus (`doc_id`) or of the queries."""
        docs = key == "doc_id"
        sources = _sources(table, key)
        found = list(
            _translated(table, key, "source_doc_id" if docs else "source_query_id", "piece_starts" if docs else None)
        )
        rows: list[JudgeRow] = [
            (lang, text, starts, *sources.get(src, (None, None))) for _, src, lang, text, starts in found
        ]
        judge = judge_doc_block if docs else judge_query_block
        settings = self._settings()
        verdicts = _over_rows(
            ctx,
            executor,
            "checking translated " + ("documents" if docs else "queries"),
            functools.partial(judge, settings),
            rows,
        )
        return self._decide({row[0]: v for row, v in zip(found, verdicts)}, ctx, stats)

    def _settings(self) -> CheckSettings:
        p = self.params
        return CheckSettings(
            p.check_language,
            p.min_confidence,
            p.min_detect_chars,
            p.detect_chars,
            p.refusal_chars,
            p.min_length_ratio,
            p.max_length_ratio,
        )

    def _decide(
        self, verdicts: dict[str, Verdict], ctx: StageContext, stats: dict[str, dict[str, Any]]
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
        refused: list[str] = []
        for i, v in verdicts.items():
            texts = [text for k, (text, guess) in enumerate(v.suspects) if confirmed.get(f"{i}#{k}", guess)]
            refused += texts
            reason = "refusal" if texts else v.other
            if reason:
                reasons[i] = reason
        if refused and ctx.flag_answers is not None:
            ctx.flag_answers(refused, "translate", "refusal")
        return reasons

    def plan(self, flow: Flow) -> tuple[Flow, Estimate]:
        if not self.params.refusal_llm:
            return flow, Estimate()
        calls = max(1, flow.docs // 100)  # suspects are rare
        return flow, Estimate(
            calls=calls,
            prompt_tokens=calls * 600,
            completion_tokens=calls * 10,
            notes=["refusal checks: about 1% of translated documents assumed suspect"],
        )


def _sources(table: pl.DataFrame, key: str) -> dict[str, tuple[str | None, str | None]]:
    return {i: (t, lang) for i, t, lang in table.select(key, "text", "lang").iter_rows()}


def _translated(table: pl.DataFrame, key: str, source_key: str, extra: str | None) -> Any:
    """(id, source id, lang, text, extra column) of each translated row that has a text."""
    if source_key not in table.columns:
        return []
    rows = table.filter((pl.col(source_key) != pl.col(key)) & pl.col("text").is_not_null())
    cols = [key, source_key, "lang", "text", extra if extra and extra in table.columns else pl.lit(None)]
    return rows.select(cols).iter_rows()


def _over_rows(
    ctx: StageContext, executor: Executor, what: str, fn: Callable[[list[Any]], list[R]], rows: list[Any]
) -> list[R]:
    """`fn` over blocks of `rows` on the executor, with a progress bar."""
    with ctx.progress.task(what, len(rows)) as bar:
        return map_blocks(executor, fn, rows, executor.block_size, bar.advance)


def _lang_stats(stats: dict[str, dict[str, Any]], lang: str) -> dict[str, Any]:
    return stats.setdefault(lang, {})


def _count(stats: dict[str, dict[str, Any]], lang: str, what: str) -> None:
    mine = _lang_stats(stats, lang)
    mine[what] = mine.get(what, 0) + 1
