"""Position-constrained question generation (PosIR C.1, FineWeb-PosQ B.2, or offline cloze)."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from builder.stages.base import Estimate, Flow, Stage, register_stage
from builder.stages.contracts import CHUNK_TAGS, DOCUMENTS, QUERIES, REFERENCE_TEXTS, REQUESTED_POSITIONS, SUMMARIES
from builder.stages.generate.checks import BackgroundDetector, repeated_questions, wrong_language
from builder.stages.generate.chunked import generate_chunked
from builder.stages.generate.extractive import generate_extractive
from builder.stages.generate.params import GenerateParams
from builder.stages.generate.records import GenerationOutcome
from builder.stages.generate.whole_document import generate_whole_document
from builder.textutil.languages import detect_base, detectable, normalise
from builder.util.lazy import lazy_import
from builder.util.stable import unique

if TYPE_CHECKING:
    import polars as pl

    from builder.bench import Bench
    from builder.stages.context import StageContext
else:
    pl = lazy_import("polars")

_MODES = {
    "whole_document": generate_whole_document,
    "chunked": generate_chunked,
    "extractive": generate_extractive,
}


@register_stage
class GenerateQueries(Stage):
    """Generate questions aimed at a region of each document, with their answers."""

    name = "generate_queries"
    needs = frozenset({DOCUMENTS})
    provides = frozenset({QUERIES, REQUESTED_POSITIONS, CHUNK_TAGS, REFERENCE_TEXTS})
    Params = GenerateParams
    params: GenerateParams

    def prompts_used(self) -> dict[str, set[str]]:
        p = self.params
        if p.prompt is None:
            return {}
        if p.mode == "chunked":
            return {p.prompt: {"summary", "chunk", "max_questions", "wording"}}
        return {
            p.prompt: {
                "document",
                "n_questions",
                "region_instruction",
                "question_types",
                "styles",
                "call_number",
                "calls",
                "wording",
            }
        }

    def needed(self) -> frozenset[str]:
        return self.needs | ({SUMMARIES} if self.params.mode == "chunked" else set())

    def provided(self) -> frozenset[str]:
        extra = {"chunked": {CHUNK_TAGS}, "extractive": {REFERENCE_TEXTS}}.get(self.params.mode, set())
        return frozenset({QUERIES, REQUESTED_POSITIONS, *extra})

    def run(self, bench: Bench, ctx: StageContext) -> Bench:
        return self.run_calls(bench, ctx)

    def run_calls(self, bench: Bench, ctx: StageContext, only: Collection[str] | None = None) -> Bench:
        """Generate; with `only`, make just those calls (ids as `steering.candidate_calls` lists)."""
        p = self.params
        # Only a stage that will judge some question's language starts langdetect.
        langs = [normalise(c) for c in bench.corpus["lang"].unique().to_list()]
        detector = None
        if p.check_language and any(c is not None and detectable(c) for c in langs):
            if p.llm is not None:
                ctx.llm(p.llm)  # build the client before langdetect's thread competes for the interpreter
            detector = BackgroundDetector()
        try:
            on_questions = detector.submit if detector else _ignore
            outcome = (
                _MODES[p.mode](bench.corpus, ctx, p, on_questions)
                if only is None
                else _MODES[p.mode](bench.corpus, ctx, p, on_questions, only)
            )
            ctx.stats.update(outcome.notes)
            return _apply(bench, outcome, ctx, p, detector)
        finally:
            if detector is not None:
                detector.close()

    def plan(self, flow: Flow) -> tuple[Flow, Estimate]:
        p = self.params
        if p.mode == "extractive":
            n = flow.docs * p.calls_per_doc * p.questions_per_call
            return Flow(flow.docs, flow.queries + n, flow.doc_tokens), Estimate()
        if p.mode == "chunked":
            calls = int(flow.docs * max(1.0, flow.doc_tokens / p.chunk_size))
            prompt_tokens = calls * (p.chunk_size * 1.4 + 350)
        else:
            calls = flow.docs * p.calls_per_doc
            prompt_tokens = calls * (flow.doc_tokens + 450)
        n = calls * p.questions_per_call
        est = Estimate(calls=calls, prompt_tokens=int(prompt_tokens), completion_tokens=n * 60)
        return Flow(flow.docs, flow.queries + n, flow.doc_tokens), est


def _ignore(texts: list[str]) -> None:
    """No language check: nobody needs the questions early."""


def _apply(
    bench: Bench, outcome: GenerationOutcome, ctx: StageContext, p: GenerateParams, detector: BackgroundDetector | None
) -> Bench:
    langs = dict(bench.corpus.select("doc_id", "lang").iter_rows())
    # The same question asked twice by one request keeps a distinct id (and is then dropped
    # as a repeat); ids already in the bench are never reused.
    ids = unique((d.query_id for d in outcome.drafts), bench.queries["query_id"].to_list())
    rows = [
        {
            "query_id": qid,
            "text": d.text,
            "doc_id": d.doc_id,
            "lang": langs[d.doc_id],
            "answer": d.answer,
            "qtype": d.qtype,
            "requested_position": d.requested_position,
            "reference_texts": list(d.reference_texts) or None,
            "chunk_start": d.chunk_start,
            "chunk_end": d.chunk_end,
            "chunk_tag": d.chunk_tag,
        }
        for qid, d in zip(ids, outcome.drafts)
    ]
    # A failed call becomes a placeholder query that is dropped at once, so the loss shows.
    rows += [
        {"query_id": call_id, "text": None, "doc_id": doc_id, "lang": langs[doc_id]}
        for call_id, (doc_id, _) in outcome.failed.items()
    ]
    new = pl.DataFrame(rows, schema=_QUERY_SCHEMA)
    queries = pl.concat([bench.queries, new], how="diagonal_relaxed")
    qrels = pl.concat([bench.qrels, new.select("query_id", "doc_id", pl.lit(1, dtype=pl.Int64).alias("score"))])
    bench = bench.replace(queries=queries, qrels=qrels)
    reasons = {c: reason for c, (_, reason) in outcome.failed.items()}
    reasons.update(repeated_questions(bench.queries, new["query_id"].to_list()))
    if p.check_language:
        wrong, counts = wrong_language(
            new.filter(~pl.col("query_id").is_in(list(reasons))), detector.detect if detector else detect_base
        )
        reasons.update(wrong)
        ctx.stats["query_language"] = counts
    bench = bench.drop_queries(reasons, ctx.label)
    return bench.drop_docs(dict.fromkeys(outcome.unusable_docs, "doc_unusable"), ctx.label)


# Python types, which polars reads as String / Int64 / List(String): defining the schema
# loads nothing.
_QUERY_SCHEMA = {
    "query_id": str,
    "text": str,
    "doc_id": str,
    "lang": str,
    "answer": str,
    "qtype": str,
    "requested_position": str,
    "reference_texts": list[str],
    "chunk_start": int,
    "chunk_end": int,
    "chunk_tag": str,
}
