"""Shared fixtures: paths, the shared data folder, and a helper to write recipes."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture
def shared_data() -> Path:
    data = SHARED / "data"
    if not data.is_dir():
        pytest.skip("../shared/data is absent (a fresh clone has no shared datasets)")
    return data


@pytest.fixture
def write_recipe(tmp_path: Path):
    def _write(text: str, name: str = "recipe.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return _write


from builder.testing.openai_server import openai_server_fixture  # noqa: E402

fake_openai = openai_server_fixture()
