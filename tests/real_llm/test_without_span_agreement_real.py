"""benchmarks/without_span_agreement.py against SmolLM2-135M on llama-server: every grade
of every layout comes back parseable, and the kappa it prints is reported, not asserted (a
135M model is no judge to trust; the run shows the script works on a real server)."""

from __future__ import annotations

import pytest

from tests.conftest import REPO
from tests.support.llama_server import MODEL_ALIAS
from tests.test_without_span_agreement import _script

pytestmark = pytest.mark.real_llm

SHORT = """
name: short
seed: 13
sources: [{type: python_docs, domain: python-reference}]
tokenizer: {kind: words}
stages:
  - sample_by_length: {buckets: [0, 256, 512], weights: [1, 1], n_docs: 12}
  - generate_queries: {mode: extractive, questions_per_call: 3}
  - localize_spans: {}
"""


@pytest.mark.timeout(1800)
def test_the_agreement_script_runs_on_a_real_model(llama, write_recipe, monkeypatch):
    monkeypatch.chdir(REPO)
    report = _script().main(
        [
            "--base-url",
            llama.base_url,
            "--model",
            MODEL_ALIAS,
            "--recipe",
            str(write_recipe(SHORT)),
            "--pairs",
            "30",
            "--questions-per-call",
            "1",
        ]
    )
    print("\n" + "\n".join(report.lines()))
    assert report.asked == 30
    assert report.failed <= 3, report.verdicts
    assert report.verdict_kappa.n == report.asked - report.failed
