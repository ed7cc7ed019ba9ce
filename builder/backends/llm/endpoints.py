"""The servers behind one model: a client for each, and least-outstanding-requests choice.

A recipe may list several servers of the same model (`base_urls:`), say one vLLM `serve`
per GPU. Every attempt goes to the server with the fewest requests in flight (ties to
the first listed), so a slow or busy server takes fewer; a retry avoids the server that
just failed when another is there. All of this runs on the backend's one event loop, so
the counters need no lock.
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Sequence
from typing import Any, cast
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import openai

from builder.backends.llm.openai_requests import PreparedChat, http_module


@functools.cache
def ssl_context() -> ssl.SSLContext:
    """The verifying SSL context every client of this process shares.

    Each HTTP client builds one when it is made, even for an http:// endpoint that never
    uses it, and reading the CA certificates (with the import that comes first) takes
    up to a fifth of a second; made once, it costs that once. It is what the client
    would build itself: default verification, honouring SSL_CERT_FILE and SSL_CERT_DIR.
    """
    return cast(ssl.SSLContext, http_module().create_ssl_context())


def http_client(concurrency: int) -> Any:
    """The SDK's async HTTP client with a keep-alive pool as wide as the concurrency.

    The aiohttp transport costs far less CPU per request than the default one, which
    matters at hundreds of requests a second; it needs aiohttp (and, on older SDKs,
    httpx-aiohttp), so fall back to the default when it is missing.
    """
    limits = http_module().Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    try:
        return openai.DefaultAioHttpClient(limits=limits, verify=ssl_context())
    except (AttributeError, RuntimeError):
        return openai.DefaultAsyncHttpxClient(limits=limits, verify=ssl_context())


def split_query(url: str | None) -> tuple[str | None, dict[str, str]]:
    """A base_url without its query, and the query's parameters (`?api-version=...`).

    The SDK appends the request path to base_url as text, so a query left in it would
    come before the path (`/v1?key=x/chat/completions`); given apart, it is sent with
    every request.
    """
    if url is None:
        return None, {}
    parts = urlsplit(url)
    return urlunsplit(parts._replace(query="")), dict(parse_qsl(parts.query, keep_blank_values=True))


class Endpoint:
    """One server: its client, and how many requests it has in flight."""

    def __init__(self, url: str | None, api_key: str, timeout_s: float, concurrency: int, max_reply_bytes: int) -> None:
        self.url = url
        self.in_flight = 0
        self.deadline_s = timeout_s
        self.max_reply_bytes = max_reply_bytes
        self._http = http_client(concurrency)
        base_url, query = split_query(url)
        self.client = openai.AsyncOpenAI(
            api_key=api_key,
            base_url=base_url,
            default_query=query or None,
            timeout=timeout_s,
            max_retries=0,
            http_client=self._http,
        )
        self._chat: PreparedChat | None = None

    def prepare(self) -> None:
        # On the loop that sends, so the SDK sees the async library it will run under.
        self._chat = PreparedChat(self.client, self._http)

    async def send(self, payload: bytes, attempt: int) -> bytes:
        """As `PreparedChat.send`, counted as in flight while it runs."""
        if self._chat is None:
            raise RuntimeError("Endpoint.prepare() must run on the sending loop first")
        self.in_flight += 1
        try:
            return await self._chat.send(payload, attempt, self.deadline_s, self.max_reply_bytes)
        finally:
            self.in_flight -= 1


class Endpoints:
    """Every server of one model, in the order the recipe lists them."""

    def __init__(
        self, urls: Sequence[str | None], api_key: str, timeout_s: float, concurrency: int, max_reply_bytes: int
    ) -> None:
        self.all = [Endpoint(url, api_key, timeout_s, concurrency, max_reply_bytes) for url in urls]

    @property
    def source(self) -> str:
        """Where requests go, for messages about failures that reached no server."""
        urls = [e.url for e in self.all if e.url is not None]
        return ", ".join(urls) if urls else "the OpenAI API"

    async def prepare(self) -> None:
        for endpoint in self.all:
            endpoint.prepare()

    def pick(self, avoid: Endpoint | None = None) -> Endpoint:
        """The server with the fewest requests in flight (the first listed on a tie),
        other than `avoid` when there is another."""
        candidates = [e for e in self.all if e is not avoid] or self.all
        return min(candidates, key=lambda e: e.in_flight)

    async def close(self) -> None:
        for endpoint in self.all:
            await endpoint.client.close()
