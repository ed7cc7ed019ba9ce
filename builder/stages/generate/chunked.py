"""FineWeb-PosQ-style generation: the global summary plus one chunk at a time.

The model returns a free list of questions per chunk, as in the paper's FAQ brainstorm;
`questions_per_call` caps it, and questions past the cap are counted in the stage stats.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

from builder.backends.llm import ChatRequest
from builder.backends.llm.json_answers import chat_json
from builder.stages.generate.records import GenerationOutcome, QueryDraft, check_question_items, question_list_schema
from builder.textutil.positions import split_with_offsets, tag_chunk
from builder.util.stable import query_id

if TYPE_CHECKING:
    import polars as pl
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    from builder.stages.context import StageContext
    from builder.stages.generate.params import GenerateParams


def answer_schema(n: int) -> dict[str, Any]:
    """An object at the top, as hosted APIs require; `validate_answer` also takes the bare list."""
    return {
        "type": "object",
        "properties": {"questions": question_list_schema(n, ["simple", "complicated"], least=0)},
        "required": ["questions"],
        "additionalProperties": False,
    }


def validate_answer(value: Any) -> list[dict[str, str]]:
    if isinstance(value, dict) and isinstance(value.get("questions"), list):
        value = value["questions"]  # some models wrap the list in an object
    # The prompt asks for as many questions as the excerpt supports, which may be none.
    return [] if value == [] else check_question_items(value)


def make_splitter(p: GenerateParams, count: Callable[[str], int]) -> RecursiveCharacterTextSplitter:
    from langchain_text_splitters import RecursiveCharacterTextSplitter  # slow to import; only this mode needs it

    return RecursiveCharacterTextSplitter(
        chunk_size=p.chunk_size,
        chunk_overlap=p.chunk_overlap,
        length_function=count,
        add_start_index=True,
    )


def _counter(p: GenerateParams, ctx: StageContext) -> Callable[[str], int]:
    if p.chunk_unit == "words":
        return lambda s: len(s.split())
    return lambda s: ctx.tokenizer.count_many([s])[0]


def chunk_calls(
    corpus: pl.DataFrame, ctx: StageContext, p: GenerateParams
) -> list[tuple[str, str, int, int, str, str]]:
    """Every call this mode can make: (doc_id, call id, start, end, third, chunk) per chunk."""
    splitter = make_splitter(p, _counter(p, ctx))
    out = []
    for doc_id, text in corpus.select("doc_id", "text").iter_rows():
        for k, (start, end, chunk) in enumerate(split_with_offsets(splitter, text)):
            out.append((doc_id, f"{doc_id}/c{k}", start, end, tag_chunk(start, end, len(text)), chunk))
    return out


def generate_chunked(
    corpus: pl.DataFrame,
    ctx: StageContext,
    p: GenerateParams,
    on_questions: Callable[[list[str]], None],
    only: Collection[str] | None = None,
) -> GenerationOutcome:
    """`on_questions` hears each accepted answer's questions as it arrives; `only` (call
    ids, see `chunk_calls`) asks about those chunks alone."""
    assert p.llm is not None

    def validate(value: Any) -> list[dict[str, str]]:
        items = validate_answer(value)
        on_questions([item["question"].strip() for item in items[: p.questions_per_call]])
        return items

    summaries = dict(corpus.select("doc_id", "summary").iter_rows())
    calls: list[tuple[str, str, int, int, str]] = []
    requests: list[ChatRequest] = []
    for doc_id, call_id, start, end, tag, chunk in chunk_calls(corpus, ctx, p):
        if only is not None and call_id not in only:
            continue
        messages = ctx.render(
            p.prompt,
            summary=summaries[doc_id] or "",
            chunk=chunk,
            max_questions=p.questions_per_call,
            wording=p.wording,
        )
        calls.append((doc_id, call_id, start, end, tag))
        requests.append(ChatRequest.of(messages, item_id=call_id, json_schema=answer_schema(p.questions_per_call)))
    with ctx.progress.task("generating per chunk", len(requests)) as bar:
        answers = chat_json(
            ctx.llm(p.llm), requests, validate, raw_log=ctx.work_dir / "unparseable.jsonl", on_done=bar.advance
        )
    outcome = GenerationOutcome(notes={"chunks": len(requests), "questions_over_cap": 0, "chunks_without_questions": 0})
    for (doc_id, call_id, start, end, tag), answer in zip(calls, answers):
        if answer.error is not None:
            outcome.failed[call_id] = (doc_id, answer.error)
            continue
        outcome.notes["chunks_without_questions"] += not answer.value
        outcome.notes["questions_over_cap"] += max(0, len(answer.value) - p.questions_per_call)
        for item in answer.value[: p.questions_per_call]:
            qtype = str(item.get("type") or "").lower()
            text = item["question"].strip()
            outcome.drafts.append(
                QueryDraft(
                    query_id=query_id(doc_id, f"generate_queries:chunk:{start}-{end}", text),
                    doc_id=doc_id,
                    text=text,
                    answer=item["answer"].strip(),
                    qtype=qtype if qtype in ("simple", "complicated") else "complicated",
                    requested_position=tag,
                    chunk_start=start,
                    chunk_end=end,
                    chunk_tag=tag,
                )
            )
    return outcome
