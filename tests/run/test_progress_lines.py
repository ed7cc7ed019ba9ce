"""Progress a person can follow: piped (no terminal), a slow stage prints done/total and a
rate at least every interval; span_contrast's scoring advances per chunk of pairs, not
0/1 for the whole stage."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from builder.backends.rerankers.windows import PROGRESS_CHUNK, score_windowed
from builder.cli import app
from builder.run.progress import INTERVAL_ENV
from tests.fixtures.scripted_llm import scripted_llm

RECIPE = """name: slow
seed: 3
sources: [{type: python_docs, domain: python}]
models:
  gen: {model: scripted, base_url: "BASE", max_concurrency: 1, timeout_s: 5.0}
stages:
  - sample_by_length: {buckets: [200, 800, 4000], weights: [1, 1], n_docs: 6}
  - summarize: {llm: gen}
"""
LINE = re.compile(r"02_summarize summarizing: (\d+)/6 after \d+ s \((\d+\.\d)/s")


@pytest.mark.timeout(120)
def test_a_slow_piped_stage_prints_done_total_and_rate_every_interval(write_recipe, fake_openai, monkeypatch):
    srv = fake_openai(responder=scripted_llm, latency_s=0.4)  # 6 answers one at a time: about 2.4 s
    recipe = write_recipe(RECIPE.replace("BASE", srv.base_url))
    monkeypatch.setenv(INTERVAL_ENV, "0.3")
    result = CliRunner().invoke(
        app,
        [
            "build",
            str(recipe),
            "--run-dir",
            str(recipe.parent / "runs"),
            "--out",
            str(recipe.parent / "out"),
            "--allow-empty",
        ],
    )
    assert result.exit_code == 0, result.output
    found = [(int(done), float(rate)) for done, rate in LINE.findall(result.output)]
    assert len(found) >= 4, result.output  # about 2.4 s at one line per 0.3 s
    done = [d for d, _ in found]
    assert done == sorted(done) and done[0] < done[-1]  # the count moves between lines
    assert any(rate > 0 for _, rate in found)


class _Counting:
    """A scorer without a window that records how many pairs each call scores."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def score_pairs(self, pairs):
        self.calls.append(len(pairs))
        return [float(len(text)) for _, text in pairs]


def test_scoring_reports_progress_per_chunk_and_scores_alike():
    pairs = [(f"q{i}", "x" * (i % 17)) for i in range(2 * PROGRESS_CHUNK + 5)]
    told: list[int] = []
    scorer = _Counting()
    scores = score_windowed(scorer, pairs, told.append)
    assert told == [PROGRESS_CHUNK, PROGRESS_CHUNK, 5]
    assert scorer.calls == told
    assert scores == score_windowed(_Counting(), pairs)  # one call, same scores


SPENT = re.compile(
    r"02_summarize summarizing: (\d+)/6 after [^;\n]*; LLM spent (\d+) of ~6 calls, "
    r"([\d,]+) of ~([\d,]+) tokens"
)


@pytest.mark.timeout(120)
def test_the_progress_line_shows_spent_against_the_stage_estimate(write_recipe, fake_openai, monkeypatch):
    srv = fake_openai(responder=scripted_llm, latency_s=0.3)
    recipe = write_recipe(RECIPE.replace("BASE", srv.base_url))
    monkeypatch.setenv(INTERVAL_ENV, "0.25")
    result = CliRunner().invoke(
        app,
        [
            "build",
            str(recipe),
            "--run-dir",
            str(recipe.parent / "runs"),
            "--out",
            str(recipe.parent / "out"),
            "--allow-empty",
        ],
    )
    assert result.exit_code == 0, result.output
    found = [tuple(int(x.replace(",", "")) for x in m) for m in SPENT.findall(result.output)]
    assert len(found) >= 3, result.output
    for done, calls, tokens, estimate in found:
        assert calls == done and estimate > 0  # each summary is one call; the plan counted tokens
        assert (tokens > 0) == (calls > 0)
    assert found[-1][1] > found[0][1]


def test_the_spend_text_says_spent_against_estimated():
    from builder.run.spend_meter import spend_text
    from builder.stages.base import Estimate

    assert spend_text(12, 10_234, Estimate(calls=32, prompt_tokens=20_000, completion_tokens=5_000)) == (
        "LLM spent 12 of ~32 calls, 10,234 of ~25,000 tokens"
    )
    assert spend_text(12, 10_234, None) == "LLM spent 12 calls, 10,234 tokens"
