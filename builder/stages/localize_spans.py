"""Reference-span localization (PosIR C.2): verbatim extraction, then character offsets.

With an `llm`, the model copies the supporting passages for several questions of one
document per call. Without one, the queries' own `reference_texts` are located (the
extractive generator provides them). Either way each passage is matched exactly (any
whitespace run matching any other), then normalized, then fuzzily — or only by the
`methods` listed (PosIR's rule is `[exact]`); the query then gets its spans and every
position field.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator

from builder.backends.llm import ChatRequest
from builder.backends.llm.json_batches import IdList, ask_numbered, number_batches, per_item
from builder.executors import map_blocks
from builder.stages.base import Estimate, Flow, Stage, StageParams, grouped_calls, register_stage
from builder.stages.contracts import POSITIONS, QUERIES, REFERENCE_TEXTS, SPANS
from builder.stages.position_columns import PositionOptions, annotate_positions
from builder.stages.refs import ModelRef, PromptRef
from builder.textutil import ALL_METHODS, MatchMethod
from builder.textutil.positions import REGION_OF_NAME
from builder.util.lazy import lazy_import

if TYPE_CHECKING:
    import polars as pl

    from builder.bench import Bench
    from builder.executors import Executor
    from builder.stages.context import StageContext
    from builder.textutil.span_blocks import Match
else:
    pl = lazy_import("polars")


class LocalizeParams(StageParams):
    llm: ModelRef | None = Field(default=None, description="model that extracts passages; none = use reference_texts")
    prompt: PromptRef = Field(default="locate_reference", description="prompt asking llm to copy each answer's passage")
    questions_per_call: int = Field(default=8, ge=1, description="questions about one document sent per request")
    methods: list[Literal["exact", "normalized", "fuzzy"]] = Field(
        default=list(ALL_METHODS), description="matching steps tried, always in the order exact, normalized, fuzzy"
    )
    fuzzy_min_score: float = Field(
        default=90.0,
        ge=50.0,
        le=100.0,
        description=("fuzzy: lowest rapidfuzz alignment score (0-100) accepted as a span"),
    )
    drop_off_target: bool = Field(default=False, description="drop queries whose span is outside the requested third")
    positions: PositionOptions = Field(
        default=PositionOptions(), description=("how the position fields are computed from the spans found")
    )

    @field_validator("methods")
    @classmethod
    def _methods(cls, value: list[str]) -> list[str]:
        if not value or len(set(value)) != len(value):
            raise ValueError("methods needs at least one of exact, normalized, fuzzy, each once")
        return value


def _references(entry: Any) -> list[str]:
    if not isinstance(entry, dict) or "reference_texts" not in entry:
        raise ValueError('each entry needs "id" and "reference_texts"')
    refs = entry["reference_texts"]
    if not isinstance(refs, list) or not all(isinstance(r, str) for r in refs):
        raise ValueError('"reference_texts" must be a list of strings')
    return [r for r in refs if r.strip()]


# Bounds for a server that enforces the schema: a model that repeats itself stops there
# instead of at max_tokens. A longer passage than this is no span a position benchmark uses.
MAX_PASSAGES = 8
MAX_PASSAGE_CHARS = 4000
REFERENCES = IdList(
    read=_references,
    wrappers=("answers", "questions"),
    fields={
        "reference_texts": {
            "type": "array",
            "maxItems": MAX_PASSAGES,
            "items": {"type": "string", "maxLength": MAX_PASSAGE_CHARS},
        }
    },
)


@register_stage
class LocalizeSpans(Stage):
    """Find each question's supporting passages and their exact character offsets."""

    name = "localize_spans"
    needs = frozenset({QUERIES})
    provides = frozenset({SPANS, POSITIONS, REFERENCE_TEXTS})
    Params = LocalizeParams
    params: LocalizeParams

    prompt_variables = frozenset({"document", "questions"})

    def needed(self) -> frozenset[str]:
        return self.needs if self.params.llm else self.needs | {REFERENCE_TEXTS}

    def run(self, bench: Bench, ctx: StageContext) -> Bench:
        from builder.bench import SPAN_DTYPE

        refs = self._extract(bench, ctx) if self.params.llm else self._given(bench)
        spans, reasons = self._match(bench, refs, ctx)
        ref_col = [r if isinstance(r, list) else None for r in (refs.get(q) for q in bench.queries["query_id"])]
        queries = bench.queries.with_columns(
            pl.Series("spans", spans, dtype=SPAN_DTYPE),
            pl.Series("reference_texts", ref_col, dtype=pl.List(pl.Utf8)),
        )
        bench = bench.replace(queries=queries).keep_queries(pl.Series(reasons, dtype=pl.Utf8), ctx.label)
        bench = bench.replace(
            queries=annotate_positions(bench.queries, bench.corpus, ctx.tokenizer, self.params.positions)
        )
        return self._off_target(bench, ctx)

    def _match(
        self, bench: Bench, refs: dict[str, list[str] | str], ctx: StageContext
    ) -> tuple[list[list[dict] | None], list[str | None]]:
        """Spans or a drop reason per query; the matching runs on the executor, a block of
        documents (each with all its queries' references) at a time."""
        rows = bench.queries.select("query_id", "doc_id").rows()
        wanted = [(doc_id, refs.get(qid) or []) for qid, doc_id in rows if not isinstance(refs.get(qid), str)]
        texts = dict(bench.corpus.select("doc_id", "text").iter_rows())
        executor = ctx.executor
        with ctx.progress.task("matching spans", documents_in(wanted)) as bar:
            found = iter(
                match_queries(
                    executor,
                    executor.block_size,
                    texts,
                    wanted,
                    self.params.fuzzy_min_score,
                    self.params.methods,
                    bar.advance,
                )
            )
        spans: list[list[dict] | None] = []
        reasons: list[str | None] = []
        for qid, _ in rows:
            match = refs.get(qid)
            if not isinstance(match, str):
                match = next(found)
            spans.append(None if isinstance(match, str) else match)
            reasons.append(match if isinstance(match, str) else None)
        return spans, reasons

    def _given(self, bench: Bench) -> dict[str, list[str] | str]:
        if "reference_texts" not in bench.queries.columns:
            return dict.fromkeys(bench.queries["query_id"].to_list(), "no_reference_texts")
        return {
            q: (r if r is not None else "no_reference_texts")
            for q, r in bench.queries.select("query_id", "reference_texts").iter_rows()
        }

    def _extract(self, bench: Bench, ctx: StageContext) -> dict[str, list[str] | str]:
        p = self.params
        texts = dict(bench.corpus.select("doc_id", "text").iter_rows())

        def request_for(doc_id: str, at: int, _: list[str], questions: list[dict[str, Any]]) -> ChatRequest:
            messages = ctx.render(p.prompt, document=texts[doc_id], questions=questions)
            return ChatRequest.of(messages, item_id=f"{doc_id}@{at}")

        batches = number_batches(
            bench.queries.select("doc_id", "query_id", "text").iter_rows(), p.questions_per_call, request_for
        )
        if not batches:
            return {}
        with ctx.progress.task("locating references", len(batches)) as bar:
            answers = ask_numbered(
                ctx.llm(p.llm),
                batches,
                REFERENCES.validator,
                REFERENCES.schema,
                raw_log=ctx.work_dir / "unparseable.jsonl",
                on_done=bar.advance,
            )
        return {qid: refs if error is None else error for qid, refs, error in per_item(batches, answers)}

    def _off_target(self, bench: Bench, ctx: StageContext) -> Bench:
        q = bench.queries
        if "requested_position" not in q.columns:
            return bench
        region = pl.col("requested_position").replace_strict(REGION_OF_NAME, default=None)
        q = q.with_columns((region == pl.col("position_tag")).alias("on_target"))
        ctx.stats["on_target"] = int(q["on_target"].sum() or 0)
        bench = bench.replace(queries=q)
        if not self.params.drop_off_target:
            return bench
        reasons = q.select(pl.when(pl.col("on_target").not_()).then(pl.lit("off_target_region"))).to_series()
        return bench.keep_queries(reasons, ctx.label)

    def plan(self, flow: Flow) -> tuple[Flow, Estimate]:
        if not self.params.llm:
            return flow, Estimate()
        calls = grouped_calls(flow.queries, flow.docs, self.params.questions_per_call)
        est = Estimate(
            calls=calls, prompt_tokens=int(calls * (flow.doc_tokens + 350)), completion_tokens=flow.queries * 80
        )
        return flow, est


