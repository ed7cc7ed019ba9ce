"""How full an LLM build keeps its endpoint: a PosIR-style build against the local server.

generate_queries, localize_spans and llm_relevance (with contrast) run over about 60
Python documentation topics, answered by the scripted model and grader of the test
suite behind a fixed latency. The LLM stages' wall time is compared with the ideal
calls × latency ÷ concurrency: a stage that sends its requests in sequential
sub-batches leaves the endpoint idle and falls short of it.

Run from the repository root::

    PYTHONPATH=. python benchmarks/llm_stage_pool.py
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from builder.recipe.model import parse_recipe
from builder.run.runner import Runner, RunOptions
from builder.testing.openai_server import FakeOpenAIServer
from tests.fixtures.scripted_grader import is_grading, with_grades
from tests.fixtures.scripted_llm import scripted_llm

RECIPE = """
name: llm_stage_pool
seed: 3
sources: [{type: python_docs, domain: python}]
models:
  gen: {model: scripted, base_url: "BASE", max_concurrency: CONCURRENCY, timeout_s: 30}
stages:
  - sample_by_length: {buckets: [80, 400, 100000], weights: [1, 1], n_docs: DOCS}
  - generate_queries: {llm: gen, questions_per_call: 2}
  - localize_spans: {llm: gen, questions_per_call: 3}
  - llm_relevance: {llm: gen, min_grade: 1, contrast: true}
"""


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
    return {k: max(t for t in srv.answered if first[k] <= t <= end) - first[k]
            for k, end in zip(kinds, ends)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=60)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    latency = args.latency_ms / 1000
    with FakeOpenAIServer(responder=with_grades(scripted_llm), latency_s=latency) as srv, \
            tempfile.TemporaryDirectory() as tmp:
        text = (RECIPE.replace("BASE", srv.base_url).replace("CONCURRENCY", str(args.concurrency))
                .replace("DOCS", str(args.docs)))
        path = Path(tmp) / "recipe.yaml"
        path.write_text(text, encoding="utf-8")
        start = time.perf_counter()
        result = Runner(parse_recipe(path), RunOptions(run_root=Path(tmp) / "runs", out_dir=Path(tmp) / "out")).run()
        build_s = time.perf_counter() - start
        spans = _spans(srv)
    print(f"{args.docs} documents, {args.latency_ms:g} ms latency, max_concurrency {args.concurrency}")
    total_calls, total_s = 0, 0.0
    for stage in result.stage_stats:
        calls = (stage.llm or {}).get("calls", 0)
        if not calls:
            continue
        ideal = calls * latency / args.concurrency
        busy = spans.get(stage.stage.split("_", 1)[1], float("nan"))
        print(f"  {stage.stage:<22} {calls:>4} calls  stage {stage.seconds:5.2f} s  "
              f"endpoint busy {busy:5.2f} s  ideal {ideal:5.2f} s  ({ideal / stage.seconds:.2f} of ideal)")
        total_calls += calls
        total_s += stage.seconds
    ideal = total_calls * latency / args.concurrency
    busy = sum(spans.values())
    print(f"LLM calls:                 {total_calls} (server saw {srv.request_count})")
    print(f"LLM-stage wall time:       {total_s:.2f} s")
    print(f"calls × latency ÷ conc.:   {ideal:.2f} s")
    print(f"ratio (target ≥ 0.8):      {ideal / total_s:.2f}")
    print(f"endpoint busy:             {busy:.2f} s ({ideal / busy:.2f} of ideal; the rest of a stage's "
          "time is its own work)")
    print(f"whole-build wall time:     {build_s:.2f} s")
    print(f"queries kept:              {result.bench.queries.height}")


if __name__ == "__main__":
    main()
