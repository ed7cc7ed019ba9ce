"""The files of a provider batch: the input lines we write, and what each output or error
line says about the request it answers.

Each line of a batch's output and error files is checked against the batch's requests by
its custom_id (made from the request's cache key, see `batch_book.custom_id`): a line
that is not JSON, names no request of this batch, or answers one twice is skipped and
counted with its reason, never trusted. What a line says about its request is one of: an
answer, an answer cut off at max_tokens, a failure to ask again in the next batch (the
provider's 429 and 5xx, an expired or cancelled request, a reply we cannot read), or a
failure for good (a 4xx: the request itself was refused, as the synchronous path treats it).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

from builder.backends.llm.base import ChatResponse
from builder.backends.llm.batch_book import custom_id, key_of
from builder.backends.llm.openai_replies import answer_of
from builder.backends.llm.openai_requests import dumps

CHAT_URL: Final = "/v1/chat/completions"


def input_lines(bodies: Iterable[tuple[str, dict[str, Any]]]) -> bytes:
    """The JSONL a batch is created from: one chat request per cache key."""
    return b"".join(
        dumps({"custom_id": custom_id(key), "method": "POST", "url": CHAT_URL, "body": body}) + b"\n"
        for key, body in bodies
    )


@dataclass(frozen=True)
class LineOutcome:
    """What one line says: `answer` (ok or cut off), else `retry` (ask again) or `final` (an error)."""

    answer: ChatResponse | None = None
    retry: str | None = None
    final: str | None = None


def _retryable(status: int) -> bool:
    return status in (408, 409, 429) or status >= 500


def _error_message(body: Any) -> str:
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return str(message)[:200] if message else "no message"


def _outcome(line: dict[str, Any], max_tokens: int) -> LineOutcome | None:
    response, error = line.get("response"), line.get("error")
    if isinstance(response, dict) and isinstance(response.get("status_code"), int):
        status, body = response["status_code"], response.get("body")
        if status == 200:
            try:
                return LineOutcome(answer=answer_of(body, 0, max_tokens))
            except (ValueError, KeyError, TypeError, IndexError) as problem:
                return LineOutcome(retry=str(problem)[:200])
        if _retryable(status):
            return LineOutcome(retry=f"HTTP {status}")
        return LineOutcome(final=f"HTTP {status}: {_error_message(body)}")
    if isinstance(error, dict):
        return LineOutcome(retry=str(error.get("code") or error.get("message") or "error")[:200])
    return None


def read_lines(
    texts: Iterable[str], wanted: set[str], max_tokens: Callable[[str], int]
) -> tuple[dict[str, LineOutcome], Counter[str]]:
    """Each wanted key's outcome from the lines of the output and error files, and the
    lines skipped, counted by reason. `max_tokens(key)` is the budget the key was sent with."""
    outcomes: dict[str, LineOutcome] = {}
    skipped: Counter[str] = Counter()
    for text in texts:
        for raw in text.splitlines():
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
            except ValueError:
                skipped["line is not JSON"] += 1
                continue
            if not isinstance(line, dict):
                skipped["line is not a JSON object"] += 1
                continue
            key = key_of(line.get("custom_id"))
            if key is None or key not in wanted:
                skipped["custom_id names no request of this batch"] += 1
                continue
            if key in outcomes:
                skipped["custom_id answered twice"] += 1
                continue
            outcome = _outcome(line, max_tokens(key))
            if outcome is None:
                skipped["line holds neither a response nor an error"] += 1
                continue
            outcomes[key] = outcome
    return outcomes, skipped
