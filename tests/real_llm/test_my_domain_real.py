"""`recipes/my_domain.yaml` built end to end, by the command line, against SmolLM2-135M on
llama-server: a model this small writes poor questions, so what is asserted is that no
answer is lost as unparseable and that the build either writes queries or says which stage
emptied it. Each stage's seconds and yield are printed (run with -s to see them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, require_recipe_extras
from tests.support.llama_server import MODEL_ALIAS

pytestmark = pytest.mark.real_llm

RECIPE = REPO / "recipes" / "my_domain.yaml"
# Documents read from the 40 shipped samples: all of them (about 8 minutes on 2 busy cores);
# BUILD_BENCH_REAL_LLM_DOCS=2 makes a quick local check of it.
LIMIT = int(os.environ.get("BUILD_BENCH_REAL_LLM_DOCS", "40"))
# One request per server slot at a time, and time for a long answer on a busy CPU (a
# request that times out is sent again from the start).
MODEL_SETTINGS = ("base_url", "model", "max_concurrency", "timeout_s")


def _sets(base_url: str) -> list[str]:
    values = {"base_url": base_url, "model": MODEL_ALIAS, "max_concurrency": "2", "timeout_s": "900"}
    sets = [
        arg
        for llm in ("gen", "judge")
        for key in MODEL_SETTINGS
        for arg in ("--set", f"models.{llm}.{key}={values[key]}")
    ]
    # The recipe leaves 4,096 tokens for notes before the JSON; SmolLM2 fills them with
    # repetition, minutes per answer on 2 busy cores. A cut answer is an llm_truncated drop.
    return [*sets, "--set", "models.gen.max_tokens=1024"]


def _stage_records(run_root: Path) -> list[dict[str, Any]]:
    """Every stage's record from the run folder's checkpoints (written whether or not the
    build ends in a result), in stage order."""
    records = [json.loads(p.read_text(encoding="utf-8")) for p in run_root.rglob("stats.json")]
    return sorted(records, key=lambda r: r["stage"])


def _yield_line(record: dict[str, Any]) -> str:
    docs = f"docs {record.get('docs_in')}->{record.get('docs_out')}"
    queries = f"queries {record.get('queries_in')}->{record.get('queries_out')}"
    added = f" (+{record['queries_added']} made)" if record.get("queries_added") else ""
    calls = record.get("llm") or {}
    llm = f"; llm calls {calls.get('calls')}, failures {calls.get('failures')}" if calls else ""
    dropped = f"; dropped {record['dropped']}" if record.get("dropped") else ""
    return f"{record['stage']:<22} {record.get('seconds', 0):7.1f} s  {docs}, {queries}{added}{llm}{dropped}"


@pytest.mark.timeout(1500)
def test_my_domain_builds_against_the_real_model(llama, tmp_path):
    require_recipe_extras(RECIPE)
    env = {k: v for k, v in os.environ.items() if k != "MY_DOCS"}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    out, runs = tmp_path / "out", tmp_path / "runs"
    command = [
        sys.executable,
        "-c",
        "import sys; from builder.cli import main; main(sys.argv[1:])",
        "build",
        str(RECIPE),
        "--limit",
        str(LIMIT),
        "--out",
        str(out),
        "--run-dir",
        str(runs),
        *_sets(llama.base_url),
    ]
    started = time.monotonic()
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=1400)
    seconds = time.monotonic() - started
    records = _stage_records(runs)
    failure = [line for line in done.stderr.splitlines() + done.stdout.splitlines() if "build failed" in line]
    print(f"\nmy_domain --limit {LIMIT} on {MODEL_ALIAS}: exit {done.returncode} after {seconds:.0f} s")
    for record in records:
        print(_yield_line(record))
    print("\n".join(failure) or f"queries written: {(out / 'queries.jsonl').is_file()}")

    assert [r["stage"].split("_", 1)[1] for r in records][:3] == ["load", "sample_by_length", "generate_queries"]
    unparseable = {
        r["stage"]: r["dropped"]["llm_unparseable"] for r in records if r.get("dropped", {}).get("llm_unparseable")
    }
    assert unparseable == {}, f"answers lost as llm_unparseable: {unparseable}"
    if done.returncode == 0:
        assert (out / "queries.jsonl").read_text(encoding="utf-8").strip(), done.stdout[-2000:]
    else:
        assert done.returncode == 1, done.stderr[-2000:]
        assert len(failure) == 1 and " removed the most: " in failure[0], done.stderr[-2000:]
