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
from builder.backends.llm.json_values import MAX_DEPTH, scan_json

T = TypeVar("T")

# Reasoning models may drop the opening tag, so the answer is whatever follows the last closing one.
_THINK_END = re.compile(r"</think\s*>", re.IGNORECASE)
# What a validator may raise when the JSON has the wrong shape.
_SHAPE_ERRORS = (ValueError, TypeError, KeyError, IndexError, RecursionError)
_KINDS: dict[str, type] = {"object": dict, "array": list}


def _after_reasoning(text: str) -> str:
    last = None
    for last in _THINK_END.finditer(text):
        pass
    return (text[last.end() :] if last else text).strip()


def parse_json_lenient(text: str, expect: type | None = None) -> Any:
    """Parse a model's JSON answer despite fences, prose, trailing commas and reasoning.

    A whole answer that is JSON is taken as it is; otherwise the last top-level object
    or array in it (of type `expect` if one is, else of any kind), since a model that
    thinks aloud writes its answer last. Linear time, whatever the text.
    """
    answer = _after_reasoning(text)
    if not answer:
        raise ValueError("answer is empty")
    scan = scan_json(answer)
    if not scan.too_deep:
        try:
            return json.loads(answer)
        except (ValueError, RecursionError):
            pass
    other: list[Any] = []
    for value in scan.values():
        if expect is None or isinstance(value, expect):
            return value
        if not other:
            other.append(value)
    if other:
        return other[0]
    raise ValueError(f"answer is nested too deeply (over {MAX_DEPTH} levels)" if scan.too_deep
                     else "answer is not valid JSON")


@dataclass(frozen=True)
class JSONAnswer(Generic[T]):
    """`error` is a drop reason: llm_failed, llm_truncated or llm_unparseable."""

    value: T | None
    error: str | None
    raw: str | None
    attempts: int
    reasoning: str | None = None


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


def _expected(request: ChatRequest) -> type | None:
    kind = (request.json_schema or {}).get("type")
    return _KINDS.get(kind) if isinstance(kind, str) else None


def _judge(request: ChatRequest, response: ChatResponse, validate: Callable[[Any], T]) -> tuple[T | None, str | None]:
    """The validated value, or why the answer was unusable."""
    try:
        return validate(parse_json_lenient(response.text or "", _expected(request))), None
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
                results[i] = JSONAnswer(None, response.reason, last_raw, attempts)
                continue
            value, problem = _judge(current[i], response, validate)
            if problem is None:
                results[i] = JSONAnswer(value, None, response.text, attempts, response.reasoning)
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
