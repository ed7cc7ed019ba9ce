"""The card's licence: card.license, else what every source declares; push refuses none."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from builder.publish.cli import push_command
from builder.publish.hub import PushError, push
from builder.recipe.model import parse_recipe
from builder.recipe.sections import card_license
from builder.recipe.yaml_text import RecipeError
from tests.conftest import FIXTURES
from tests.publish.conftest import mini_bench, mini_run_stats

SOURCES = "sources:\n  - {type: python_docs, license: LA}\n  - {type: python_docs, id_prefix: b, license: LB}\n"
STAGES = "stages:\n  - sample_by_length: {n_docs: 1}\n"


def _recipe(write_recipe, la: str = "mit", lb: str = "mit", extra: str = "") -> object:
    sources = SOURCES.replace("LA", la).replace("LB", lb)
    return parse_recipe(write_recipe(f"name: lic\n{sources}{extra}{STAGES}")).recipe


def test_the_sources_licences_become_the_cards(write_recipe):
    assert card_license(_recipe(write_recipe)) == {"license": "mit"}
    assert card_license(_recipe(write_recipe, lb="cc-by-4.0")) == {"license": ["mit", "cc-by-4.0"]}


def test_card_license_wins_and_other_needs_a_name(write_recipe):
    extra = "card: {license: other, license_name: psf-2.0, license_link: 'https://docs.python.org/3/license.html'}\n"
    assert card_license(_recipe(write_recipe, extra=extra)) == {
        "license": "other",
        "license_name": "psf-2.0",
        "license_link": "https://docs.python.org/3/license.html",
    }
    with pytest.raises(RecipeError, match="license: other needs license_name"):
        _recipe(write_recipe, extra="card: {license: other}\n")


def test_a_source_without_a_licence_leaves_it_unknown(write_recipe):
    path = write_recipe(
        f"name: lic\nsources: [{{type: python_docs, license: mit}}, {{type: python_docs, id_prefix: b}}]\n{STAGES}"
    )
    assert card_license(parse_recipe(path).recipe) == {"license": "unknown"}


def test_push_without_a_licence_is_refused_at_the_recipe_key(write_recipe):
    path = write_recipe(f"name: lic\nsources: [{{type: python_docs}}]\npush: {{repo: org/bench}}\n{STAGES}")
    with pytest.raises(RecipeError) as caught:
        parse_recipe(path)
    (problem,) = caught.value.problems
    assert problem.line == 3 and "set card.license" in problem.message
    old = write_recipe(f"name: lic\nsources: [{{type: python_docs}}]\npush: {{repo: o/b, license: mit}}\n{STAGES}")
    with pytest.raises(RecipeError, match="under card.license now"):
        parse_recipe(old)


def test_a_stage_that_reads_data_declares_its_licence(write_recipe):
    squad = FIXTURES / "qa" / "tiny_squad.json"
    path = write_recipe(f"name: lic\nstages:\n  - from_qa: {{path: '{squad}', license: cc-by-sa-4.0}}\n")
    assert card_license(parse_recipe(path).recipe) == {"license": "cc-by-sa-4.0"}


def test_push_of_a_card_without_a_licence_fails_clearly(tmp_path):
    from builder.publish.beir import write_beir
    from builder.publish.outputs import publish_outputs

    folder = write_beir(mini_bench(), tmp_path / "mini", stats=mini_run_stats())
    publish_outputs(mini_bench(), folder, mini_run_stats(), None)
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert "license: unknown" in card and "No licence is declared" in card
    with pytest.raises(PushError, match="declares no licence .*set card.license in the recipe"):
        push(
            Path(shutil.copytree(folder, tmp_path / "copy")), "org/bench", console=Console(file=open("/dev/null", "w"))
        )  # noqa: SIM115
    app = typer.Typer()
    app.command()(push_command)
    result = CliRunner().invoke(app, [str(folder), "--repo", "org/bench"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "declares no licence (license: unknown); set card.license" in " ".join(result.output.split())
