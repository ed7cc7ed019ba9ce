"""Chat-completion requests built once by the openai SDK, then sent with a new body each time.

`AsyncOpenAI.post()` rebuilds an options model, the headers and the URL on every call
and deep-copies the options twice; at hundreds of requests a second that is most of the
client's CPU. All of it but the body and the attempt number is the same on every call,
so the SDK builds one request here, once, and each call copies its URL, headers and
timeouts onto a new body and sends it through the SDK's own HTTP client. Failures come
back as the SDK's exception types, so callers classify them as they would from `post()`.
"""

from __future__ import annotations

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

    async def send(self, payload: bytes, attempt: int) -> bytes:
        """The body of a 2xx reply; otherwise raises APIStatusError, APITimeoutError or
        APIConnectionError, as `AsyncOpenAI.post()` with no retries of its own would."""
        headers = [*self._headers, ("x-stainless-retry-count", str(attempt))]
        request = self._http.Request("POST", self._url, headers=headers, content=payload, extensions=self._extensions)
        try:
            response = await self._http_client.send(request)
        except self._http.TimeoutException as error:
            raise openai.APITimeoutError(request=request) from error
        except self._http.RequestError as error:
            raise openai.APIConnectionError(request=request) from error
        if response.is_error:
            raise self._client._make_status_error_from_response(response)
        return bytes(response.content)
