"""PosIR-style generation: the whole document, one positional requirement per call."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

from builder.backends.llm import ChatRequest
from builder.backends.llm.json_answers import chat_json
from builder.stages.generate.deal import deal_regions
from builder.stages.generate.records import GenerationOutcome, QueryDraft, check_question_items, question_list_schema
from builder.textutil.positions import REGIONS, requested_of_region
from builder.util.stable import derive_seed, query_id

if TYPE_CHECKING:
    import polars as pl

    from builder.stages.context import StageContext
    from builder.stages.generate.params import GenerateParams

# The prompt keeps its words (first / final), so cached answers stay valid.
REGION_INSTRUCTIONS = {
    "beginning": "Base every question mainly on the first third of the document.",
    "middle": "Base every question mainly on the middle third of the document.",
    "end": "Base every question mainly on the final third of the document.",
}


def answer_schema(n: int) -> dict[str, Any]:
    """What a server that enforces it may answer, all of which `validate_answer` takes: the
    questions are required even of an unusable document (they are ignored then), since a
    schema that made them depend on `usable` is beyond what most servers enforce."""
    return {
        "type": "object",
        "properties": {"usable": {"type": "boolean"}, "questions": question_list_schema(n)},
        "required": ["usable", "questions"],
        "additionalProperties": False,
    }


def validate_answer(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict) or not isinstance(value.get("usable"), bool):
        raise ValueError('expected an object with a boolean "usable"')
    if not value["usable"]:
        return {"usable": False, "questions": []}
    check_question_items(value.get("questions"))
    return value


def pick_region(ctx: StageContext, key: str, weights: dict[str, float]) -> str:
    regions = [r for r in REGIONS if weights.get(r, 0) > 0]
    return ctx.item_rng(key).choices(regions, [weights[r] for r in regions])[0]


def region_calls(corpus: pl.DataFrame, p: GenerateParams) -> list[tuple[str, str, str]]:
    """Every call a steered build can make: (doc_id, call id, region), one per document and
    region of positive weight. A failed call's id becomes a query id, so it keeps the
    prompt's word for the region."""
    regions = [r for r in REGIONS if p.region_weights.get(r, 0) > 0]
    return [
        (doc_id, f"{doc_id}/{requested_of_region(region)}", region) for doc_id in corpus["doc_id"] for region in regions
    ]


def _drawn_calls(corpus: pl.DataFrame, ctx: StageContext, p: GenerateParams) -> list[tuple[str, str, str, int]]:
    """(doc_id, call id, region, call number): `calls_per_doc` per document, each region
    drawn, or dealt within each language and domain (`region_draw`)."""
    calls = [(doc_id, f"{doc_id}/g{k}", k) for doc_id in corpus["doc_id"] for k in range(p.calls_per_doc)]
    if p.region_draw == "independent":
        return [(doc_id, call_id, pick_region(ctx, call_id, p.region_weights), k) for doc_id, call_id, k in calls]
    group_of = dict(zip(corpus["doc_id"], _groups(corpus)))
    by_group: dict[tuple[str | None, str | None], list[str]] = {}
    for doc_id, call_id, _ in calls:
        by_group.setdefault(group_of[doc_id], []).append(call_id)
    region = {}
    for group, call_ids in by_group.items():
        region.update(deal_regions(call_ids, p.region_weights, derive_seed(ctx.seed, ctx.label, "deal", *group)))
    return [(doc_id, call_id, region[call_id], k) for doc_id, call_id, k in calls]


def _groups(corpus: pl.DataFrame) -> list[tuple[str | None, str | None]]:
    """Each row's (lang, domain); a corpus without the column is one group in it."""

    def column(name: str) -> list[str | None]:
        return corpus[name].to_list() if name in corpus.columns else [None] * corpus.height

    return list(zip(column("lang"), column("domain")))


def generate_whole_document(
    corpus: pl.DataFrame,
    ctx: StageContext,
    p: GenerateParams,
    on_questions: Callable[[list[str]], None],
    only: Collection[str] | None = None,
) -> GenerationOutcome:
    """`on_questions` hears each accepted answer's questions as it arrives, before the
    last answer is in. `only` (call ids of `region_calls`) asks those regions instead of
    drawing one per call."""
    assert p.llm is not None

    def validate(value: Any) -> dict[str, Any]:
        value = validate_answer(value)
        on_questions([item["question"].strip() for item in value["questions"][: p.questions_per_call]])
        return value

    texts = dict(corpus.select("doc_id", "text").iter_rows())
    planned = (
        _drawn_calls(corpus, ctx, p)
        if only is None
        else [(doc_id, call_id, region, 0) for doc_id, call_id, region in region_calls(corpus, p) if call_id in only]
    )
    calls: list[tuple[str, str, str]] = []  # (doc_id, call id, region)
    requests: list[ChatRequest] = []
    for doc_id, call_id, region, k in planned:
        messages = ctx.render(
            p.prompt,
            document=texts[doc_id],
            n_questions=p.questions_per_call,
            region_instruction=REGION_INSTRUCTIONS[region],
            question_types=p.question_types,
            styles=p.styles,
            call_number=k + 1,
            calls=p.calls_per_doc,  # so two calls are never one cached request
            wording=p.wording,
        )
        calls.append((doc_id, call_id, region))
        requests.append(ChatRequest.of(messages, item_id=call_id, json_schema=answer_schema(p.questions_per_call)))
    with ctx.progress.task("generating questions", len(requests)) as bar:
        answers = chat_json(
            ctx.llm(p.llm), requests, validate, raw_log=ctx.work_dir / "unparseable.jsonl", on_done=bar.advance
        )
    outcome = GenerationOutcome()
    for (doc_id, call_id, region), answer in zip(calls, answers):
        if answer.error is not None:
            outcome.failed[call_id] = (doc_id, answer.error)
        elif not answer.value["usable"]:
            outcome.unusable_docs.add(doc_id)
        else:
            for item in answer.value["questions"][: p.questions_per_call]:
                text = item["question"].strip()
                outcome.drafts.append(
                    QueryDraft(
                        query_id=query_id(
                            doc_id, f"generate_queries:whole_document:{requested_of_region(region)}", text
                        ),
                        doc_id=doc_id,
                        text=text,
                        answer=item["answer"].strip(),
                        qtype=str(item.get("type") or ""),
                        requested_position=region,
                    )
                )
    return outcome
