"""A local OpenAI-compatible chat server with deterministic fault injection, and the
provider batch endpoints (files, batches: see `openai_batches`).

In a test::

    with FakeOpenAIServer(latency_s=0.01, faults=FaultPlan(rate=0.2)) as srv:
        config = OpenAIModelConfig(model="m", base_url=srv.base_url)

In a conftest, ``fake_openai = openai_server_fixture()`` gives tests a fixture that
starts servers on demand and stops them at teardown. As its own process (for
benchmarks)::

    python -m tests.support.openai_server --port 0 --latency-ms 50
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import signal
import socket
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from aiohttp import web

from tests.support.openai_batches import BatchDesk


@dataclass(frozen=True)
class Reply:
    """What the server should answer; `body` replaces the whole HTTP body when set.

    `reasoning` is sent as `reasoning_content` (as DeepSeek and vLLM's reasoning parsers
    do) and `usage`, when set, replaces the counted token usage; `extra` adds top-level
    fields to the completion (llama-server's `timings`, say). With `drip_s` the body is
    streamed `chunk_bytes` at a time with that pause after each chunk, as a stalling server
    would; `declare_length` says whether a Content-Length header announces it first, and
    `content_length`, when set, is the length it announces (a lie, if it differs; the
    connection is then closed after the body). `body` may be bytes (invalid UTF-8, gzip).
    """

    text: str | None = ""
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    body: str | bytes | None = None
    finish_reason: str = "stop"
    reasoning: str | None = None
    usage: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    drip_s: float = 0.0
    chunk_bytes: int = 1
    declare_length: bool = True
    content_length: int | None = None


Responder = Callable[[dict[str, Any]], "str | Reply"]

FAULT_KINDS = ("429", "500", "slow", "garbage", "fenced", "chatty")


def _user_messages(body: dict[str, Any]) -> list[str]:
    return [str(m.get("content", "")) for m in body.get("messages", []) if m.get("role") == "user"]


def echo_responder(body: dict[str, Any]) -> str:
    """Default answer: a short echo of the last user message."""
    users = _user_messages(body)
    return f"echo: {users[-1][:200] if users else ''}"


def json_echo_responder(body: dict[str, Any]) -> str:
    """A JSON answer built from the first user message, so re-asks get the same answer."""
    users = _user_messages(body)
    return json.dumps({"echo": users[0] if users else ""})


@dataclass(frozen=True)
class FaultPlan:
    """Spoils a fixed share of requests; the choice depends only on body, attempt and seed.

    A retry of the same body is a new attempt and rolls again, so retries get through.
    garbage, fenced and chatty alter the answer text: they are meant for JSON answers
    read through `chat_json`, which must see through them (or re-ask).
    Kinds: 429, 500, slow (answer after `slow_s`), garbage (truncated answer), fenced,
    chatty (answer wrapped in prose), plus opt-in badbody (broken HTTP body), listbody (a
    JSON list for a body), truncated (half the answer with finish_reason "length") and empty.
    """

    rate: float = 0.2
    seed: int = 0
    kinds: tuple[str, ...] = FAULT_KINDS
    slow_s: float = 2.0
    retry_after_s: float = 0.0

    def pick(self, digest: str, attempt: int) -> str | None:
        roll = hashlib.sha256(f"{self.seed}:{digest}:{attempt}".encode()).digest()
        if int.from_bytes(roll[:8], "big") / 2**64 >= self.rate:
            return None
        return self.kinds[int.from_bytes(roll[8:12], "big") % len(self.kinds)]

    def apply(self, kind: str, reply: Reply) -> Reply:
        text = reply.text or ""
        spoiled = {
            "429": Reply(status=429, headers={"Retry-After": f"{self.retry_after_s:g}"}),
            "500": Reply(status=500),
            "slow": replace(reply, delay_s=reply.delay_s + self.slow_s),
            "garbage": replace(reply, text=text[: len(text) // 2] or "#"),
            "fenced": replace(reply, text=f"```json\n{text}\n```"),
            "chatty": replace(reply, text=f"Sure! Here is what you asked for:\n{text}\nHope that helps."),
            "badbody": Reply(body='{"id": "chatcmpl-broken", "choices": [{"mess'),
            "listbody": Reply(body="[]"),
            "truncated": replace(reply, text=text[: len(text) // 2], finish_reason="length"),
            "empty": replace(reply, text=None),
        }
        return spoiled[kind]


def _words(text: str | None) -> int:
    return len(text.split()) if text else 0


def _completion(body: dict[str, Any], reply: Reply, serial: int) -> dict[str, Any]:
    prompt = sum(_words(str(m.get("content", ""))) for m in body.get("messages", []))
    done = _words(reply.text)
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if reply.reasoning is not None:
        message["reasoning_content"] = reply.reasoning
    usage = {"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done}
    return {
        "id": f"chatcmpl-{serial}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "fake-model"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": reply.finish_reason,
                "logprobs": None,
            }
        ],
        "usage": dict(reply.usage) if reply.usage is not None else usage,
        **reply.extra,
    }


def _error(status: int) -> dict[str, Any]:
    return {"error": {"message": f"injected HTTP {status}", "type": "fake_error", "code": status}}


class FakeOpenAIServer:
    """Serves /v1/chat/completions and /v1/models from a background thread."""

    def __init__(
        self,
        responder: Responder | None = None,
        latency_s: float = 0.0,
        faults: FaultPlan | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.responder = responder or echo_responder
        self.latency_s = latency_s
        self.faults = faults
        self.request_count = 0
        self.requests: list[dict[str, Any]] = []
        # perf_counter() at each arrival (in the order of `requests`) and at each answer
        # (in the order they left), so a test can tell overlapping requests from rounds.
        self.arrived: list[float] = []
        self.answered: list[float] = []
        self.headers: list[dict[str, str]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._seen: Counter[str] = Counter()
        # The provider batch endpoints (files, batches) and the bodies they answered.
        self.batches = BatchDesk(self._batch_line)
        self.batch_requests: list[dict[str, Any]] = []
        self._host, self._port = host, port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self._host}:{self._port}/v1"

    def start(self) -> FakeOpenAIServer:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="fake-openai", daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), loop).result()
        return self

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
        self._loop = self._thread = self._runner = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _serve(self) -> None:
        app = web.Application(middlewares=[self._count])
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/stats", self._stats)
        self.batches.add_routes(app)
        # Cancel handlers whose client hung up, so slow faults do not pile up.
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=0.1)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self._host, self._port))
        self._port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock, backlog=1024).start()

    @web.middleware
    async def _count(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        self.request_count += 1
        return await handler(request)

    async def _models(self, request: web.Request) -> web.Response:
        model = {"id": "fake-model", "object": "model", "created": 0, "owned_by": "build-bench"}
        return web.json_response({"object": "list", "data": [model]})

    async def _stats(self, request: web.Request) -> web.Response:
        # Lets a parent process read the counters of a server running in a child.
        return web.json_response({"request_count": self.request_count, "max_in_flight": self.max_in_flight})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        self.arrived.append(time.perf_counter())
        self.headers.append({k.lower(): v for k, v in request.headers.items()})
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            reply = self._reply(body)
            await asyncio.sleep(self.latency_s + reply.delay_s)
        finally:
            self.in_flight -= 1
            self.answered.append(time.perf_counter())
        if reply.drip_s or not reply.declare_length or reply.content_length is not None:
            return await self._drip(request, body, reply)
        if reply.body is not None:
            raw = reply.body if isinstance(reply.body, bytes) else reply.body.encode()
            return web.Response(body=raw, status=reply.status, headers=reply.headers, content_type="application/json")
        payload = _completion(body, reply, self.request_count) if reply.status == 200 else _error(reply.status)
        return web.json_response(payload, status=reply.status, headers=reply.headers)

    async def _drip(self, request: web.Request, body: dict[str, Any], reply: Reply) -> web.StreamResponse:
        payload = _completion(body, reply, self.request_count) if reply.status == 200 else _error(reply.status)
        data = reply.body if reply.body is not None else json.dumps(payload)
        data = data if isinstance(data, bytes) else data.encode()
        response = web.StreamResponse(
            status=reply.status, headers={**reply.headers, "Content-Type": "application/json"}
        )
        if reply.declare_length:
            response.content_length = len(data) if reply.content_length is None else reply.content_length
        if reply.content_length is not None:
            response.force_close()
        await response.prepare(request)
        for at in range(0, len(data), reply.chunk_bytes):
            await response.write(data[at : at + reply.chunk_bytes])
            await asyncio.sleep(reply.drip_s)
        await response.write_eof()
        return response

    def _batch_line(self, body: dict[str, Any]) -> dict[str, Any]:
        """A batch line's response: what the chat endpoint would answer to its body."""
        self.batch_requests.append(body)
        reply = self._reply(body)
        payload = _completion(body, reply, len(self.batch_requests)) if reply.status == 200 else _error(reply.status)
        return {"status_code": reply.status, "request_id": f"req_{len(self.batch_requests)}", "body": payload}

    def _reply(self, body: dict[str, Any]) -> Reply:
        answer = self.responder(body)
        reply = answer if isinstance(answer, Reply) else Reply(text=answer)
        if self.faults is None:
            return reply
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        attempt = self._seen[digest]
        self._seen[digest] += 1
        kind = self.faults.pick(digest, attempt)
        return reply if kind is None else self.faults.apply(kind, reply)


def openai_server_fixture(**defaults: Any) -> Any:
    """Build a pytest fixture yielding ``start(**kwargs) -> FakeOpenAIServer``.

    Keyword arguments become defaults for every server the fixture starts; all of
    them are stopped at teardown. Usage in a conftest: ``fake_openai = openai_server_fixture()``.
    """
    import pytest  # only test code calls this, so pytest stays a dev dependency

    @pytest.fixture
    def _servers() -> Iterator[Callable[..., FakeOpenAIServer]]:
        started: list[FakeOpenAIServer] = []

        def start(**kwargs: Any) -> FakeOpenAIServer:
            server = FakeOpenAIServer(**{**defaults, **kwargs}).start()
            started.append(server)
            return server

        try:
            yield start
        finally:
            for server in started:
                server.stop()

    return _servers


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Run a fake OpenAI-compatible server.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--fault-rate", type=float, default=0.0)
    parser.add_argument("--fault-seed", type=int, default=0)
    args = parser.parse_args(argv)
    faults = FaultPlan(rate=args.fault_rate, seed=args.fault_seed) if args.fault_rate > 0 else None
    server = FakeOpenAIServer(latency_s=args.latency_ms / 1000, faults=faults, host=args.host, port=args.port)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with server:
        # The first line tells a parent process where to connect.
        print(server.base_url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()


if __name__ == "__main__":
    main()
