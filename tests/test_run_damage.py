"""Damaged or wrong state never becomes a finished build: outages are not checkpointed,
empty results fail, changed inputs invalidate downstream checkpoints, damaged
checkpoints are recomputed."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from builder.cli import app
from builder.recipe.model import parse_recipe
from builder.run.runner import Runner, RunOptions
from tests.fixtures.scripted_llm import scripted_llm
from tests.support.openai_server import Reply

runner = CliRunner()
LLM = """name: outage
seed: 3
sources: [{type: python_docs, domain: python}]
models:
  gen: {model: scripted, base_url: "BASE", max_concurrency: 2, backoff_initial_s: 0.01,
        backoff_max_s: 0.02, timeout_s: 2.0, max_retries: 1}
stages:
  - sample_by_length: {buckets: [200, 800, 4000], weights: [1, 1], n_docs: 4}
  - summarize: {llm: gen}
  - generate_queries: {llm: gen, questions_per_call: 2, calls_per_doc: 1}
  - localize_spans: {llm: gen, questions_per_call: 3}
"""
TINY = """name: tiny
seed: 1
sources: [{type: jsonl, path: docs.jsonl}]
tokenizer: {kind: words}
stages:
  - sample_by_length: {buckets: [0, 4096], weights: [1], n_docs: 3}
  - generate_queries: {mode: extractive, questions_per_call: 2}
  - localize_spans: {}
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _build(recipe: Path, *extra: str):
    root = recipe.parent
    return runner.invoke(
        app, ["build", str(recipe), "--run-dir", str(root / "runs"), "--out", str(root / "out"), *extra]
    )


def test_an_outage_is_not_frozen_into_checkpoints(write_recipe, fake_openai):
    port = _free_port()
    base = f"http://127.0.0.1:{port}/v1"
    recipe = write_recipe(LLM.replace("BASE", base))
    down = _build(recipe)
    assert down.exit_code == 1, down.output
    text = " ".join(down.output.split())
    assert "every LLM call failed" in text and "02_summarize removed the most" in text
    assert "last LLM error: llm_failed:" in text and base in text and "Traceback" not in text
    assert not (recipe.parent / "out").exists()
    srv = fake_openai(responder=scripted_llm, port=port)
    up = _build(recipe)
    assert up.exit_code == 0, up.output
    assert srv.request_count > 0
    assert pl.read_parquet(recipe.parent / "out" / "queries.parquet").height > 0


class _Flaky:
    """Fails, every time, the summaries of every other document, in the order they first
    arrive: exactly half of them, whatever the prompts' wording."""

    def __init__(self) -> None:
        self.fails: dict[str, bool] = {}

    def __call__(self, body: dict) -> str | Reply:
        key = json.dumps(body["messages"])
        if "Summarize" in key and self.fails.setdefault(key, len(self.fails) % 2 == 1):
            return Reply(status=503)
        return scripted_llm(body)


def test_a_rerun_retries_exactly_the_requests_that_failed(write_recipe, fake_openai, tmp_path):
    _flaky = _Flaky()
    flaky = fake_openai(responder=_flaky)
    recipe = write_recipe(
        LLM.replace("BASE", flaky.base_url).replace(
            "  - generate_queries: {llm: gen, questions_per_call: 2, calls_per_doc: 1}\n"
            "  - localize_spans: {llm: gen, questions_per_call: 3}\n",
            "",
        )
    )
    options = RunOptions(run_root=tmp_path / "runs", out_dir=tmp_path / "out", allow_empty=True)
    first = Runner(parse_recipe(recipe), options).run()
    failed = {json.dumps(b["messages"]) for b in flaky.requests if _flaky(b) == Reply(status=503)}
    assert 0 < len(failed) < 4
    assert first.stage_stats[2].llm_transport_failures == len(failed)
    flaky.responder = scripted_llm
    before = flaky.request_count
    second = Runner(parse_recipe(recipe), options).run()
    assert flaky.request_count - before == len(failed)
    assert {json.dumps(b["messages"]) for b in flaky.requests[before:]} == failed
    assert second.bench.corpus.height == 4 and second.stage_stats[2].llm_transport_failures is None


def _docs(folder: Path, suffix: str) -> None:
    words = ["river", "castle", "engine", "garden", "market", "violin", "harbor", "forest", "signal"]
    lines = []
    for i in range(4):
        sentences = [
            f"The {words[(i + k) % 9]} number {k} near {words[(i * k) % 9]} was noted in "
            f"chapter {i}{k} of the {suffix} edition."
            for k in range(12)
        ]
        lines.append(json.dumps({"id": f"d{i}", "text": " ".join(sentences)}))
    (folder / "docs.jsonl").write_text("\n".join(lines) + "\n")


