"""One quickstart build per test session, copied for each test that changes it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from builder.cli import app

FLAGS = [
    "--repo",
    "org/quickstart-posq",
    "--revision",
    "v1.0.0",
    "--domain",
    "Programming",
    "--date",
    "2001-01-01,2025-10-01",
    "--subtype",
    "Question answering",
    "--sample-creation",
    "created",
]


@pytest.fixture(scope="session")
def built_quickstart(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("quickstart")
    result = CliRunner().invoke(
        app, ["build", "quickstart", "--out", str(root / "out"), "--run-dir", str(root / "runs")]
    )
    assert result.exit_code == 0, result.output
    return root / "out"


@pytest.fixture
def quickstart(built_quickstart, tmp_path) -> Path:
    return Path(shutil.copytree(built_quickstart, tmp_path / "out"))
