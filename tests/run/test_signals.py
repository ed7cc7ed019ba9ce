"""SIGINT and SIGTERM sent to a real `build-bench` process, at start-up and while a stage
waits on the model: it exits 130 or 143 within 2 seconds with one line on stderr saying
what is kept and how to resume, and running the same command again resumes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from builder.cli import app
from tests.conftest import REPO
from tests.fixtures.scripted_llm import scripted_llm

RECIPE = """name: signals
seed: 3
sources: [{type: python_docs, domain: python}]
models:
  gen: {model: scripted, base_url: "BASE", max_concurrency: 2, timeout_s: 120}
stages:
  - sample_by_length: {buckets: [200, 800, 4000], weights: [1, 1], n_docs: 4}
  - summarize: {llm: gen}
  - generate_queries: {llm: gen, questions_per_call: 2, calls_per_doc: 1}
  - localize_spans: {llm: gen, questions_per_call: 3}
"""
RESUME = "finished stages and every LLM answer are kept — run the same command again to resume"
# Printed by the child as soon as main() has its handlers in place, so a signal sent on
# seeing it lands in start-up: reading the recipe, importing the stages, preflight.
READY = "child-ready"
CHILD = f"""
import sys
from contextlib import contextmanager
from builder.run import stopping

installed = stopping.stop_on_signals

@contextmanager
def announced():
    with installed():
        print({READY!r}, file=sys.stderr, flush=True)
        yield

stopping.stop_on_signals = announced
from builder.cli import main
main()
"""
EXPECTED = {signal.SIGINT: 130, signal.SIGTERM: 143}
SERVER_LATENCY_S = 60.0


def _spawn(recipe: Path, root: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-c", CHILD, str(recipe), "--run-dir", str(root / "runs"), "--out", str(root / "out")]
    return subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}
    )


def _stop(proc: subprocess.Popen, sig: signal.Signals) -> str:
    """Send `sig`; the stderr of the process, which must end by itself: it is given half the
    time the test server takes to answer, so one that waits for an answer fails here."""
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=SERVER_LATENCY_S / 2)
    finally:
        proc.kill()
    return err


def _stop_lines(err: str) -> list[str]:
    return [
        line
        for line in err.splitlines()
        if "interrupted" in line or "Aborted" in line or "Traceback" in line or "resume" in line
    ]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_a_signal_at_start_up_gives_one_line_and_the_usual_status(sig, fake_openai, write_recipe, tmp_path):
    srv = fake_openai(responder=scripted_llm)
    recipe = write_recipe(RECIPE.replace("BASE", srv.base_url))
    proc = _spawn(recipe, tmp_path)
    assert proc.stderr is not None
    assert proc.stderr.readline().strip() == READY
    err = _stop(proc, sig)
    assert proc.returncode == EXPECTED[sig], err
    assert _stop_lines(err) == [f"interrupted by {sig.name}; {RESUME}"], err
    assert srv.request_count == 0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_a_signal_mid_stage_gives_one_line_and_a_rerun_resumes(sig, fake_openai, write_recipe, tmp_path):
    srv = fake_openai(responder=scripted_llm, latency_s=SERVER_LATENCY_S)  # the stage is in flight
    recipe = write_recipe(RECIPE.replace("BASE", srv.base_url))
    proc = _spawn(recipe, tmp_path)
    deadline = time.monotonic() + 60
    while srv.request_count == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert srv.request_count > 0, "summarize never asked the model"
    err = _stop(proc, sig)
    assert proc.returncode == EXPECTED[sig], err
    assert _stop_lines(err) == [f"interrupted by {sig.name}; {RESUME}"], err
    assert not (tmp_path / "out").exists()
    srv.latency_s = 0.0
    again = CliRunner().invoke(
        app, ["build", str(recipe), "--run-dir", str(tmp_path / "runs"), "--out", str(tmp_path / "out")]
    )
    assert again.exit_code == 0, again.output
    assert "01_sample_by_length: unchanged, loaded from checkpoint" in " ".join(again.output.split())
    assert (tmp_path / "out" / "queries.jsonl").is_file()
