"""Signals in the first instants of a `build-bench` process: SIGINT or SIGTERM sent while
the command line is still being imported ends it like a later one, with the one stop line
and exit status 130 or 143 (the console script installs its handlers before the slow
imports); and a file-size limit (`ulimit -f`) ends a build in one line, as a full disk does."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO

RECIPE = """name: early
seed: 3
sources: [{type: python_docs, domain: python}]
tokenizer: {kind: words}
stages:
  - sample_by_length: {buckets: [0, 4096], weights: [1], n_docs: 4}
  - generate_queries: {mode: extractive, questions_per_call: 2}
  - localize_spans: {}
"""
RESUME = "finished stages and every LLM answer are kept — run the same command again to resume"
READY = "child-ready"
# The console script's own entry point, told to announce when its handlers are in place
# (and whether the command line is imported yet) so the test can signal at that instant.
CHILD = f"""
import sys
from contextlib import contextmanager
from builder.run import stopping

installed = stopping.stop_on_signals

@contextmanager
def announced():
    with installed():
        print({READY!r}, "cli-imported" if "builder.cli.commands" in sys.modules else "cli-not-imported",
              file=sys.stderr, flush=True)
        yield

stopping.stop_on_signals = announced
from builder.cli import main
main()
"""
EXPECTED = {signal.SIGINT: 130, signal.SIGTERM: 143}


@pytest.mark.parametrize("after_s", [0.0, 0.4, 1.0])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_during_start_up_imports_gives_the_stop_line_and_status(tmp_path, signum, after_s):
    recipe = tmp_path / "early.yaml"
    recipe.write_text(RECIPE, encoding="utf-8")
    cmd = [
        sys.executable,
        "-c",
        CHILD,
        str(recipe),
        "--run-dir",
        str(tmp_path / "runs"),
        "--out",
        str(tmp_path / "out"),
    ]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}
    )
    assert proc.stderr is not None
    first = proc.stderr.readline()
    assert first.startswith(READY), first
    if after_s == 0.0:
        assert "cli-not-imported" in first  # the signal below lands before the slow imports
    time.sleep(after_s)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == EXPECTED[signum], (proc.returncode, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[-1] == f"interrupted by {signal.Signals(signum).name}; {RESUME}", err
    assert "Traceback" not in err and "Aborted" not in err


def _limit_files(limit: int):
    def preexec() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # as a shell with `ulimit -f` does not kill on it

    return preexec


def test_a_file_size_limit_ends_a_build_in_one_line(tmp_path):
    recipe = tmp_path / "early.yaml"
    recipe.write_text(RECIPE, encoding="utf-8")
    cmd = [
        sys.executable,
        "-c",
        "from builder.cli import main; main()",
        str(recipe),
        "--run-dir",
        str(tmp_path / "runs"),
        "--out",
        str(tmp_path / "out"),
    ]
    done = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_limit_files(4096),
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "file-size limit of 4.0 KiB" in errors[0] and "ulimit -f" in errors[0], done.stderr
    assert not (tmp_path / "out").exists()
