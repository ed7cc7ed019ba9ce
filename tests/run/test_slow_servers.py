"""A slow server, seen from a piped `build-bench` process: requests that outlast timeout_s
are named as such (timeout_s and the time waited) in the progress lines and in the final
error, and a reranker stage's progress moves batch by batch, not only when it ends."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from builder.run.progress import INTERVAL_ENV
from tests.conftest import REPO
from tests.fixtures.scripted_grader import with_grades
from tests.fixtures.scripted_llm import scripted_llm
from tests.support.openai_server import Reply

SLOW = """name: slow
seed: 3
sources: [{type: python_docs, domain: python}]
models:
  gen: {model: scripted, base_url: "BASE", max_concurrency: 1, max_retries: 0, max_reasks: 0, timeout_s: 0.5}
stages:
  - sample_by_length: {buckets: [200, 800, 4000], weights: [1, 1], n_docs: 2}
  - generate_queries: {llm: gen, questions_per_call: 2, calls_per_doc: 1}
  - localize_spans: {llm: gen, questions_per_call: 2}
"""
CONTRAST = """name: contrast
seed: 3
sources: [{type: python_docs, domain: python}]
tokenizer: {kind: words}
models:
  judge: {model: grader, base_url: "BASE", max_concurrency: 1}
rerankers:
  grader: {backend: llm_judge, llm: judge, questions_per_call: 1, batch_size: 2}
stages:
  - sample_by_length: {buckets: [0, 4096], weights: [1], n_docs: 2}
  - generate_queries: {mode: extractive, questions_per_call: 2}
  - localize_spans: {}
  - span_contrast: {rerankers: [grader]}
"""


def _piped_build(recipe: Path, root: Path) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable,
        "-c",
        "from builder.cli import main; main()",
        str(recipe),
        "--run-dir",
        str(root / "runs"),
        "--out",
        str(root / "out"),
    ]
    return subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO), INTERVAL_ENV: "0.1"},
    )


def test_requests_that_outlast_timeout_s_are_named_in_progress_and_the_error(write_recipe, fake_openai, tmp_path):
    srv = fake_openai(responder=lambda body: Reply(text="late", delay_s=5.0))
    done = _piped_build(write_recipe(SLOW.replace("BASE", srv.base_url)), tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert re.search(
        r"02_generate_queries .*attempts timed out \(timeout_s=0\.5 s, the last waited 0\.\d s\)", output
    ), output
    error = next(line for line in done.stderr.splitlines() if line.startswith("error:"))
    assert "every LLM call failed" in error and "timeout_s=0.5 s" in error
    assert re.search(r"the attempt waited \d+\.\d s", error), error


def test_a_reranker_stage_moves_its_progress_batch_by_batch_when_piped(write_recipe, fake_openai, tmp_path):
    srv = fake_openai(responder=with_grades(scripted_llm), latency_s=0.2)
    done = _piped_build(write_recipe(CONTRAST.replace("BASE", srv.base_url)), tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    counts = [int(n) for n in re.findall(r"04_span_contrast contrast with grader: (\d+)/\d+ after", output)]
    assert counts == sorted(counts)
    assert len({n for n in counts if n > 0}) >= 3, output  # three or more batches seen finishing
