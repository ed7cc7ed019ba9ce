"""Reading one reply of an OpenAI-compatible server: its JSON, the chat answer in it, and,
when there is none, a short reason that says what the server sent instead (`HTML page
instead of JSON`, `invalid UTF-8 in reply`, `reply not in the expected shape: ...`), whether
to try again, and whether the failure is about reaching the server."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

import openai

from builder.backends.llm.base import ChatResponse
from builder.backends.llm.openai_requests import ReplyTooLarge

# Statuses that say the endpoint, not the request, is wrong (credentials, URL, model).
_TRANSPORT_STATUSES = (401, 403, 404)
# Token counts must fit the cache's 64-bit integers.
_MAX_TOKENS = 2**63


def _retry_after(error: openai.APIStatusError) -> float | None:
    value = error.response.headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _retryable(status: int) -> bool:
    return status in (408, 409, 429) or status >= 500


class _Malformed(ValueError):
    """A 200 reply whose body is not a chat completion we can use; the message says why."""


class _WrongShape(_Malformed):
    """JSON, but not shaped as a chat completion."""

    def __init__(self, what: str) -> None:
        super().__init__(f"reply not in the expected shape: {what}")


def decoded(raw: bytes) -> Any:
    """The reply's JSON; raises _Malformed naming what the body is instead."""
    try:
        return json.loads(raw)
    except UnicodeDecodeError:
        raise _Malformed("invalid UTF-8 in reply") from None
    except RecursionError:
        raise _Malformed("JSON nested too deeply") from None
    except ValueError:
        text = raw.decode("utf-8", errors="replace").strip()
        # A proxy or load balancer in front of the model answers with its own error page.
        if text[:200].lower().startswith(("<!doctype html", "<html", "<head", "<body")):
            raise _Malformed("HTML page instead of JSON") from None
        raise _Malformed(f"reply is not JSON: {text[:40]!r}") from None


def classify(error: Exception) -> tuple[str, bool, float | None, bool]:
    """Short reason, whether to retry, how long the server asked us to wait, and whether
    the failure is about reaching the server rather than about the answer."""
    if isinstance(error, ReplyTooLarge):
        return str(error), False, None, False
    if isinstance(error, openai.APIStatusError):
        status = error.status_code
        if _retryable(status):
            return f"HTTP {status}", True, _retry_after(error), True
        return f"HTTP {status}: {error.message[:200]}", False, None, status in _TRANSPORT_STATUSES
    if isinstance(error, openai.APIConnectionError):
        return _connection_reason(error), True, None, True
    if isinstance(error, _Malformed):
        return str(error), True, None, False
    if isinstance(error, RecursionError):
        return "JSON nested too deeply", True, None, False
    if isinstance(error, (ValueError, KeyError, TypeError, IndexError)):
        return f"reply not in the expected shape: {type(error).__name__}: {error}"[:200], True, None, False
    return f"{type(error).__name__}: {error}"[:200], False, None, False


def _connection_reason(error: openai.APIConnectionError) -> str:
    root: BaseException = error
    while root.__cause__ is not None:
        root = root.__cause__
    # The aiohttp transport reports a refused connection as a connect timeout.
    if isinstance(root, ConnectionRefusedError):
        return "connection refused"
    # The body ended before the length its Content-Length header announced (or ran past it).
    if re.search(r"content.length|complete message body|payload is not completed", str(root), re.IGNORECASE):
        return "Content-Length mismatch (the body ended before the announced length)"
    return "timeout" if isinstance(error, openai.APITimeoutError) else "connection error"


def _token_count(usage: dict[str, Any], name: str) -> int:
    value = usage.get(name) or 0
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < _MAX_TOKENS:
        raise _WrongShape(f"usage.{name} is {value!r}")
    return value


def _llama_cache_n(timings: Any) -> int:
    """llama-server's count of prompt tokens taken from its cache; 0 when absent or not a count
    (a report beside the answer, not part of it, so it never spoils the answer)."""
    value = timings.get("cache_n") if isinstance(timings, dict) else None
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < _MAX_TOKENS:
        return 0
    return value


def answer_of(data: Any, retries: int, max_tokens: int) -> ChatResponse:
    """The reply's answer; raises _Malformed when the body has the wrong shape."""
    if not isinstance(data, dict):
        raise _WrongShape("the body is not a JSON object")
    choices = data.get("choices") or []
    if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
        raise _WrongShape("choices is not a list of objects")
    message = choices[0].get("message") if choices else {}
    if not isinstance(message, dict):
        raise _WrongShape("message is not an object")
    text, reasoning = message.get("content"), message.get("reasoning_content", message.get("reasoning"))
    if not isinstance(text, str | None) or not isinstance(reasoning, str | None):
        raise _WrongShape("content is not text")
    usage = data.get("usage") or {}
    if not isinstance(usage, dict):
        raise _WrongShape("usage is not an object")
    prompt, completion = _token_count(usage, "prompt_tokens"), _token_count(usage, "completion_tokens")
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and "cached_tokens" in details:
        cached = _token_count(details, "cached_tokens")
    else:
        # No details (or null) from a server without a prompt cache: nothing was served
        # from one, unless it is llama-server, which reports its reuse as timings.cache_n.
        cached = _llama_cache_n(data.get("timings"))
    if choices and choices[0].get("finish_reason") == "length":
        return replace(
            ChatResponse.truncated(f"answer cut off at max_tokens {max_tokens}", retries),
            prompt_tokens=prompt,
            completion_tokens=completion,
        )
    if not text:
        return ChatResponse.failed("empty answer", retries)
    return ChatResponse(text, None, False, prompt, completion, retries, reasoning or None, cached_tokens=cached)
