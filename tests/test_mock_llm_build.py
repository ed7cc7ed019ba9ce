"""`build-bench RECIPE --mock-llm`, run as a user runs it: my_domain builds offline on a
CPU, the output says it was built with the mock, push refuses it, and the mock's answers
stay out of the LLM cache and out of a real build's run folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from builder.cli import app
from builder.recipe.model import parse_recipe
from builder.run.runner import Runner, RunOptions
from tests.conftest import FIXTURES, REPO, require_recipe_extras

RECIPE = REPO / "recipes" / "my_domain.yaml"
# 40 ordinary English articles cut to about 180 words each, so the MiniLM scorer reads
# each in one window and the build stays quick on a small CPU.
SHORT_ARTICLES = FIXTURES / "my_domain" / "short_articles.jsonl"


@pytest.mark.timeout(600)  # about a minute alone; a busy shared CPU can triple that
def test_my_domain_builds_offline_with_the_mock_llm_and_push_refuses_it(tmp_path):
    require_recipe_extras(RECIPE)
    env = {**os.environ, "MY_DOCS": str(SHORT_ARTICLES), "HF_HUB_OFFLINE": "1", "COLUMNS": "200"}
    env.pop("BUILD_BENCH_BASE_URL", None)
    command = [sys.executable, "-c", "from builder.cli import main; main()"]
    built = subprocess.run(
        [*command, str(RECIPE), "--mock-llm", "--limit", "30"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    assert "built with the mock LLM" in " ".join(built.stderr.split())

    out = tmp_path / "out" / "my_domain-mock"  # beside, never over, a real build's out/my_domain
    queries = (out / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(queries) >= 10
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert stats["mock_llm"] is True
    assert stats["stages"][2]["llm"]["calls"] == 30  # one generation call per document
    assert "Built with the mock LLM" in (out / "README.md").read_text(encoding="utf-8")
    assert not (tmp_path / "runs" / "llm_cache.sqlite").exists()

    refused = CliRunner().invoke(app, ["push", str(out), "--repo", "someone/my-bench", "--dry-run"])
    assert refused.exit_code == 2
    assert "mock LLM" in refused.output and "--allow-mock" in refused.output

    # `stats` rewrites stats.json: the mark stays.
    assert CliRunner().invoke(app, ["stats", str(out)]).exit_code == 0
    assert json.loads((out / "stats.json").read_text(encoding="utf-8"))["mock_llm"] is True


def test_a_real_build_never_resumes_from_a_mock_builds_checkpoints(tmp_path, monkeypatch):
    require_recipe_extras(RECIPE)
    monkeypatch.setenv("MY_DOCS", str(SHORT_ARTICLES))
    loaded = parse_recipe(RECIPE)
    real = Runner(loaded, RunOptions(run_root=tmp_path))
    mock = Runner(loaded, RunOptions(run_root=tmp_path, mock_llm=True))
    assert real.run_dir != mock.run_dir


def test_a_recipes_push_is_skipped_for_a_mock_build(tmp_path, monkeypatch):
    # No token and no Hub: a push attempt would fail the build.
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    args = [
        "build",
        "quickstart",
        "--out",
        str(tmp_path / "out"),
        "--run-dir",
        str(tmp_path / "runs"),
        "--set",
        "push={repo: someone/bench}",
        "--mock-llm",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "built with the mock LLM" in said and "not pushed to someone/bench" in said
    assert json.loads((tmp_path / "out" / "stats.json").read_text(encoding="utf-8"))["mock_llm"] is True
