"""Helpers shared by the QC stages: cutting spans out of a document, and grading
(question, text) pairs with an LLM judge.

Grading a document without a query's span has two layouts. `cut` (the default) sends the
document with the span cut out, as PosIR did; its text differs from the span on.
`set_aside` sends the whole document and, after the fixed instructions, the span's text to
disregard: every request about a document then opens with the same text, which a prefix
cache serves. It is opt-in: it rests on the judge following the instruction, and a judge
that grades the text it reads keeps the span's credit and drops the query as
`llm_not_higher` (benchmarks/without_span_agreement.py measures how often a model's
verdicts differ between the layouts). A grading prompt that does not read `set_aside` gets `cut`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import polars as pl
from pydantic import Field

from builder.backends.rerankers import Grade, SetAside, grade_pair_sets, request_count
from builder.backends.rerankers.llm_judge import GradedPair

if TYPE_CHECKING:
    from builder.bench import Bench
    from builder.stages.context import StageContext


def remove_spans(text: str, spans: Sequence[dict] | None, joiner: str = " ") -> str:
    """The text with every span's characters cut out; the pieces left are joined by `joiner`."""
    pieces, at = [], 0
    for span in sorted(spans or [], key=lambda s: s["start"]):
        start, end = max(at, span["start"]), max(at, span["end"])
        pieces.append(text[at:start])
        at = end
    pieces.append(text[at:])
    return joiner.join(p.strip() for p in pieces if p.strip())


WithoutSpan = Literal["set_aside", "cut"]
# A query's row: (query_id, query, document, document with its spans cut out, the spans' texts).
ContrastRow = tuple[str, str, str, str, tuple[str, ...]]


def without_span_field() -> Any:
    return Field(
        default="cut",
        description=(
            "grading without the span: cut sends the document with the span cut out, as PosIR did; set_aside "
            "sends the whole document and names the span to disregard, so a prefix cache serves the document, "
            "but a judge that ignores the instruction drops the query as llm_not_higher"
        ),
    )


def contrast_rows(bench: Bench) -> tuple[list[ContrastRow], dict[str, str]]:
    """A `ContrastRow` per query that has spans, and `no_spans` for those that have none."""
    texts = dict(bench.corpus.select("doc_id", "text").iter_rows())
    spans_col = "spans" if "spans" in bench.queries.columns else None
    rows, missing = [], {}
    for qid, query, doc_id, spans in bench.queries.select(
        "query_id", "text", "doc_id", pl.col(spans_col) if spans_col else pl.lit(None)
    ).iter_rows():
        if not spans:
            missing[qid] = "no_spans"
            continue
        text = texts[doc_id]
        passages = tuple(text[s["start"] : s["end"]] for s in sorted(spans, key=lambda s: s["start"]))
        rows.append((qid, query, text, remove_spans(text, spans), passages))
    return rows, missing


def grade(
    ctx: StageContext,
    llm: str,
    prompt: str,
    pairs: Sequence[GradedPair],
    questions_per_call: int,
    what: str = "grading",
) -> list[Grade]:
    """Grade (question, text) pairs with the recipe model `llm`, with a progress bar."""
    return grade_sets(ctx, llm, prompt, [pairs], questions_per_call, what)[0]


def grade_sets(
    ctx: StageContext,
    llm: str,
    prompt: str,
    sets: Sequence[Sequence[GradedPair]],
    questions_per_call: int,
    what: str = "grading",
) -> list[list[Grade]]:
    """Grade several sets of pairs at once: all their requests go to one pool."""
    total = sum(request_count(pairs, questions_per_call) for pairs in sets)
    if not total:
        return [[] for _ in sets]
    with ctx.progress.task(what, total) as bar:
        return grade_pair_sets(
            ctx.llm(llm),
            lambda **v: ctx.render(prompt, **v),
            sets,
            questions_per_call=questions_per_call,
            raw_log=ctx.work_dir / "unparseable.jsonl",
            on_done=bar.advance,
        )


def grade_histogram(grades: Sequence[Grade]) -> dict[str, int]:
    # A failed request's cause (`llm_failed: HTTP 500`) is in the drop log; here its reason counts.
    return dict(
        sorted(Counter(str(g.value) if g.error is None else g.error.partition(": ")[0] for g in grades).items())
    )


def contrast_verdicts(
    ctx: StageContext,
    rows: Sequence[ContrastRow],
    llm: str,
    prompt: str,
    min_grade: int,
    contrast: bool,
    questions_per_call: int,
    without_span: WithoutSpan = "cut",
    grades: dict[str, int] | None = None,
) -> dict[str, str | None]:
    """Per query: None (passes) or why not: a grading error, `llm_grade_below:<n>`, or
    (with `contrast`) `llm_not_higher` when the text without spans grades as high.
    `grades`, where given, receives each query's grade with its spans."""
    sets: list[list[GradedPair]] = [[(q, doc) for _, q, doc, _, _ in rows]]
    if contrast:
        layout = without_span if "set_aside" in ctx.prompts.get(prompt).variables else "cut"
        ctx.stats["contrast_layout"] = layout
        sets.append(
            [(q, SetAside(doc, passages) if layout == "set_aside" else cut) for _, q, doc, cut, passages in rows]
        )
    with_span, *rest = grade_sets(
        ctx,
        llm,
        prompt,
        sets,
        questions_per_call,
        "grading with and without spans" if contrast else "grading with spans",
    )
    without = rest[0] if contrast else [Grade(None, None)] * len(rows)
    ctx.stats["llm_grades_with_span"] = grade_histogram(with_span)
    if contrast:
        ctx.stats["llm_grades_without_span"] = grade_histogram(without)
    verdicts: dict[str, str | None] = {}
    for (qid, *_), w, wo in zip(rows, with_span, without):
        if grades is not None and w.error is None:
            grades[qid] = w.value  # type: ignore[assignment]
        verdicts[qid] = contrast_verdict(w, wo if contrast else None, min_grade)
    return verdicts


def contrast_verdict(with_span: Grade, without_span: Grade | None, min_grade: int) -> str | None:
    """None (passes) or why not: a grading error, `llm_grade_below:<n>`, or, where the text
    without the span was graded, `llm_not_higher` when it grades as high."""
    if with_span.error or (without_span is not None and without_span.error):
        return with_span.error or without_span.error  # type: ignore[union-attr]
    if with_span.value < min_grade:  # type: ignore[operator]
        return f"llm_grade_below:{min_grade}"
    if without_span is not None and with_span.value <= without_span.value:  # type: ignore[operator]
        return "llm_not_higher"
    return None
