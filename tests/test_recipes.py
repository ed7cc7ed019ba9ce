"""Every shipped recipe validates; every broken recipe fails with its expected message."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from builder.cli import app
from builder.resources import shipped_recipes
from tests.conftest import FIXTURES

BROKEN = sorted((FIXTURES / "broken_recipes").glob("*.yaml"))
runner = CliRunner()


@pytest.mark.parametrize("recipe", shipped_recipes(), ids=lambda p: p.stem)
def test_shipped_recipe_validates(recipe: Path):
    result = runner.invoke(app, ["validate", str(recipe)])
    assert result.exit_code == 0, result.output
    assert "ok" in result.output


def _expected(path: Path) -> str:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# expect: ")
    return first.removeprefix("# expect: ")


@pytest.mark.parametrize("recipe", BROKEN, ids=lambda p: p.stem)
def test_broken_recipe_names_the_line_and_exits_2(recipe: Path, monkeypatch):
    monkeypatch.delenv("BUILD_BENCH_TEST_UNSET_VAR", raising=False)
    result = runner.invoke(app, ["validate", str(recipe)])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    expected = _expected(recipe)
    if expected[0].isdigit():
        line, _, message = expected.partition(": ")
        assert f"{recipe}:{line}: {message}" in " ".join(result.output.split()), result.output
    else:
        assert expected in result.output


def test_set_overrides_a_stage_param_by_stage_name(tmp_path):
    from builder.recipe.model import parse_recipe
    from builder.resources import find_recipe

    loaded = parse_recipe(find_recipe("quickstart"), ["stages.sample_by_length.n_docs=7", "seed=5"])
    assert loaded.recipe.stage_objects()[0].params.n_docs == 7
    assert loaded.recipe.seed == 5


def test_set_to_a_missing_place_is_a_recipe_error():
    result = runner.invoke(app, ["validate", "quickstart", "--set", "stages.nope.x=1"])
    assert result.exit_code == 2
    assert "no such place" in result.output


def test_env_expansion_with_default(write_recipe, monkeypatch):
    from builder.recipe.model import parse_recipe

    monkeypatch.setenv("BB_TEST_URL", "http://127.0.0.1:1234/v1")
    path = write_recipe(
        "name: t\nsources: [{type: python_docs}]\n"
        "models:\n  gen: {model: '${BB_TEST_MODEL:-tiny}', base_url: '${BB_TEST_URL}'}\n"
        "stages: [{summarize: {llm: gen}}]\n"
    )
    recipe = parse_recipe(path).recipe
    assert recipe.models["gen"].model == "tiny"
    assert recipe.models["gen"].base_url == "http://127.0.0.1:1234/v1"


def test_unknown_recipe_name_exits_2():
    result = runner.invoke(app, ["validate", "no_such_recipe"])
    assert result.exit_code == 2
    assert "no recipe file or shipped recipe named 'no_such_recipe'" in result.output


_PAPERS = ("PosIR", "FineWeb-PosQ", "SQuAD-PosQ", "FarRelevant", "ColDeR")
_SECTION = re.compile(r"§\s?\d|appendix [A-Z]")


def _header(path: Path) -> str:
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("# "))
    return " ".join(lines)


@pytest.mark.parametrize("recipe", shipped_recipes(), ids=lambda p: p.stem)
def test_shipped_recipe_header_names_its_paper_section_and_differences(recipe: Path):
    header = _header(recipe)
    assert any(name in header for name in _PAPERS), f"{recipe.name}: header names no paper"
    assert _SECTION.search(header), f"{recipe.name}: header names no section or appendix of its paper"
    assert "Differs from" in header, f"{recipe.name}: header has no 'Differs from ...' list"
