"""The command line as a pipe or a CI log sees it: no terminal, stdout to a pipe, $COLUMNS
unset or 80. Tables must print whole: every word and every figure intact."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import pytest

NARROW = {"COLUMNS": "80"}
UNSET: dict[str, str] = {}


def cli(*args: str, env: dict[str, str] = UNSET, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """build-bench in a child process, stdout and stderr to pipes."""
    base = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "FORCE_COLOR", "TTY_COMPATIBLE")}
    return subprocess.run(
        [sys.executable, "-c", "from builder.cli import main; main()", *args],
        capture_output=True,
        text=True,
        env={**base, **env},
        cwd=cwd,
        timeout=300,
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    root = tmp_path_factory.mktemp("quickstart")
    done = cli("quickstart", "--run-dir", str(root / "runs"), "--out", str(root / "out"), env=NARROW)
    assert done.returncode == 0, done.stderr
    yield root / "out", done.stdout


def test_the_build_summary_prints_whole_words_and_counts(built: tuple[Path, str]) -> None:
    out, summary = built
    for header in ("stage", "docs in→out", "queries in→out", "dropped by reason", "cache hits", "seconds"):
        assert header in summary
    stats = json.loads((out / "stats.json").read_text())
    for stage in stats["stages"]:
        assert stage["stage"] in summary
        for reason, n in stage["dropped"].items():
            assert f"{reason} {n}" in summary


@pytest.mark.parametrize("env", [NARROW, UNSET], ids=["COLUMNS=80", "COLUMNS unset"])
def test_stats_print_whole(built: tuple[Path, str], env: dict[str, str]) -> None:
    out, _ = built
    done = cli("stats", str(out), env=env)
    assert done.returncode == 0, done.stderr
    stats = json.loads((out / "stats.json").read_text())
    for word in ("languages", "domains", "relative position", "256-token buckets (words)"):
        assert word in done.stdout
    assert f"{stats['counts']['queries']}" in done.stdout


def test_eval_figures_are_not_cut(built: tuple[Path, str], tmp_path: Path) -> None:
    out, _ = built
    done = cli(
        "eval", str(out), "-r", "bm25", "--out", str(tmp_path / "eval"), "--cache-dir", str(tmp_path), env=NARROW
    )
    assert done.returncode == 0, done.stderr
    assert "…" not in done.stdout
    for header in ("retriever", "queries", "nDCG@10", "Spearman", "PSI position tag"):
        assert header in done.stdout
    bm25 = json.loads((tmp_path / "eval" / "eval.json").read_text())["retrievers"]["bm25"]
    for figure in (bm25["trend"]["slope"], bm25["trend"]["spearman"]):
        assert f"{figure:.3f}" in done.stdout
    overall = bm25["overall"]["ndcg@10"]
    assert f"{overall['value']:.3f} [{overall['ci_low']:.3f}, {overall['ci_high']:.3f}]" in done.stdout


@pytest.mark.parametrize("env", [NARROW, UNSET], ids=["COLUMNS=80", "COLUMNS unset"])
def test_plan_prints_whole_stage_names(env: dict[str, str]) -> None:
    done = cli("plan", "quickstart", env=env)
    assert done.returncode == 0, done.stderr
    for word in (
        "01_sample_by_length",
        "02_generate_queries",
        "03_localize_spans",
        "completion tokens",
        "Estimates assume no answers already cached and no re-asks",
    ):
        assert word in done.stdout


def test_stages_list_literal_values_and_whole_type_names() -> None:
    done = cli("stages", env=NARROW)
    assert done.returncode == 0, done.stderr
    assert "…" not in done.stdout
    assert "Literal" not in done.stdout
    lines = done.stdout.splitlines()
    balance_column = next(line for line in lines if line.lstrip("│ ").startswith("column "))
    assert "position_tag | chunk_tag | position_bin | char_bucket | length_bucket | requested_position" in (
        balance_column
    )
    assert "list[exact | normalized | fuzzy]" in done.stdout
    assert "ModelRef | None" in done.stdout  # clean_translations' refusal_llm, not cut
    assert "remove 'Here is the translation:' lead-ins" in done.stdout


def test_version_comes_from_the_package_metadata() -> None:
    done = cli("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"build-bench {version('build-bench')}"


def test_a_mistyped_recipe_name_gets_a_suggestion(tmp_path: Path) -> None:
    done = cli("quickstrat", cwd=tmp_path)
    assert done.returncode == 2
    assert "did you mean 'quickstart'?" in done.stderr
    assert "Traceback" not in done.stderr
    far = cli("zzzzzz", cwd=tmp_path)
    assert far.returncode == 2 and "did you mean" not in far.stderr
