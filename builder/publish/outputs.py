"""Everything a build leaves beside its BEIR files: stats.json, plots, parquet configs, card.

`publish_outputs` runs at the end of a build, with the recipe at hand. `publish_folder`
redoes the same for an existing folder (`build-bench stats`, or a push of a folder
that has no card yet); without the recipe, the card leaves out the recipe and the
stage parameters.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.io.built_folder import CARD_FILE, STATS_FILE, BuiltFolder
from builder.publish.stats import RunStats, compute_stats, stage_list
from builder.util.atomic import write_text_atomic

if TYPE_CHECKING:
    from builder.bench import Bench
    from builder.recipe.model import LoadedRecipe


@dataclass
class Published:
    stats: dict[str, Any]
    plots: dict[str, Any]
    configs: list[str]


def stats_document(bench: Bench, run_stats: RunStats, recipe_name: str | None) -> dict[str, Any]:
    """stats.json: the computed figures plus the run's per-stage records they came from,
    and the pinned inputs when the run summary has them."""
    records = [r.to_json() for r in stage_list(run_stats)]
    mock = {"mock_llm": True} if built_with_mock(run_stats) else {}
    inputs = run_stats.get("inputs") if isinstance(run_stats, Mapping) else None
    # The digest of the shipped LLM answers, which `--from` checks the file against.
    answers = run_stats.get("llm_answers") if isinstance(run_stats, Mapping) else None
    limit = run_stats.get("limit") if isinstance(run_stats, Mapping) else None
    # The run's budget, when it had one: a build it stopped is marked incomplete.
    budget = run_stats.get("budget") if isinstance(run_stats, Mapping) else None
    return {
        "recipe": recipe_name,
        **mock,
        **({"limit": limit} if limit is not None else {}),
        **({"budget": budget} if budget else {}),
        **compute_stats(bench, run_stats),
        "stages": records,
        **({"inputs": inputs} if inputs else {}),
        **({"llm_answers": answers} if answers else {}),
    }


def built_with_mock(run_stats: RunStats) -> bool:
    """Whether the run's LLM answers came from the mock LLM (`build-bench RECIPE --mock-llm`)."""
    return isinstance(run_stats, Mapping) and run_stats.get("mock_llm") is True


def write_stats(
    bench: Bench, out_dir: Path, run_stats: RunStats, recipe_name: str | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """stats.json and the plots; returns (stats, plot report)."""
    from builder.publish.plots import write_plots

    stats = stats_document(bench, run_stats, recipe_name)
    write_text_atomic(Path(out_dir) / STATS_FILE, json.dumps(stats, indent=2, ensure_ascii=False, default=str))
    return stats, write_plots(stats, Path(out_dir))


def publish_outputs(bench: Bench, out_dir: Path, run_stats: RunStats, loaded_recipe: LoadedRecipe | None) -> Published:
    """Write stats.json, plots/, the MTEB parquet configs and README.md into `out_dir`."""
    from builder.publish.card import card_context, render_card
    from builder.publish.eval_context import folder_evaluation
    from builder.publish.layout import write_hub_layout
    from builder.publish.subsets import subset_configs
    from builder.recipe.sections import card_license

    out_dir = Path(out_dir)
    name = loaded_recipe.recipe.name if loaded_recipe else _recipe_name(run_stats)
    if loaded_recipe is not None:
        from builder.publish.inputs import pinned_inputs

        kept = dict(run_stats) if isinstance(run_stats, Mapping) else {}  # e.g. the mock_llm mark
        run_stats = {
            **kept,
            "recipe": name,
            "stages": [r.to_json() for r in stage_list(run_stats)],
            "inputs": pinned_inputs(loaded_recipe, stage_list(run_stats), kept.get("limit"), built_with_mock(kept)),
        }
    stats, plots = write_stats(bench, out_dir, run_stats, name)
    layout = write_hub_layout(bench, out_dir)
    layout.configs += subset_configs(out_dir)
    license = card_license(loaded_recipe.recipe if loaded_recipe else None)
    evaluation = folder_evaluation(out_dir)  # a card rewritten after `build-bench eval` keeps its figures
    context = card_context(stats, stage_list(run_stats), layout, plots, loaded_recipe, license, evaluation)
    write_text_atomic(out_dir / CARD_FILE, render_card(context))
    return Published(stats=stats, plots=plots, configs=[c["config_name"] for c in layout.configs])


def _recipe_name(run_stats: RunStats) -> str | None:
    return run_stats.get("recipe") if isinstance(run_stats, dict) else None


def read_run_stats(folder: Path) -> dict[str, Any]:
    """The run summary kept in a folder's stats.json (empty when there is none)."""
    path = Path(folder) / STATS_FILE
    if not path.exists():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    mock = {"mock_llm": True} if data.get("mock_llm") is True else {}
    answers = {"llm_answers": data["llm_answers"]} if data.get("llm_answers") else {}
    limit = {"limit": data["limit"]} if data.get("limit") is not None else {}
    budget = {"budget": data["budget"]} if data.get("budget") else {}
    return {
        "recipe": data.get("recipe"),
        **mock,
        **limit,
        **budget,
        "stages": data.get("stages", []),
        "inputs": data.get("inputs"),
        **answers,
    }


def refresh_stats(folder: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Recompute stats.json and the plots of a folder written by `write_beir`."""
    run = read_run_stats(folder)
    return write_stats(BuiltFolder.open(Path(folder)).read_bench(), Path(folder), run, run.get("recipe"))


def publish_folder(folder: Path) -> Published:
    """Everything `publish_outputs` writes, for a folder built without it (no recipe at hand)."""
    folder = Path(folder)
    return publish_outputs(BuiltFolder.open(folder).read_bench(), folder, read_run_stats(folder), None)
