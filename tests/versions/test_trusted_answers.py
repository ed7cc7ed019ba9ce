"""`--from OLD` uses an earlier release's LLM answers only when they are the ones it was
built with: the file's sha256 is recorded in stats.json, checked with its schema before
anything is read into the cache; a build from OLD never writes into OLD."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import polars as pl
import pytest
from click.testing import Result
from typer.testing import CliRunner

from builder.cli import app
from tests.fixtures.scripted_llm import scripted_llm
from tests.support.openai_server import FakeOpenAIServer

RECIPE = """
name: trust_e2e
seed: 3
card: {license: cc-by-4.0}
sources: [{type: python_docs, domain: python}]
models:
  gen: {model: scripted, base_url: "BASE", max_concurrency: 2, max_reasks: 0, backoff_initial_s: 0.01,
        backoff_max_s: 0.05, timeout_s: 2.0}
stages:
  - sample_by_length: {buckets: [200, 800, 4000], weights: [1, 1], n_docs: 4}
  - generate_queries: {llm: gen, questions_per_call: 2, calls_per_doc: 1}
  - localize_spans: {llm: gen, questions_per_call: 2}
"""
ANSWERS = "llm_answers.parquet"
runner = CliRunner()


def _build(recipe: Path, *args: str) -> Result:
    return runner.invoke(app, ["build", str(recipe), *args])


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(responder=scripted_llm) as srv:
        yield srv


@pytest.fixture(scope="module")
def released(server: FakeOpenAIServer, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(recipe, v1): v1 built once, with its own run folder."""
    root = tmp_path_factory.mktemp("v1")
    recipe = root / "recipe.yaml"
    recipe.write_text(RECIPE.replace("BASE", server.base_url), encoding="utf-8")
    done = _build(recipe, "--run-dir", str(root / "runs"), "--out", str(root / "v1"))
    assert done.exit_code == 0, done.output
    return recipe, root / "v1"


@pytest.fixture
def v1(released: tuple[Path, Path], tmp_path: Path) -> Path:
    """A copy of v1 this test may spoil."""
    return Path(shutil.copytree(released[1], tmp_path / "v1"))


def _grow(recipe: Path, v1: Path, tmp_path: Path, *extra: str) -> Result:
    return _build(
        recipe, "--run-dir", str(tmp_path / "runs2"), "--out", str(tmp_path / "v2"), "--from", str(v1), *extra
    )


def _one_line_refusal(done: Result) -> str:
    assert done.exit_code == 2, done.output
    assert isinstance(done.exception, SystemExit)  # said and exited, not raised
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.output
    return lines[0]


def _tamper(v1: Path) -> int:
    """Edit the questions of every generation answer, as the defect report did; returns how many."""
    answers = pl.read_parquet(v1 / ANSWERS)
    edited = answers.with_columns(pl.col("text").str.replace_all('"question": "', '"question": "TAMPERED '))
    edited.write_parquet(v1 / ANSWERS)
    return int((edited["text"] != answers["text"]).sum())


def _record_digest(v1: Path) -> None:
    """Re-record the answers file's digest, so the check reaches the file's contents."""
    stats = json.loads((v1 / "stats.json").read_text())
    stats["llm_answers"]["sha256"] = hashlib.sha256((v1 / ANSWERS).read_bytes()).hexdigest()
    (v1 / "stats.json").write_text(json.dumps(stats))


def test_a_release_records_the_digest_of_its_answers(released: tuple[Path, Path]) -> None:
    _, v1 = released
    recorded = json.loads((v1 / "stats.json").read_text())["llm_answers"]
    assert recorded["file"] == ANSWERS
    assert recorded["sha256"] == hashlib.sha256((v1 / ANSWERS).read_bytes()).hexdigest()
    assert recorded["answers"] == pl.read_parquet(v1 / ANSWERS).height > 0
    assert recorded["sha256"] in (v1 / "README.md").read_text()


def test_an_untouched_release_seeds_the_cache_and_asks_nothing(released, server, tmp_path) -> None:
    recipe, v1 = released
    before = server.request_count
    done = _grow(recipe, v1, tmp_path)
    assert done.exit_code == 0, done.output
    assert server.request_count == before
    assert "new to this cache" in done.stderr


def test_edited_answers_are_refused_in_one_line(released, server, v1, tmp_path) -> None:
    recipe, _ = released
    assert _tamper(v1) > 0
    before = server.request_count
    line = _one_line_refusal(_grow(recipe, v1, tmp_path))
    assert str(v1 / ANSWERS) in line and "sha256" in line and "--reask-unverified" in line
    assert server.request_count == before
    assert not (tmp_path / "v2").exists()


def test_edited_answers_with_reask_unverified_are_ignored_and_asked_again(released, server, v1, tmp_path) -> None:
    recipe, _ = released
    _tamper(v1)
    before = server.request_count
    done = _grow(recipe, v1, tmp_path, "--reask-unverified")
    assert done.exit_code == 0, done.output
    assert "ignored" in done.stderr and str(v1 / ANSWERS) in done.stderr
    assert server.request_count > before  # every answer came from the model again
    queries = pl.read_parquet(tmp_path / "v2" / "queries.parquet")
    assert queries.height > 0 and not queries["text"].str.contains("TAMPERED").any()
    assert b"TAMPERED" not in (tmp_path / "runs2" / "llm_cache.sqlite").read_bytes()


