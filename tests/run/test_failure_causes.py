"""Every failed LLM request carries its cause: a build against a real server on 127.0.0.1
that answers every request with something unusable (too big, HTML, invalid UTF-8, JSON
nested too deeply or of the wrong shape, a lying Content-Length, a gzip bomb, garbage) ends
with a message naming what was wrong, and the drops table and stats.json name it too,
with the drop reason still `llm_failed` so that failures stay countable."""

from __future__ import annotations

import gzip
import json

import polars as pl
import pytest
from typer.testing import CliRunner

from builder.cli import app
from tests.support.openai_server import Reply

RECIPE = """
name: causes
seed: 3
sources: [{type: python_docs, domain: python}]
models:
  gen: {model: scripted, base_url: "BASE", max_concurrency: 2, max_reasks: 0, max_retries: 1,
        backoff_initial_s: 0.01, backoff_max_s: 0.05, timeout_s: 5.0, max_reply_bytes: 65536}
stages:
  - sample_by_length: {buckets: [200, 800, 4000], weights: [1, 1], n_docs: 2}
  - generate_queries: {llm: gen, questions_per_call: 2, calls_per_doc: 1}
  - localize_spans: {llm: gen, questions_per_call: 2}
"""
runner = CliRunner()
_ZEROS = gzip.compress(b"0" * 2_000_000)

CASES = {
    "oversized": (Reply(text="y" * 200_000), "over max_reply_bytes 65,536"),
    "html": (Reply(body="<!DOCTYPE html><html><body>502 Bad Gateway</body></html>"), "HTML page instead of JSON"),
    "utf8": (Reply(body=b'{"choices": [{"message": {"content": "\xff\xfe"}}]}'), "invalid UTF-8 in reply"),
    "nested": (Reply(body="[" * 20_000 + "]" * 20_000), "JSON nested too deeply"),
    "shape": (Reply(body='{"choices": "none"}'), "reply not in the expected shape: choices is not a list"),
    "length": (Reply(body='{"choices": []}', content_length=500), "Content-Length mismatch"),
    "gzip_bomb": (Reply(body=_ZEROS, headers={"Content-Encoding": "gzip"}), "compressed reply"),
    "garbage": (Reply(body="%%% no json here"), "reply is not JSON"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_failed_build_names_the_cause_in_its_message_drops_and_stats(case, write_recipe, fake_openai, tmp_path):
    reply, cause = CASES[case]
    srv = fake_openai(responder=lambda body: reply)
    recipe = write_recipe(RECIPE.replace("BASE", srv.base_url))
    failed = runner.invoke(
        app, ["build", str(recipe), "--run-dir", str(tmp_path / "runs"), "--out", str(tmp_path / "out")]
    )
    assert failed.exit_code == 1, failed.output
    assert "every LLM call failed" in failed.output and cause in failed.output, failed.output
    assert "Traceback" not in failed.output

    kept = runner.invoke(
        app,
        ["build", str(recipe), "--run-dir", str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--allow-empty"],
    )
    assert kept.exit_code == 0, kept.output
    drops = pl.read_parquet(tmp_path / "out" / "drops.parquet").filter(pl.col("reason") == "llm_failed")
    assert drops.height > 0 and "cause" in drops.columns
    assert all(cause in text for text in drops["cause"].to_list()), drops
    stats = json.loads((tmp_path / "out" / "stats.json").read_text(encoding="utf-8"))
    stage = next(s for s in stats["stages"] if s["stage"].endswith("generate_queries"))
    assert stage["dropped"].get("llm_failed", 0) > 0 or stage["llm"]["failures"] > 0
    assert any(cause in c for c in stage["llm"]["failure_causes"]), stage["llm"]
