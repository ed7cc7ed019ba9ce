"""Getting JSON out of chatty models: lenient parsing plus a few corrective re-asks."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar, cast

from pydantic import ValidationError

from builder.backends.llm.base import ChatRequest, ChatResponse, LLMBackend

T = TypeVar("T")

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[\w+-]*[ \t]*\n?(.*?)```", re.DOTALL)
_CLOSER = re.compile(r"\s*[}\]]")
_DECODER = json.JSONDecoder()
# What a validator may raise when the JSON has the wrong shape.
_SHAPE_ERRORS = (ValueError, TypeError, KeyError, IndexError)


def _drop_trailing_commas(text: str) -> str:
    """Remove commas that directly precede a closing bracket, leaving strings alone."""
    out: list[str] = []
    in_string = escaped = False
    for i, ch in enumerate(text):
        if escaped:
            escaped = False
        elif in_string:
            escaped = ch == "\\"
            in_string = ch != '"'
        elif ch == '"':
            in_string = True
        elif ch == "," and _CLOSER.match(text, i + 1):
            continue
        out.append(ch)
    return "".join(out)


def _first_value(text: str) -> Any:
    """The first object or array in `text` that decodes, ignoring text around it."""
    for start, ch in enumerate(text):
        if ch in "{[":
            try:
                return _DECODER.raw_decode(text, start)[0]
            except ValueError:
                continue
    raise ValueError("no JSON object or array found")


def _candidates(text: str) -> list[str]:
    # Reasoning models may also drop the opening tag, so cut at the last closing one.
    answer = _THINK.sub("", text).rsplit("</think>", 1)[-1].strip()
    fenced = [block.strip() for block in _FENCE.findall(answer)]
    return [*fenced, answer]


def parse_json_lenient(text: str) -> Any:
    """Parse a model's JSON answer despite fences, chatter, trailing commas and <think> blocks."""
    for candidate in _candidates(text):
        for variant in (candidate, _drop_trailing_commas(candidate)):
            try:
                return json.loads(variant)
            except ValueError:
                pass
            try:
                return _first_value(variant)
            except ValueError:
                pass
    raise ValueError("answer is not valid JSON" if text.strip() else "answer is empty")


@dataclass(frozen=True)
class JSONAnswer(Generic[T]):
    value: T | None
    error: str | None
    raw: str | None
    attempts: int


def _problem(error: Exception) -> str:
    """A short, stable description of what was wrong, worded for the model."""
    if isinstance(error, ValidationError):
        parts = [f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in error.errors()[:5]]
        return "; ".join(parts)
    if isinstance(error, KeyError):
        return f"missing key {error}"
    return (str(error) or type(error).__name__)[:300]


def _reask(request: ChatRequest, raw: str, problem: str) -> ChatRequest:
    complaint = (
        f"That answer could not be used ({problem}). Reply again with only the corrected JSON, and nothing else."
    )
    messages = [*request.messages, {"role": "assistant", "content": raw}, {"role": "user", "content": complaint}]
    return ChatRequest.of(messages, request.item_id, request.json_schema, request.max_tokens)


def _judge(response: ChatResponse, validate: Callable[[Any], T]) -> tuple[T | None, str | None]:
    """The validated value, or why the answer was unusable."""
    try:
        return validate(parse_json_lenient(response.text or "")), None
    except _SHAPE_ERRORS as error:
        return None, _problem(error)


def chat_json(
    backend: LLMBackend,
    requests: Sequence[ChatRequest],
    validate: Callable[[Any], T],
    raw_log: Path | None = None,
    on_done: Callable[[int], None] | None = None,
) -> list[JSONAnswer[T]]:
    """Ask for JSON answers, re-asking (in batches) those that do not parse or validate.

    `on_done` follows the first round only, so a progress bar sized to `requests` ends full.
    """
    results: list[JSONAnswer[T] | None] = [None] * len(requests)
    current = {i: request for i, request in enumerate(requests)}
    problems: dict[int, tuple[str, str]] = {}
    for round_no in range(backend.config.max_reasks + 1):
        order = list(current)
        responses = backend.chat_many([current[i] for i in order], on_done if round_no == 0 else None)
        retry: dict[int, ChatRequest] = {}
        for i, response in zip(order, responses, strict=True):
            attempts = round_no + 1
            if not response.ok:
                last_raw = problems[i][1] if i in problems else None
                results[i] = JSONAnswer(None, "llm_failed", last_raw, attempts)
                continue
            value, problem = _judge(response, validate)
            if problem is None:
                results[i] = JSONAnswer(value, None, response.text, attempts)
            else:
                problems[i] = (problem, response.text or "")
                retry[i] = _reask(current[i], response.text or "", problem)
        current = retry
        if not current:
            break
    for i in current:
        problem, raw = problems[i]
        results[i] = JSONAnswer(None, "llm_unparseable", raw, backend.config.max_reasks + 1)
    if raw_log is not None and current:
        _log_failures(raw_log, [(requests[i].item_id, *problems[i]) for i in current])
    return cast(list[JSONAnswer[T]], results)


def _log_failures(path: Path, failures: list[tuple[str, str, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as log:
        for item_id, problem, raw in failures:
            record = {"item_id": item_id, "error": "llm_unparseable", "reason": problem, "raw": raw}
            log.write(json.dumps(record, ensure_ascii=False) + "\n")
