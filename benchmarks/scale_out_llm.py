"""An LLM build on the local executor and on Ray: the same output, and Ray within 10%.

LLM stages against endpoints stay on the driver whatever the executor: one process's
async HTTP client keeps every endpoint full, and the answers land in the driver's cache
as they return. So on Ray the LLM stages should take what they take locally; this
measures that. localize_spans' span matching does go to the executor, so the Ray builds
join one Ray instance started before the first build, as a build joins a running cluster
(`address: auto`); its start is reported apart. generate_queries and localize_spans run
over Python documentation topics, answered by the test suite's scripted model behind a fixed latency; each build
has a fresh cache, and the Ray build a private two-CPU instance.

Run from the repository root::

    PYTHONPATH=. python benchmarks/scale_out_llm.py            # full size
    PYTHONPATH=. python benchmarks/scale_out_llm.py --docs 8   # a quick check
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from builder.recipe.model import parse_recipe
from builder.run.runner import Runner, RunOptions
from tests.fixtures.scripted_llm import scripted_llm
from tests.golden import manifest
from tests.support.openai_server import FakeOpenAIServer

RECIPE = """
name: scale_out_llm
seed: 3
sources: [{type: python_docs, domain: python}]
executor: {kind: local}
models:
  gen: {model: scripted, base_url: "BASE", max_concurrency: CONCURRENCY, timeout_s: 30}
stages:
  - sample_by_length: {buckets: [80, 400, 100000], weights: [1, 1], n_docs: DOCS}
  - generate_queries: {llm: gen, questions_per_call: 2}
  - localize_spans: {llm: gen, questions_per_call: 3}
"""
# The tables a build writes; the card differs on purpose (it names the executor).
TABLES = ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv", "drops.parquet")


def _build(recipe: Path, root: Path, executor: list[str]) -> tuple[float, float, int]:
    """Whole-build seconds, LLM-stage seconds and LLM calls of one build in `root`."""
    start = time.perf_counter()
    result = Runner(parse_recipe(recipe, executor), RunOptions(run_root=root / "runs", out_dir=root / "out")).run()
    build_s = time.perf_counter() - start
    llm = [s for s in result.stage_stats if (s.llm or {}).get("calls")]
    return build_s, sum(s.seconds or 0.0 for s in llm), sum((s.llm or {})["calls"] for s in llm)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=60)
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--num-cpus", type=int, default=2, help="CPUs of the private Ray instance")
    parser.add_argument("--repeats", type=int, default=2, help="builds of each kind, alternating; the best counts")
    args = parser.parse_args(argv)
    import logging

    import ray

    started = time.perf_counter()
    ray.init(num_cpus=args.num_cpus, include_dashboard=False, logging_level=logging.WARNING)
    ray_start_s = time.perf_counter() - started
    builds = {"local": ["executor.kind=local"], "ray": ["executor.kind=ray"]}
    times: dict[str, tuple[float, float, int]] = {}
    outputs: dict[str, dict[str, str]] = {}
    with (
        FakeOpenAIServer(responder=scripted_llm, latency_s=args.latency_ms / 1000) as srv,
        tempfile.TemporaryDirectory() as tmp,
    ):
        recipe = Path(tmp) / "recipe.yaml"
        recipe.write_text(
            RECIPE.replace("BASE", srv.base_url)
            .replace("CONCURRENCY", str(args.concurrency))
            .replace("DOCS", str(args.docs)),
            encoding="utf-8",
        )
        # Alternating, each on a fresh cache: the first build also pays one-off imports.
        for repeat in range(args.repeats):
            for kind, overrides in builds.items():
                root = Path(tmp) / f"{kind}{repeat}"
                took = _build(recipe, root, overrides)
                times[kind] = min(times.get(kind, took), took, key=lambda t: t[1])
                outputs[kind] = manifest(root / "out", srv.base_url)
    local, ray = outputs["local"], outputs["ray"]
    same = all(t in local and local[t] == ray.get(t) for t in TABLES)
    print(
        f"{args.docs} documents, {args.latency_ms:g} ms latency, max_concurrency {args.concurrency}, "
        f"Ray with {args.num_cpus} CPUs (started in {ray_start_s:.1f} s, not counted), best of {args.repeats}"
    )
    for kind, (build_s, llm_s, calls) in times.items():
        print(f"  {kind:<5}  LLM stages {llm_s:6.2f} s ({calls} calls)  whole build {build_s:6.2f} s")
    ratio = times["ray"][1] / times["local"][1]
    print(f"Ray / local, LLM stages:   {ratio:.2f} (target ≤ 1.10)")
    print(f"Ray / local, whole build:  {times['ray'][0] / times['local'][0]:.2f}")
    print(f"identical tables:          {'yes' if same else 'NO'}")
    if not same:
        raise SystemExit("the Ray build wrote different tables from the local one")


if __name__ == "__main__":
    main()
