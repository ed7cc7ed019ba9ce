"""Wall time of a rerun with nothing to do, and of `build-bench --help`.

Builds a recipe (the quickstart by default) once in a temporary folder, then times
fresh `build-bench` processes: the rerun (every stage cached, output current; target
<= 1.0 s) and `--help` (target <= 0.3 s). benchmarks/startup.py times both beside an
earlier release. Each figure is the median of --repeat runs, with the slowest
beside it, since a shared machine adds noise.

`--llm-build` times the build of `llm_stage_pool.py` instead (60 Python documentation
topics through generate_queries, localize_spans and llm_relevance): this script serves
the scripted model at --latency-ms on 127.0.0.1 for the first build; the reruns ask it
nothing. It imports the test fixtures, so run it from the repository root with
PYTHONPATH=. set.

    python benchmarks/idle_rerun.py [--recipe quickstart] [--repeat 5]
    PYTHONPATH=. python benchmarks/idle_rerun.py --llm-build [--latency-ms 200]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _cli(args: list[str], cwd: Path) -> float:
    """Seconds one `build-bench` process takes, from start to exit."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    code = "import sys\nfrom builder.cli import main\nmain(sys.argv[1:])"
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"build-bench {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return elapsed


def _report(name: str, times: list[float], target: float | None = None) -> None:
    goal = f" (target <= {target:.1f} s)" if target is not None else ""
    print(f"{name:<8} median {statistics.median(times):.3f} s, slowest {max(times):.3f} s over {len(times)} runs{goal}")


@contextlib.contextmanager
def _llm_build(work: Path, latency_ms: float) -> Iterator[tuple[str, Callable[[], int]]]:
    """The llm_stage_pool recipe, written into `work`, and how many requests its server
    (running meanwhile) has answered."""
    sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
    from llm_stage_pool import recipe_text

    from tests.fixtures.scripted_grader import with_grades
    from tests.fixtures.scripted_llm import scripted_llm
    from tests.support.openai_server import FakeOpenAIServer

    with FakeOpenAIServer(responder=with_grades(scripted_llm), latency_s=latency_ms / 1000) as srv:
        path = work / "llm_stage_pool.yaml"
        path.write_text(recipe_text(srv.base_url), encoding="utf-8")
        yield str(path), lambda: srv.request_count


def _no_requests() -> int:
    return 0  # a recipe without an LLM server asks nothing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recipe", default="quickstart", help="recipe file or shipped recipe name")
    parser.add_argument("--llm-build", action="store_true", help="the llm_stage_pool build against a local server")
    parser.add_argument("--latency-ms", type=float, default=200.0, help="with --llm-build: the server's latency")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        work = Path(tmp)
        requests: Callable[[], int] = _no_requests
        if args.llm_build:
            recipe, requests = stack.enter_context(_llm_build(work, args.latency_ms))
        else:
            recipe = str(Path(args.recipe).resolve()) if Path(args.recipe).is_file() else args.recipe
        build = ["build", recipe, "--run-dir", "runs", "--out", "out"]
        first = _cli(build, work)
        print(f"first build {first:.3f} s")
        asked = requests()
        out = work / "out"
        marker = (out / ".build-bench").stat().st_mtime_ns
        reruns = [_cli(build, work) for _ in range(args.repeat)]
        untouched = (out / ".build-bench").stat().st_mtime_ns == marker
        rerun_requests = requests() - asked
        helps = [_cli(["--help"], work) for _ in range(args.repeat)]
    _report("rerun", reruns, 1.0)
    print(f"         output folder left untouched: {untouched}")
    if args.llm_build:
        print(f"         LLM requests: {asked} in the first build, {rerun_requests} in the reruns")
    _report("--help", helps, 0.3)


if __name__ == "__main__":
    main()
