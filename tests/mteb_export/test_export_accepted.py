"""Exports MTEB accepts and reads as they are: a licence MTEB's TaskMetadata would refuse is
refused (or given in MTEB's spelling), a mock-built folder is refused as push refuses it
(or exported with a warning when forced), and `--local` writes a task that loads the folder
itself, with no hand edits."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

import pytest
from typer.testing import CliRunner

from builder.cli import app
from builder.mteb_export.licenses import KNOWN_LICENSES, installed_licenses
from tests.mteb_export.conftest import FLAGS

runner = CliRunner()
LOCAL_FLAGS = [
    "--reference",
    "https://example.org/quickstart",
    "--domain",
    "Programming",
    "--date",
    "2001-01-01,2025-10-01",
    "--subtype",
    "Question answering",
    "--sample-creation",
    "created",
]


def test_a_licence_mteb_refuses_is_refused_naming_what_mteb_takes(quickstart, tmp_path):
    result = runner.invoke(
        app, ["export-mteb", str(quickstart), *FLAGS, "--license", "other", "--to", str(tmp_path / "task")]
    )
    assert result.exit_code == 2, result.output
    assert "licence 'other' is not one MTEB's TaskMetadata takes" in result.output
    assert "cc-by-sa-4.0" in result.output and "URL" in result.output
    assert not (tmp_path / "task").exists()


def test_a_licence_in_other_letters_is_written_in_mteb_spelling(quickstart, tmp_path):
    result = runner.invoke(
        app, ["export-mteb", str(quickstart), *FLAGS, "--license", "CC-BY-SA-4.0", "--to", str(tmp_path / "task")]
    )
    assert result.exit_code == 0, result.output
    assert "license='cc-by-sa-4.0'," in (tmp_path / "task" / "quickstart_retrieval.py").read_text()


def test_the_kept_licence_list_is_the_installed_mteb_one():
    theirs = installed_licenses()
    if theirs is None:
        pytest.skip("needs the mteb extra (pip install -e '.[mteb]') to compare the lists")
    assert set(KNOWN_LICENSES) == set(theirs)


def test_a_mock_built_folder_is_refused_unless_forced_and_then_warned_about(tmp_path):
    built = runner.invoke(
        app, ["build", "quickstart", "--mock-llm", "--out", str(tmp_path / "mock"), "--run-dir", str(tmp_path / "runs")]
    )
    assert built.exit_code == 0, built.output
    refused = runner.invoke(app, ["export-mteb", str(tmp_path / "mock"), *FLAGS, "--to", str(tmp_path / "t1")])
    assert refused.exit_code == 2 and "built with the mock LLM" in refused.output and "--allow-mock" in refused.output
    assert not (tmp_path / "t1").exists()
    forced = runner.invoke(
        app, ["export-mteb", str(tmp_path / "mock"), *FLAGS, "--to", str(tmp_path / "t2"), "--allow-mock"]
    )
    assert forced.exit_code == 0, forced.output
    assert "warning:" in forced.output and "mock LLM" in forced.output


def test_local_writes_a_task_that_reads_the_folder_itself(quickstart, tmp_path):
    result = runner.invoke(
        app, ["export-mteb", str(quickstart), "--local", *LOCAL_FLAGS, "--to", str(tmp_path / "task")]
    )
    assert result.exit_code == 0, result.output
    module = (tmp_path / "task" / "quickstart_retrieval.py").read_text()
    assert f"dataset={{'path': {str(quickstart.resolve())!r}, 'revision': 'local'}}," in module


LOAD_SCRIPT = textwrap.dedent("""
    import importlib.util, json, sys
    spec = importlib.util.spec_from_file_location("exported_task", sys.argv[1])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    task = module.QuickstartRetrieval()
    task.load_data()
    print(json.dumps({"filled": task.metadata.is_filled(), "splits": sorted(task.dataset["default"])}))
""")


def test_mteb_loads_a_local_export_without_edits(quickstart, tmp_path, monkeypatch):
    pytest.importorskip("mteb", reason="needs the mteb extra: pip install -e '.[mteb]'")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    moved = shutil.copytree(quickstart, tmp_path / "elsewhere")
    result = runner.invoke(app, ["export-mteb", str(moved), "--local", *LOCAL_FLAGS, "--to", str(tmp_path / "task")])
    assert result.exit_code == 0, result.output
    run = subprocess.run(
        [sys.executable, "-c", LOAD_SCRIPT, str(tmp_path / "task" / "quickstart_retrieval.py")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    loaded = json.loads(run.stdout.strip().splitlines()[-1])
    assert loaded == {"filled": True, "splits": ["test"]}