def match_queries(
    executor: Executor,
    block_size: int,
    texts: dict[str, str],
    wanted: Sequence[tuple[str, list[str]]],
    fuzzy_min_score: float,
    methods: Sequence[MatchMethod],
    on_block: Callable[[int], None] | None = None,
) -> list[Match]:
    """One match per `(doc_id, references)` of `wanted`, in its order. Queries are grouped
    by document (in order of first appearance); a block holds about `block_size` queries
    (whole documents) and runs on `executor`; `on_block` hears how many documents each
    finished block held."""
    from builder.textutil.span_blocks import match_block  # numpy, rapidfuzz: when spans are matched

    groups: dict[str, list[int]] = {}
    for at, (doc_id, _) in enumerate(wanted):
        groups.setdefault(doc_id, []).append(at)
    items = [(texts[doc_id], [wanted[at][1] for at in ats]) for doc_id, ats in groups.items()]
    fn = functools.partial(match_block, fuzzy_min_score, list(methods))
    docs_per_block = max(1, block_size * len(items) // max(1, len(wanted)))
    results = map_blocks(executor, fn, items, docs_per_block, on_block)
    out: list[Match] = [""] * len(wanted)
    for ats, matches in zip(groups.values(), results):
        for at, match in zip(ats, matches):
            out[at] = match
    return out


def documents_in(wanted: Sequence[tuple[str, list[str]]]) -> int:
    """How many documents `wanted` names: the items `match_queries` ships in blocks."""
    return len({doc_id for doc_id, _ in wanted})
