"""Second opinion on suspected refusals: an LLM reads the start of the output (PosIR B.5.2)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from builder.backends.llm import ChatRequest
from builder.backends.llm.json_answers import chat_json
from builder.textutil.languages import LANGUAGES

if TYPE_CHECKING:
    from builder.stages.context import StageContext


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"refusal": {"type": "boolean"}},
    "required": ["refusal"],
    "additionalProperties": False,
}


def _validate(value: Any) -> bool:
    if isinstance(value, dict) and isinstance(value.get("refusal"), bool):
        return value["refusal"]
    raise ValueError('expected {"refusal": true} or {"refusal": false}')


def confirm_refusals(
    suspects: dict[str, tuple[str, str]], llm: str, prompt: str, max_chars: int, ctx: StageContext
) -> dict[str, bool]:
    """suspect id -> (text, lang) in; id -> is a refusal out. An id the model could not judge
    is left out, so the pattern-list verdict stands for it."""
    ids = list(suspects)
    requests = [
        ChatRequest.of(
            ctx.render(prompt, language=LANGUAGES.get(lang, (lang,))[0], output=text[:max_chars]),
            item_id=i,
            json_schema=SCHEMA,
        )
        for i, (text, lang) in ((i, suspects[i]) for i in ids)
    ]
    with ctx.progress.task("checking suspected refusals", len(requests)) as bar:
        answers = chat_json(
            ctx.llm(llm), requests, _validate, raw_log=ctx.work_dir / "unparseable.jsonl", on_done=bar.advance
        )
    return {i: a.value for i, a in zip(ids, answers) if a.value is not None}
