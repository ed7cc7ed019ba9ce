"""`build-bench push` against a fake Hub on 127.0.0.1 (see fake_hub.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import huggingface_hub.constants
import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from builder.publish.beir import write_beir
from builder.publish.cli import push_command
from builder.publish.hub import PushError, push
from builder.publish.outputs import publish_outputs
from tests.publish.conftest import TOKEN, mini_bench, mini_run_stats

REPO = "org/bench"
EXPECTED = [
    "CHANGELOG.md",
    "README.md",
    "corpus.jsonl",
    "corpus/en/law.parquet",
    "corpus/en/web.parquet",
    "corpus/zh/web.parquet",
    "documents/en/law.parquet",
    "documents/en/web.parquet",
    "documents/zh/web.parquet",
    "drops.parquet",
    "plots/length_histogram.png",
    "plots/position_by_length.png",
    "plots/position_histogram.png",
    "positions/en/law.parquet",
    "positions/en/web.parquet",
    "positions/zh/web.parquet",
    "qrels/en/law.parquet",
    "qrels/en/web.parquet",
    "qrels/test.tsv",
    "qrels/zh/web.parquet",
    "queries.jsonl",
    "queries/en/law.parquet",
    "queries/en/web.parquet",
    "queries/zh/web.parquet",
    "stats.json",
]


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = write_beir(mini_bench(), tmp_path_factory.mktemp("hub") / "mini", stats=mini_run_stats())
    publish_outputs(mini_bench(), folder, mini_run_stats(), None)
    card = folder / "README.md"
    card.write_text(card.read_text(encoding="utf-8").replace("license: unknown", "license: mit", 1), encoding="utf-8")
    return folder


@pytest.fixture
def folder(published: Path, tmp_path: Path) -> Path:
    """A fresh copy per test, since some tests change it."""
    return Path(shutil.copytree(published, tmp_path / "mini"))


def quiet() -> Console:
    return Console(file=open("/dev/null", "w"), width=200)  # noqa: SIM115 - closed with the process


def test_first_push_creates_the_repo_commits_everything_once_and_tags(hub, folder):
    result = push(folder, REPO, private=True, tag="v0.1.0", console=quiet())
    repo = hub.repos[REPO]
    assert repo.private
    assert len(repo.commits) == 1 and repo.commits[0]["message"] == "Release v0.1.0"
    assert sorted(repo.commits[0]["files"]) == EXPECTED == result.files
    assert repo.tags == {"v0.1.0": repo.commits[0]["oid"]}
    changelog = repo.commits[0]["files"]["CHANGELOG.md"].decode()
    assert "## v0.1.0" in changelog and "First release: 4 documents, 5 queries, 5 qrels." in changelog
    # the token authenticates requests but is never written into what is published
    assert f"Bearer {TOKEN}" in hub.auth_headers
    assert all(TOKEN.encode() not in blob for blob in repo.commits[0]["files"].values())
    assert all(TOKEN.encode() not in p.read_bytes() for p in folder.rglob("*") if p.is_file())


def test_second_version_diffs_its_statistics_against_the_previous_tag(hub, folder):
    push(folder, REPO, tag="v0.1.0", console=quiet())
    stats = json.loads((folder / "stats.json").read_text())
    stats["counts"]["queries"] = 7
    stats["positions"]["tags"]["end"] = 4
    (folder / "stats.json").write_text(json.dumps(stats))
    (folder / "plots" / "position_by_length.png").unlink()  # gone in this release
    push(folder, REPO, tag="v0.2.0", console=quiet())
    repo = hub.repos[REPO]
    assert list(repo.tags) == ["v0.1.0", "v0.2.0"] and len(repo.commits) == 2
    changelog = repo.commits[1]["files"]["CHANGELOG.md"].decode()
    assert changelog.index("## v0.2.0") < changelog.index("## v0.1.0")
    assert "Compared with v0.1.0:" in changelog
    assert "| count: queries | 5 | 7 | +2 (+40.0%) |" in changelog
    assert "| position tag: end | 2 | 4 | +2 (+100.0%) |" in changelog
    assert "| count: docs | 4 | 4 | = |" in changelog
    assert "position tag: middle" not in changelog  # unchanged figures are left out
    assert "plots/position_by_length.png" not in repo.commits[1]["files"]


def test_a_tag_that_exists_is_refused_before_uploading(hub, folder):
    push(folder, REPO, tag="v0.1.0", console=quiet())
    with pytest.raises(PushError, match="already has a tag v0.1.0"):
        push(folder, REPO, tag="v0.1.0", console=quiet())
    assert len(hub.repos[REPO].commits) == 1


def test_failed_upload_publishes_nothing_and_says_what_to_do(hub, folder):
    push(folder, REPO, tag="v0.1.0", console=quiet())
    hub.fail_commits = True
    with pytest.raises(PushError) as err:
        push(folder, REPO, tag="v0.2.0", console=quiet())
    message = str(err.value)
    assert "Nothing was published" in message and "tag v0.2.0 was not created" in message
    assert "run the same command again" in message
    repo = hub.repos[REPO]
    assert list(repo.tags) == ["v0.1.0"] and len(repo.commits) == 1


def test_dry_run_prints_the_plan_and_touches_nothing(hub, folder):
    app = typer.Typer()
    app.command()(push_command)
    result = CliRunner().invoke(app, [str(folder), "--repo", REPO, "--tag", "v1.0.0", "--dry-run"])
    assert result.exit_code == 0, result.output
    for path in EXPECTED:
        assert f"add     {path}" in result.output
    assert "will be created" in result.output and "nothing was uploaded" in result.output
    assert hub.repos == {}
    assert all(method == "GET" for method, _ in hub.requests)


def test_cli_reports_a_failed_push_without_a_traceback(hub, folder):
    hub.fail_commits = True
    app = typer.Typer()
    app.command()(push_command)
    result = CliRunner().invoke(app, [str(folder), "--repo", REPO, "--tag", "v1.0.0"])
    assert result.exit_code == 1
    assert "push failed" in result.output and "Traceback" not in result.output
    bad = CliRunner().invoke(app, [str(folder), "--repo", "no-slash", "--tag", "1.0"])
    assert bad.exit_code == 2 and "org/name" in bad.output


def test_no_token_means_no_push(hub, folder, monkeypatch):
    monkeypatch.delenv("HF_TOKEN")
    monkeypatch.setenv("HF_HOME", str(folder.parent / "empty_hf_home"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_TOKEN_PATH", str(folder.parent / "none"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_STORED_TOKENS_PATH", str(folder.parent / "none2"))
    with pytest.raises(PushError, match="no Hugging Face token"):
        push(folder, REPO, tag="v0.1.0", console=quiet())
    assert hub.requests == []


def test_a_mock_built_folder_is_refused_unless_allowed(hub, tmp_path):
    mock_stats = {**mini_run_stats(), "mock_llm": True}
    folder = write_beir(mini_bench(), tmp_path / "mock", stats=mock_stats)
    publish_outputs(mini_bench(), folder, mock_stats, None)
    card = folder / "README.md"
    assert "Built with the mock LLM" in card.read_text(encoding="utf-8")
    card.write_text(card.read_text(encoding="utf-8").replace("license: unknown", "license: mit", 1), encoding="utf-8")
    with pytest.raises(PushError, match="mock LLM"):
        push(folder, REPO, console=quiet())
    app = typer.Typer()
    app.command()(push_command)
    refused = CliRunner().invoke(app, [str(folder), "--repo", REPO, "--dry-run"])
    assert refused.exit_code == 2 and "--allow-mock" in refused.output
    assert hub.requests == []

    forced = CliRunner().invoke(app, [str(folder), "--repo", REPO, "--allow-mock"])
    assert forced.exit_code == 0, forced.output
    assert json.loads(hub.repos[REPO].commits[0]["files"]["stats.json"])["mock_llm"] is True
