"""`build --reask-failed` and `build-bench cache` end to end, against the local server:
a server that answers nonsense, then one that works."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from builder.cli import app
from tests.fixtures.scripted_llm import scripted_llm

RECIPE = """
name: cache_e2e
seed: 3
sources: [{type: python_docs, domain: python}]
models:
  gen: {model: scripted, base_url: "BASE", max_concurrency: 2, max_reasks: 0, backoff_initial_s: 0.01,
        backoff_max_s: 0.05, timeout_s: 2.0}
stages:
  - sample_by_length: {buckets: [200, 800, 4000], weights: [1, 1], n_docs: 4}
  - generate_queries: {llm: gen, questions_per_call: 2, calls_per_doc: 1}
"""
runner = CliRunner()


def _build(recipe: Path, root: Path, *extra: str) -> dict[str, Any]:
    result = runner.invoke(
        app,
        ["build", str(recipe), "--run-dir", str(root / "runs"), "--out", str(root / "out"), "--allow-empty", *extra],
    )
    assert result.exit_code == 0, result.output
    return json.loads((root / "out" / "stats.json").read_text())


def _queries(stats: dict[str, Any]) -> int:
    return int(stats["counts"]["queries"])


def _cache(*args: str) -> Any:
    return runner.invoke(app, ["cache", *args])


def test_failed_answers_are_reasked_on_request_and_the_cache_can_be_cleared(write_recipe, fake_openai, tmp_path):
    working = {"on": False}
    srv = fake_openai(responder=lambda body: scripted_llm(body) if working["on"] else "I cannot answer in JSON.")
    recipe = write_recipe(RECIPE.replace("BASE", srv.base_url))
    runs = tmp_path / "runs"

    assert _queries(_build(recipe, tmp_path)) == 0
    asked = srv.request_count
    shown = _cache(str(runs))
    assert shown.exit_code == 0, shown.output
    assert "scripted" in shown.output and "02_generate_queries" in shown.output
    assert "llm_unparseable" in shown.output and f"{asked} answers" in shown.output
    with sqlite3.connect(runs / "llm_cache.sqlite") as db:
        assert set(db.execute("SELECT base_url FROM answers")) == {(srv.base_url,)}

    working["on"] = True
    assert _queries(_build(recipe, tmp_path, "--fresh")) == 0 and srv.request_count == asked  # cache answers
    reasked = runner.invoke(
        app,
        [
            "build",
            str(recipe),
            "--run-dir",
            str(runs),
            "--out",
            str(tmp_path / "out"),
            "--reask-failed",
            "--allow-empty",
        ],
    )
    assert reasked.exit_code == 0, reasked.output
    # Only the stage whose answers failed runs again; the one before it comes from its checkpoint.
    assert "01_sample_by_length: unchanged, loaded from checkpoint" in reasked.output
    assert "02_generate_queries: unchanged" not in reasked.output
    assert _queries(json.loads((tmp_path / "out" / "stats.json").read_text())) > 0
    assert srv.request_count == 2 * asked
    assert "llm_unparseable" not in _cache(str(runs)).output
    assert _queries(_build(recipe, tmp_path, "--reask-failed")) > 0 and srv.request_count == 2 * asked
    assert _queries(_build(recipe, tmp_path, "--fresh")) > 0 and srv.request_count == 2 * asked

    removed = _cache(str(runs), "--stage", "generate_queries", "--model", "other-model")
    assert removed.exit_code == 0 and "no answers" in removed.output
    removed = _cache(str(runs), "--stage", "generate_queries")
    assert removed.exit_code == 0 and f"{asked} answers" in removed.output and "removed from" in removed.output
    assert "no answers" in _cache(str(runs)).output
    assert (runs / "cache_e2e").is_dir()  # checkpoints are left alone


def test_the_cache_command_refuses_clearly(tmp_path):
    missing = _cache(str(tmp_path))
    assert missing.exit_code == 2 and "no LLM cache" in missing.output
    (tmp_path / "llm_cache.sqlite").write_bytes(b"not a database at all" * 100)
    broken = _cache(str(tmp_path))
    assert broken.exit_code == 2 and "cannot read the LLM cache" in broken.output
    assert (tmp_path / "llm_cache.sqlite").read_bytes() == b"not a database at all" * 100
    bad_kind = _cache(str(tmp_path), "--failed", "sad")
    assert bad_kind.exit_code == 2 and "unknown failure kind 'sad'" in bad_kind.output


def test_a_cache_from_an_older_version_is_shown_and_cleared(tmp_path):
    with sqlite3.connect(tmp_path / "llm_cache.sqlite") as db:
        db.execute(
            "CREATE TABLE answers (key TEXT PRIMARY KEY, text TEXT NOT NULL, prompt_tokens INTEGER NOT NULL,"
            " completion_tokens INTEGER NOT NULL, created_at REAL NOT NULL) WITHOUT ROWID"
        )
        db.executemany("INSERT INTO answers VALUES (?, 'old', 1, 2, 0.0)", [("a",), ("b",)])
    db.close()
    shown = _cache(str(tmp_path))
    assert shown.exit_code == 0 and "(not recorded)" in shown.output and "2 answers" in shown.output
    assert "no answers" in _cache(str(tmp_path), "--failed", "any").output  # nothing was marked
    assert "2 answers removed" in _cache(str(tmp_path), "--all").output
    assert "no answers" in _cache(str(tmp_path)).output


def test_clearing_is_refused_while_a_build_holds_a_run_folder(tmp_path):
    from builder.backends.llm.cache import LLMCache
    from builder.run.locks import FileLock

    runs = tmp_path / "runs"
    LLMCache(runs / "llm_cache.sqlite").close()
    build_lock = FileLock(runs / "cache_e2e" / "0123456789ab" / ".lock", "run folder")
    build_lock.acquire(wait=False)
    try:
        for args in (["--all"], ["--failed", "any"]):
            refused = _cache(str(runs), *args)
            assert refused.exit_code == 2, refused.output
            lines = [line for line in refused.output.splitlines() if line.strip()]
            assert len(lines) == 1, refused.output
            assert "in use" in lines[0] and str(runs / "cache_e2e" / "0123456789ab") in lines[0]
        assert _cache(str(runs)).exit_code == 0  # showing the counts reads only
    finally:
        build_lock.release()
    assert _cache(str(runs), "--all").exit_code == 0
