"""Chat-completion requests built once by the openai SDK, then sent with a new body each time.

`AsyncOpenAI.post()` rebuilds an options model, the headers and the URL on every call
and deep-copies the options twice; at hundreds of requests a second that is most of the
client's CPU. All of it but the body and the attempt number is the same on every call,
so the SDK builds one request here, once, and each call copies its URL, headers and
timeouts onto a new body and sends it through the SDK's own HTTP client. Failures come
back as the SDK's exception types, so callers classify them as they would from `post()`.

The HTTP client's own timeout restarts on every byte read, so a server that drips its
reply would hold a request forever: each send has a deadline for the whole exchange
(connect to last byte) and reads at most a set number of bytes.
"""

from __future__ import annotations

import asyncio
import importlib
import json
from typing import Any

import openai
from openai._models import FinalRequestOptions

# The SDK computes these per request; they are set or derived afresh on every send.
_PER_REQUEST = ("content-length", "x-stainless-retry-count")


def http_module() -> Any:
    """The httpx flavour the installed SDK is built on (httpx, or its successor httpx2)."""
    base = next(c for c in openai.DefaultAsyncHttpxClient.__mro__ if c.__name__ == "AsyncClient")
    return importlib.import_module(base.__module__.split(".")[0])


class ReplyTooLarge(ValueError):
    """A reply longer than the cap: no chat answer is that long, so it is not read on."""


def dumps(body: dict[str, Any]) -> bytes:
    """The body as the SDK encodes JSON (UTF-8, compact, no NaN)."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


class PreparedChat:
    """POST /chat/completions with everything but the body prepared by the SDK.

    Build it on the event loop that will send, so the SDK's async-library header is right.
    """

    def __init__(self, client: openai.AsyncOpenAI, http_client: Any) -> None:
        options = FinalRequestOptions.construct(method="post", url="/chat/completions", json_data={})
        template = client._build_request(options)
        self._client = client
        self._http_client = http_client
        self._http = http_module()
        self._url = template.url
        self._extensions = template.extensions
        self._headers = [(k, v) for k, v in template.headers.multi_items() if k.lower() not in _PER_REQUEST]

    async def send(self, payload: bytes, attempt: int, deadline_s: float, max_bytes: int) -> bytes:
        """The body of a 2xx reply; otherwise raises APIStatusError, APITimeoutError or
        APIConnectionError, as `AsyncOpenAI.post()` with no retries of its own would, and
        ReplyTooLarge past `max_bytes`. The whole exchange must end within `deadline_s`."""
        headers = [*self._headers, ("x-stainless-retry-count", str(attempt))]
        request = self._http.Request("POST", self._url, headers=headers, content=payload, extensions=self._extensions)
        try:
            status, response_headers, content = await asyncio.wait_for(self._exchange(request, max_bytes), deadline_s)
        except (TimeoutError, self._http.TimeoutException) as error:
            raise openai.APITimeoutError(request=request) from error
        except self._http.RequestError as error:
            raise openai.APIConnectionError(request=request) from error
        # The body is already decoded: a header saying it is compressed would decode it twice.
        plain_headers = [(k, v) for k, v in response_headers.multi_items() if k.lower() != "content-encoding"]
        response = self._http.Response(status, headers=plain_headers, content=content, request=request)
        if response.is_error:
            raise self._client._make_status_error_from_response(response)
        return content

    async def _exchange(self, request: Any, max_bytes: int) -> tuple[int, Any, bytes]:
        """Status, headers and decoded body, read as a stream so that no more than `max_bytes`
        is held (a compressed reply is capped at its decoded size)."""
        response = await self._http_client.send(request, stream=True)
        try:
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > max_bytes:
                raise ReplyTooLarge(f"reply of {int(declared):,} bytes is over max_reply_bytes {max_bytes:,}")
            chunks, size = [], 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > max_bytes:
                    # A small compressed body that inflates past the cap is a decompression bomb.
                    encoding = response.headers.get("content-encoding", "identity").lower()
                    packed = (
                        f"compressed reply ({encoding}) decodes to more than"
                        if encoding != "identity"
                        else "reply is over"
                    )
                    raise ReplyTooLarge(f"{packed} max_reply_bytes {max_bytes:,}")
                chunks.append(chunk)
        finally:
            await response.aclose()
        return response.status_code, response.headers, b"".join(chunks)
