"""Throughput of OpenAIBackend beside a raw-aiohttp floor and plain AsyncOpenAI, all
against one local fake server in the same run, then of a full cache replay.

Run from the repo root: ``python benchmarks/llm_throughput.py``. The server runs as its
own process so that client and server do not share one interpreter (and one GIL), so the
CPU time printed per request is the client's alone.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import aiohttp
import openai

from builder.backends.llm import ChatRequest, LLMCache, OpenAIBackend, OpenAIModelConfig

_MODEL = "bench"


def _start_server(latency_ms: float) -> tuple[subprocess.Popen[str], str]:
    cmd = [sys.executable, "-m", "tests.support.openai_server", "--port", "0", "--latency-ms", str(latency_ms)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def _served(base_url: str) -> int:
    """Requests the server has received so far, this query included."""
    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/stats") as response:
        return int(json.load(response)["request_count"])


def _messages(n: int) -> list[list[dict[str, str]]]:
    return [[{"role": "user", "content": f"benchmark question number {i}"}] for i in range(n)]


async def _floor(base_url: str, messages: list[list[dict[str, str]]], concurrency: int) -> int:
    """Raw aiohttp with a pool as wide as the concurrency: what any client can hope for."""
    slots = asyncio.Semaphore(concurrency)
    headers = {"Authorization": "Bearer sk-local", "Content-Type": "application/json"}
    url = base_url + "/chat/completions"
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(chat: list[dict[str, str]]) -> bool:
            body = json.dumps({"model": _MODEL, "messages": chat, "temperature": 0.0, "max_tokens": 1024})
            async with slots, session.post(url, data=body, headers=headers) as response:
                data = json.loads(await response.read())
            return bool(data["choices"][0]["message"]["content"])

        answers = await asyncio.gather(*(one(m) for m in messages))
    return answers.count(False)


async def _plain_openai(base_url: str, messages: list[list[dict[str, str]]], concurrency: int) -> int:
    """AsyncOpenAI as its README shows it, bounded to the same concurrency."""
    slots = asyncio.Semaphore(concurrency)
    async with openai.AsyncOpenAI(api_key="sk-local", base_url=base_url, max_retries=0) as client:

        async def one(chat: list[dict[str, str]]) -> bool:
            async with slots:
                completion = await client.chat.completions.create(
                    model=_MODEL,
                    messages=chat,
                    temperature=0.0,
                    max_tokens=1024,  # type: ignore[arg-type]
                )
            return bool(completion.choices[0].message.content)

        answers = await asyncio.gather(*(one(m) for m in messages))
    return answers.count(False)


def _timed(run: Callable[[], int]) -> tuple[float, float, int]:
    """Wall seconds, client CPU seconds and failures of one run."""
    wall, cpu = time.perf_counter(), time.process_time()
    failed = run()
    return time.perf_counter() - wall, time.process_time() - cpu, failed


def _line(name: str, n: int, timing: tuple[float, float, int], floor_s: float | None) -> None:
    wall, cpu, failed = timing
    ratio = "" if floor_s is None else f", {floor_s / wall:.3f} of the floor"
    print(
        f"{name:<12} {wall:6.3f} s = {n / wall:5.0f} req/s, client CPU {1000 * cpu / n:.3f} ms/request"
        f"{ratio} ({failed} failed)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=2000, help="distinct requests")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    args = parser.parse_args()

    n, width = args.n, args.concurrency
    messages = _messages(n)
    requests = [ChatRequest.of(m) for m in messages]
    server, base_url = _start_server(args.latency_ms)
    try:
        floor = _timed(lambda: asyncio.run(_floor(base_url, messages, width)))
        plain = _timed(lambda: asyncio.run(_plain_openai(base_url, messages, width)))
        with tempfile.TemporaryDirectory() as tmp:
            config = OpenAIModelConfig(model=_MODEL, base_url=base_url, max_concurrency=width)
            with OpenAIBackend("bench", config, LLMCache(Path(tmp) / "llm.sqlite")) as backend:
                live = _timed(lambda: sum(a.text is None for a in backend.chat_many(requests)))
                before = _served(base_url)
                replay = _timed(lambda: sum(a.text is None for a in backend.chat_many(requests)))
                sent = _served(base_url) - before - 1  # less the first /stats query

        ideal = n * args.latency_ms / 1000 / width
        print(f"{n} requests, concurrency {width}, {args.latency_ms:g} ms latency; ideal {ideal:.3f} s")
        _line("raw aiohttp", n, floor, None)
        _line("AsyncOpenAI", n, plain, floor[0])
        _line("build-bench", n, live, floor[0])
        print(
            f"build-bench / floor = {floor[0] / live[0]:.3f} (target >= 0.90); "
            f"ideal / build-bench = {ideal / live[0]:.3f}"
        )
        print(
            f"replay: {n} calls in {replay[0]:.3f} s = {n / replay[0]:.0f} calls/s (target >= 5000); "
            f"requests that reached the server: {sent} ({replay[2]} failed)"
        )
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