def test_a_recomputed_upstream_stage_invalidates_downstream_checkpoints(write_recipe):
    recipe = write_recipe(TINY)
    _docs(recipe.parent, "first")
    assert _build(recipe).exit_code == 0
    _docs(recipe.parent, "second")
    run_dir = next((recipe.parent / "runs" / "tiny").iterdir())
    for stage in run_dir.glob("00_load"):
        stage.rename(run_dir / "gone")  # the load stage is recomputed and now reads new text
    result = _build(recipe)
    assert result.exit_code == 0, result.output
    assert "loaded from checkpoint" not in result.output
    texts = pl.read_parquet(recipe.parent / "out" / "corpus.parquet")["text"].to_list()
    assert texts and all("second" in t for t in texts)


def _garble(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 8] = b"\xff" * 8
    path.write_bytes(bytes(data))


DAMAGE = {
    "empty_parquet": lambda d: (d / "queries.parquet").write_bytes(b""),
    "garbled_parquet": lambda d: _garble(d / "corpus.parquet"),
    "deleted_parquet": lambda d: (d / "qrels.parquet").unlink(),
    "corrupt_stats": lambda d: (d / "stats.json").write_text("{not json"),
    "corrupt_stamp": lambda d: (d / "checkpoint.json").write_text("\x00\x01"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_checkpoint_is_moved_aside_and_recomputed(write_recipe, damage):
    recipe = write_recipe(TINY)
    _docs(recipe.parent, "text")
    assert _build(recipe).exit_code == 0
    out = recipe.parent / "out"
    clean = {p.name: p.read_bytes() for p in out.glob("*.jsonl")}
    stage = next((recipe.parent / "runs" / "tiny").iterdir()) / "02_generate_queries"
    DAMAGE[damage](stage)
    result = _build(recipe)
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    assert "02_generate_queries: checkpoint damaged" in " ".join(result.output.split())
    assert (stage.parent / "02_generate_queries.damaged").is_dir()
    assert "02_generate_queries: unchanged" not in result.output
    assert {p.name: p.read_bytes() for p in out.glob("*.jsonl")} == clean


def test_an_empty_result_fails_unless_allowed(write_recipe):
    recipe = write_recipe(TINY.replace("buckets: [0, 4096]", "buckets: [5000, 9000]"))
    _docs(recipe.parent, "text")
    result = _build(recipe)
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert "0 documents and 0 queries" in text and "01_sample_by_length removed the most: 4" in text
    assert not (recipe.parent / "out").exists()
    allowed = _build(recipe, "--allow-empty")
    assert allowed.exit_code == 0, allowed.output
    assert (recipe.parent / "out" / "corpus.jsonl").read_text() == ""


@pytest.mark.parametrize("damage", ["random bytes", "not keys"])
def test_a_damaged_llm_keys_file_is_recomputed_with_a_warning(write_recipe, fake_openai, damage):
    srv = fake_openai(responder=scripted_llm)
    recipe = write_recipe(
        LLM.replace("BASE", srv.base_url).replace(
            "  - generate_queries: {llm: gen, questions_per_call: 2, calls_per_doc: 1}\n"
            "  - localize_spans: {llm: gen, questions_per_call: 3}\n",
            "",
        )
    )
    root = recipe.parent
    assert _build(recipe, "--allow-empty").exit_code == 0
    keys = next((root / "runs" / "outage").iterdir()) / "02_summarize" / "llm_keys.txt"
    shipped = pl.read_parquet(root / "out" / "llm_answers.parquet")
    keys.write_bytes(b"\xff\xfe\x00garbage" * 40 if damage == "random bytes" else b"{'a': 1}\nnot a key\n")
    asked = srv.request_count
    for attempt in range(2):  # the first rerun repairs; the second finds nothing wrong
        again = runner.invoke(
            app,
            [
                "build",
                str(recipe),
                "--run-dir",
                str(root / "runs"),
                "--out",
                str(root / f"out{attempt}"),
                "--allow-empty",
            ],
        )
        assert again.exit_code == 0, again.output
        assert "Traceback" not in again.output
        warned = "02_summarize: checkpoint damaged" in " ".join(again.output.split())
        assert warned == (attempt == 0), again.output
        assert pl.read_parquet(root / f"out{attempt}" / "llm_answers.parquet").equals(shipped)
    assert srv.request_count == asked  # recomputed from the cache, nothing asked again
