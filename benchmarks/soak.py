"""Soak test: kill -9 builds at random moments under injected faults, then check the data.

Against the local OpenAI-compatible test server with 20% of requests spoiled (429, 500,
slow replies, broken HTTP bodies; not the kinds that rewrite answer text, which would
change a free-text summary and so the data itself), each round starts an LLM build in a fresh run
folder, kills it with SIGKILL at a random moment (sometimes twice), checks that the output
folder is never left broken, lets the next run finish, and compares the dataset with a
clean run against a fault-free server. The output folder is shared by all rounds, so a
kill can land while an earlier round's output is being swapped out. Then two builds are
started at the same moment on the same folders: one must finish and the other finish
too or exit 2, and the output must again match the clean run.

    PYTHONPATH=$PWD python benchmarks/soak.py --rounds 10
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.fixtures.scripted_llm import scripted_llm
from tests.support.openai_server import FakeOpenAIServer, FaultPlan

REPO = Path(__file__).resolve().parent.parent
RECIPE = """
name: soak
seed: 5
sources: [{type: python_docs, domain: python}]
models:
  gen: {model: scripted, base_url: "BASE", max_concurrency: 4, backoff_initial_s: 0.01,
        backoff_max_s: 0.05, timeout_s: 5.0, max_retries: 8}
stages:
  - sample_by_length: {buckets: [200, 800, 4000], weights: [1, 1], n_docs: 10}
  - summarize: {llm: gen}
  - generate_queries: {llm: gen, questions_per_call: 2, calls_per_doc: 2}
  - localize_spans: {llm: gen, questions_per_call: 3}
"""
DATA_FILES = (
    "corpus.jsonl",
    "queries.jsonl",
    "qrels/test.tsv",
    "corpus.parquet",
    "queries.parquet",
    "qrels.parquet",
    "drops.parquet",
)


def _data(out: Path) -> dict[str, str] | None:
    """Hashes of the dataset files, or None when the folder is missing or incomplete."""
    if not all((out / name).is_file() for name in DATA_FILES):
        return None
    return {name: hashlib.sha256((out / name).read_bytes()).hexdigest() for name in DATA_FILES}


def _start(recipe: Path, runs: Path, out: Path) -> subprocess.Popen[str]:
    cmd = [
        sys.executable,
        "-c",
        "from builder.cli import main; main()",
        str(recipe),
        "--run-dir",
        str(runs),
        "--out",
        str(out),
    ]
    return subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}
    )


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str]:
    _, err = proc.communicate(timeout=600)
    return proc.returncode, err


def _recipe(folder: Path, base_url: str) -> Path:
    path = folder / f"recipe-{base_url.split(':')[-1].split('/')[0]}.yaml"
    path.write_text(RECIPE.replace("BASE", base_url), encoding="utf-8")
    return path


def _round(
    recipe: Path, work: Path, index: int, clean: dict[str, str], span_s: float, rng: random.Random
) -> dict[str, int]:
    runs, out = work / f"runs{index}", work / "out"
    kills = landed = broken = 0
    for _ in range(rng.choice((1, 1, 2))):
        proc = _start(recipe, runs, out)
        time.sleep(rng.uniform(0.0, span_s))
        kills += 1
        if proc.poll() is None:
            landed += 1
            proc.send_signal(signal.SIGKILL)
        proc.wait()
        if out.exists() and _data(out) != clean:
            broken += 1  # a folder named like the output must be a whole output
    code, err = _finish(_start(recipe, runs, out))
    traceback = int("Traceback" in err)
    same = int(code == 0 and _data(out) == clean)
    return {"kills": kills, "landed": landed, "broken": broken, "same": same, "traceback": traceback}


def _concurrent(recipe: Path, work: Path, clean: dict[str, str]) -> tuple[list[int], bool, bool]:
    runs, out = work / "runs_race", work / "out_race"
    pair = [_start(recipe, runs, out), _start(recipe, runs, out)]
    results = [_finish(p) for p in pair]
    codes = [code for code, _ in results]
    clean_exit = all(code in (0, 2) for code in codes) and 0 in codes
    clean_exit = clean_exit and not any("Traceback" in err for _, err in results)
    return codes, clean_exit, _data(out) == clean


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--fault-rate", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    faults = FaultPlan(rate=args.fault_rate, seed=args.seed, slow_s=0.5, kinds=("429", "500", "slow", "badbody"))
    with (
        tempfile.TemporaryDirectory(prefix="soak-") as tmp,
        FakeOpenAIServer(responder=scripted_llm) as calm,
        FakeOpenAIServer(responder=scripted_llm, faults=faults) as stormy,
    ):
        work = Path(tmp)
        t0 = time.perf_counter()
        code, err = _finish(_start(_recipe(work, calm.base_url), work / "runs_clean", work / "out_clean"))
        span_s = time.perf_counter() - t0
        clean = _data(work / "out_clean")
        if code != 0 or clean is None:
            sys.exit(f"the clean run failed (exit {code}):\n{err}")
        print(f"clean run: {span_s:.1f} s; killing at random moments in [0, {1.2 * span_s:.1f}] s")
        recipe = _recipe(work, stormy.base_url)
        totals = {"kills": 0, "landed": 0, "broken": 0, "same": 0, "traceback": 0}
        for index in range(args.rounds):
            result = _round(recipe, work, index, clean, 1.2 * span_s, rng)
            totals = {k: totals[k] + result[k] for k in totals}
            print(f"round {index + 1}: {result}", flush=True)
        codes, clean_exit, same = _concurrent(recipe, work, clean)
        print(
            f"rounds run: {args.rounds}; kills: {totals['kills']} ({totals['landed']} while running); "
            f"broken outputs seen after a kill: {totals['broken']}; tracebacks: {totals['traceback']}"
        )
        print(f"outputs identical to the clean run after resuming: {totals['same']}/{args.rounds}")
        print(
            f"two concurrent runs: exit codes {codes}, clean exits: {clean_exit}, "
            f"output identical to the clean run: {same}"
        )
        print(f"requests served under faults: {stormy.request_count}; total {time.perf_counter() - t0:.0f} s")
        ok = totals["same"] == args.rounds and not totals["broken"] and clean_exit and same
        sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