def test_a_release_without_a_recorded_digest_is_refused(released, v1, tmp_path) -> None:
    recipe, _ = released
    stats = json.loads((v1 / "stats.json").read_text())
    del stats["llm_answers"]
    (v1 / "stats.json").write_text(json.dumps(stats))
    line = _one_line_refusal(_grow(recipe, v1, tmp_path))
    assert "stats.json" in line and "--reask-unverified" in line


def _renamed_column(path: Path) -> None:
    pl.read_parquet(path).rename({"text": "answer"}).write_parquet(path)


def _wrong_types(path: Path) -> None:
    pl.read_parquet(path).with_columns(pl.col("prompt_tokens").cast(pl.Utf8)).write_parquet(path)


def _random_bytes(path: Path) -> None:
    path.write_bytes(bytes(range(256)) * 40)


def _cut_in_half(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


SPOILERS: dict[str, Callable[[Path], None]] = {
    "renamed column": _renamed_column,
    "wrong types": _wrong_types,
    "random bytes": _random_bytes,
    "cut in half": _cut_in_half,
}


@pytest.mark.parametrize("recorded", [False, True], ids=["digest as released", "digest re-recorded"])
@pytest.mark.parametrize("spoil", list(SPOILERS), ids=list(SPOILERS))
def test_a_malformed_answers_file_is_one_line_naming_it(released, v1, tmp_path, spoil: str, recorded: bool) -> None:
    recipe, _ = released
    SPOILERS[spoil](v1 / ANSWERS)
    if recorded:
        _record_digest(v1)
    line = _one_line_refusal(_grow(recipe, v1, tmp_path))
    assert str(v1 / ANSWERS) in line


def test_a_malformed_answers_file_with_reask_unverified_is_ignored(released, server, v1, tmp_path) -> None:
    recipe, _ = released
    _cut_in_half(v1 / ANSWERS)
    _record_digest(v1)
    before = server.request_count
    done = _grow(recipe, v1, tmp_path, "--reask-unverified")
    assert done.exit_code == 0, done.output
    assert server.request_count > before


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_growing_into_the_folder_grown_from_is_refused_and_leaves_it_as_it_was(
    released, server, tmp_path, monkeypatch
) -> None:
    """v1 in the recipe's own output folder (the usual case: built without --out), grown
    from without --out, and with --out naming it (spelled another way)."""
    recipe, built = released
    folder = tmp_path / "out" / "trust_e2e"
    shutil.copytree(built, folder)
    before = _files(folder)
    asked = server.request_count
    monkeypatch.chdir(tmp_path)
    for out in ([], ["--out", str(folder)], ["--out", "out/./trust_e2e/"]):
        # v2 samples more documents: a build that wrote here would change v1's files.
        done = _build(
            recipe,
            "--run-dir",
            str(tmp_path / "runs2"),
            "--from",
            "out/trust_e2e",
            "--set",
            "stages.sample_by_length.n_docs=6",
            *out,
        )
        line = _one_line_refusal(done)
        assert "--out out/trust_e2e-v2" in line
    assert _files(folder) == before
    assert server.request_count == asked


def test_a_release_on_the_hub_is_checked_too(released, server, hub, tmp_path) -> None:
    """Grown from a Hub revision: its stats.json comes down with the answers and the digest
    checks out, so nothing is asked again; an edited file pushed later is refused."""
    from rich.console import Console

    from builder.publish.hub import push

    recipe, built = released
    quiet = Console(file=open("/dev/null", "w"))  # noqa: SIM115
    push(built, "org/trust", tag="v1.0.0", console=quiet)
    before = server.request_count
    done = _build(
        recipe,
        "--run-dir",
        str(tmp_path / "runs2"),
        "--out",
        str(tmp_path / "v2"),
        "--from",
        "hf://datasets/org/trust@v1.0.0",
    )
    assert done.exit_code == 0, done.output
    assert "sha256 checked" in done.stderr and server.request_count == before

    edited = Path(shutil.copytree(built, tmp_path / "edited"))
    _tamper(edited)
    push(edited, "org/trust", tag="v1.0.1", console=quiet)
    done = _build(
        recipe,
        "--run-dir",
        str(tmp_path / "runs3"),
        "--out",
        str(tmp_path / "v3"),
        "--from",
        "hf://datasets/org/trust@v1.0.1",
    )
    assert done.exit_code == 2 and "Traceback" not in done.output
    # The lines before are huggingface_hub's download progress.
    assert "is not the file this release shipped" in done.stderr.strip().splitlines()[-1]


def test_reask_unverified_without_from_is_refused(released, tmp_path) -> None:
    recipe, _ = released
    done = _build(recipe, "--run-dir", str(tmp_path / "runs2"), "--out", str(tmp_path / "v2"), "--reask-unverified")
    assert "--from" in _one_line_refusal(done)
    assert not (tmp_path / "v2").exists()
