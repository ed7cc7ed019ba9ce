"""Getting JSON out of chatty models: lenient parsing plus a few corrective re-asks."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import ValidationError

from builder.backends.llm.base import ChatRequest, ChatResponse, LLMBackend
from builder.backends.llm.jobs import Job, run_jobs
from builder.backends.llm.json_values import MAX_DEPTH, scan_json

T = TypeVar("T")

# Reasoning models may drop the opening tag, so the answer is whatever follows the last closing one.
_THINK_END = re.compile(r"</think\s*>", re.IGNORECASE)
# What a validator may raise when the JSON has the wrong shape.
_SHAPE_ERRORS = (ValueError, TypeError, KeyError, IndexError, RecursionError)
_KINDS: dict[str, type] = {"object": dict, "array": list}


def _after_reasoning(text: str) -> str:
    last = None
    for last in _THINK_END.finditer(text):  # noqa: B007 - the loop keeps the last match
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
    raise ValueError(
        f"answer is nested too deeply (over {MAX_DEPTH} levels)" if scan.too_deep else "answer is not valid JSON"
    )


@dataclass(frozen=True)
class JSONAnswer(Generic[T]):
    """`error` is a drop reason: llm_failed (followed by `: <cause>`), llm_truncated or
    llm_unparseable."""

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


@dataclass(frozen=True)
class _Failure:
    """Why a job's answers stayed unusable: the last problem, the last raw answer, and
    every request whose answer was rejected (their cached answers get marked)."""

    problem: str
    raw: str
    asked: tuple[ChatRequest, ...]


def json_job(
    request: ChatRequest, validate: Callable[[Any], T], max_reasks: int
) -> Job[tuple[JSONAnswer[T], _Failure | None]]:
    """Ask, then re-ask up to `max_reasks` times while the answer does not parse or validate.

    Returns the answer and, when it stayed unusable, why.
    """
    current, last, asked = request, None, []
    for attempt in range(1, max_reasks + 2):
        response = yield current
        if not response.ok:
            # A failed request keeps its cause (`llm_failed: HTML page instead of JSON`): the
            # drop log records it beside the reason.
            error = response.error if response.reason == "llm_failed" else response.reason
            return JSONAnswer(None, error, last[1] if last else None, attempt), None
        value, problem = _judge(current, response, validate)
        if problem is None:
            return JSONAnswer(value, None, response.text, attempt, response.reasoning), None
        last, asked = (problem, response.text or ""), [*asked, current]
        current = _reask(current, last[1], problem)
    assert last is not None
    return JSONAnswer(None, "llm_unparseable", last[1], max_reasks + 1), _Failure(*last, tuple(asked))


def chat_json(
    backend: LLMBackend,
    requests: Sequence[ChatRequest],
    validate: Callable[[Any], T] | Sequence[Callable[[Any], T]],
    raw_log: Path | None = None,
    on_done: Callable[[int], None] | None = None,
) -> list[JSONAnswer[T]]:
    """Ask for JSON answers, re-asking those that do not parse or validate.

    `validate` is one validator for every request, or one per request. Every request,
    re-asks included, goes to one pool (see `jobs.run_jobs`); `on_done` counts requests
    whose answer is final, so a progress bar sized to `requests` ends full.
    """
    checks = [validate] * len(requests) if callable(validate) else list(validate)
    if len(checks) != len(requests):
        raise ValueError(f"{len(requests)} requests but {len(checks)} validators")
    if not requests:
        return []
    limit = backend.config.max_reasks
    done = run_jobs(backend, [json_job(r, check, limit) for r, check in zip(requests, checks)], on_done)
    failures = [(r.item_id, failure) for r, (_, failure) in zip(requests, done) if failure is not None]
    mark_failed: Callable[[Sequence[ChatRequest], str], None] | None = getattr(backend, "mark_failed", None)
    if mark_failed is not None and failures:
        # A rerun with --reask-failed asks these again instead of reading them from the cache.
        mark_failed([r for _, failure in failures for r in failure.asked], "llm_unparseable")
    if raw_log is not None and failures:
        _log_failures(raw_log, [(item_id, f.problem, f.raw) for item_id, f in failures])
    return [answer for answer, _ in done]


def _log_failures(path: Path, failures: list[tuple[str, str, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as log:
        for item_id, problem, raw in failures:
            record = {"item_id": item_id, "error": "llm_unparseable", "reason": problem, "raw": raw}
            log.write(json.dumps(record, ensure_ascii=False) + "\n")
