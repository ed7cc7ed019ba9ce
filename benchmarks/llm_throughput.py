"""Throughput of OpenAIBackend against a local fake server, then of a full cache replay.

Run from the repo root: ``python benchmarks/llm_throughput.py``. The server runs as its
own process so that client and server do not share one interpreter (and one GIL).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from builder.backends.llm import ChatRequest, LLMCache, OpenAIBackend, OpenAIModelConfig


def _start_server(latency_ms: float) -> tuple[subprocess.Popen[str], str]:
    cmd = [sys.executable, "-m", "builder.testing.openai_server", "--port", "0", "--latency-ms", str(latency_ms)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def _served(base_url: str) -> int:
    """Requests the server has received so far, this query included."""
    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/stats") as response:
        return int(json.load(response)["request_count"])


def _requests(n: int) -> list[ChatRequest]:
    return [ChatRequest.of([{"role": "user", "content": f"benchmark question number {i}"}]) for i in range(n)]


def _run(backend: OpenAIBackend, requests: list[ChatRequest]) -> tuple[float, int]:
    start = time.perf_counter()
    answers = backend.chat_many(requests)
    return time.perf_counter() - start, sum(a.text is None for a in answers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=2000, help="distinct requests")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    args = parser.parse_args()

    server, base_url = _start_server(args.latency_ms)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            config = OpenAIModelConfig(model="bench", base_url=base_url, max_concurrency=args.concurrency)
            with OpenAIBackend("bench", config, LLMCache(Path(tmp) / "llm.sqlite")) as backend:
                requests = _requests(args.n)
                elapsed, failed = _run(backend, requests)
                ideal = args.n * args.latency_ms / 1000 / args.concurrency
                print(f"live:   {args.n} requests in {elapsed:.3f} s = {args.n / elapsed:.0f} req/s ({failed} failed)")
                print(f"        ideal {ideal:.3f} s, ratio ideal/actual = {ideal / elapsed:.3f} (target >= 0.90)")

                before = _served(base_url)
                elapsed, failed = _run(backend, requests)
                sent = _served(base_url) - before - 1  # less the first /stats query
                print(f"replay: {args.n} calls in {elapsed:.3f} s = {args.n / elapsed:.0f} calls/s (target >= 5000)")
                print(f"        requests that reached the server: {sent} ({failed} failed)")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
