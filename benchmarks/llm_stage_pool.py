"""How full an LLM build keeps its endpoint: a PosIR-style build against the local server.

generate_queries, localize_spans and llm_relevance (with contrast) run over about 60
Python documentation topics, answered by the scripted model and grader of the test
suite behind a fixed latency. The LLM stages' wall time is compared with the ideal
calls × latency ÷ concurrency: a stage that sends its requests in sequential
sub-batches leaves the endpoint idle and falls short of it.

Two more yardsticks are printed beside it. A stage cannot finish in fewer than
ceil(calls ÷ concurrency) latencies (the last round waits a full latency however few
requests it holds), so "whole rounds" is the floor any client meets at best. And the
first LLM stage of a process waits for the `openai` SDK to import (about half a second
of interpreter time here) unless loading the corpus took longer: the time the stages
spent starting their clients is shown apart.

`--corpus FILE` samples the documents from a jsonl file (`id`, `text`), as a PosIR-style
build samples a crawl, instead of the CPython documentation topics; with the FineWeb
sample in ../shared/data the load and length count run about as long as the import.

Run from the repository root::

    PYTHONPATH=. python benchmarks/llm_stage_pool.py
    PYTHONPATH=. python benchmarks/llm_stage_pool.py --corpus ../shared/data/fineweb_sample/fineweb_10bt_docs_1000.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any

from builder.recipe.model import parse_recipe
from builder.run.runner import Runner, RunOptions
from tests.fixtures.scripted_grader import is_grading, with_grades
from tests.fixtures.scripted_llm import scripted_llm
from tests.support.openai_server import FakeOpenAIServer

RECIPE = """
name: llm_stage_pool
seed: 3
sources: [SOURCE]
models:
  gen: {model: scripted, base_url: "BASE", max_concurrency: CONCURRENCY, timeout_s: 30}
stages:
  - sample_by_length: {buckets: BUCKETS, weights: [1, 1], n_docs: DOCS}
  - generate_queries: {llm: gen, questions_per_call: 2}
  - localize_spans: {llm: gen, questions_per_call: 3}
  - llm_relevance: {llm: gen, min_grade: 1, contrast: true}
"""


def recipe_text(base_url: str, concurrency: int = 16, docs: int = 60, corpus: Path | None = None) -> str:
    """The benchmark recipe against `base_url`: CPython doc topics, or a jsonl corpus."""
    if corpus is None:
        source, buckets = "{type: python_docs, domain: python}", "[80, 400, 100000]"
    else:
        source = json.dumps({"type": "jsonl", "path": str(corpus.resolve()), "lang": "en", "domain": "web"})
        buckets = "[300, 1000, 100000]"
    return (
        RECIPE.replace("BASE", base_url)
        .replace("CONCURRENCY", str(concurrency))
        .replace("DOCS", str(docs))
        .replace("SOURCE", source)
        .replace("BUCKETS", buckets)
    )


def _kind(body: dict) -> str:
    """Which stage sent a request, read from its prompt."""
    if is_grading(body):
        return "llm_relevance"
    first_user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return "localize_spans" if "<questions>" in first_user else "generate_queries"


def _spans(srv: FakeOpenAIServer) -> dict[str, float]:
    """Per stage: seconds from its first request's arrival to its last request's answer."""
    first: dict[str, float] = {}
    for body, at in zip(srv.requests, srv.arrived):
        first.setdefault(_kind(body), at)
    kinds = sorted(first, key=first.get)
    ends = [*(first[k] for k in kinds[1:]), float("inf")]
    return {k: max(t for t in srv.answered if first[k] <= t <= end) - first[k] for k, end in zip(kinds, ends)}


def _timed_client_start(runner: Runner) -> list[float]:
    """Seconds each model's first `llm()` call took (the SDK import, when a stage waited
    for it, and building the client); the stages reach their backends through it."""
    spent: list[float] = []
    factory = runner.backends.llm
    started: set[str] = set()

    def llm(name: str) -> Any:
        if name in started:
            return factory(name)
        t0 = time.perf_counter()
        backend = factory(name)
        spent.append(time.perf_counter() - t0)
        started.add(name)
        return backend

    runner.backends.llm = llm  # type: ignore[method-assign]
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=60)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--corpus", type=Path, help="jsonl with id and text (default: CPython doc topics)")
    args = parser.parse_args()
    latency = args.latency_ms / 1000
    with (
        FakeOpenAIServer(responder=with_grades(scripted_llm), latency_s=latency) as srv,
        tempfile.TemporaryDirectory() as tmp,
    ):
        path = Path(tmp) / "recipe.yaml"
        path.write_text(recipe_text(srv.base_url, args.concurrency, args.docs, args.corpus), encoding="utf-8")
        runner = Runner(parse_recipe(path), RunOptions(run_root=Path(tmp) / "runs", out_dir=Path(tmp) / "out"))
        client_start = _timed_client_start(runner)
        start = time.perf_counter()
        result = runner.run()
        build_s = time.perf_counter() - start
        spans = _spans(srv)
    print(f"{args.docs} documents, {args.latency_ms:g} ms latency, max_concurrency {args.concurrency}")
    total_calls, total_s, rounds = 0, 0.0, 0
    for stage in result.stage_stats:
        calls = (stage.llm or {}).get("calls", 0)
        if not calls:
            continue
        ideal = calls * latency / args.concurrency
        busy = spans.get(stage.stage.split("_", 1)[1], float("nan"))
        print(
            f"  {stage.stage:<22} {calls:>4} calls  stage {stage.seconds:5.2f} s  "
            f"endpoint busy {busy:5.2f} s  ideal {ideal:5.2f} s  ({ideal / stage.seconds:.2f} of ideal)"
        )
        total_calls += calls
        total_s += stage.seconds
        rounds += math.ceil(calls / args.concurrency)
    ideal = total_calls * latency / args.concurrency
    busy = sum(spans.values())
    print(f"LLM calls:                 {total_calls} (server saw {srv.request_count})")
    print(f"LLM-stage wall time:       {total_s:.2f} s")
    print(f"calls × latency ÷ conc.:   {ideal:.2f} s")
    print(f"ratio (target ≥ 0.8):      {ideal / total_s:.2f}")
    floor = rounds * latency
    print(f"whole rounds:              {rounds} × latency = {floor:.2f} s ({floor / total_s:.2f} of it reached)")
    started = sum(client_start)
    print(
        f"starting the LLM client:   {started:.2f} s (what the load left of the SDK import, and building the client); "
        f"without it {ideal / (total_s - started):.2f} of ideal"
    )
    print(
        f"endpoint busy:             {busy:.2f} s ({ideal / busy:.2f} of ideal; the rest of a stage's "
        "time is its own work)"
    )
    print(f"whole-build wall time:     {build_s:.2f} s")
    print(f"queries kept:              {result.bench.queries.height}")


if __name__ == "__main__":
    main()
