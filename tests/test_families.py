"""A stage family plugs itself in: the grid and ColDeR's probes register what they add to
the card, `eval` and the MTEB export, and the card, `eval` and the export name neither."""

from __future__ import annotations

import ast
from pathlib import Path

from builder.families import card_step_fields, families, family_for, family_named
from builder.io.built_folder import BENCHMARK, GRID, PROBES

BUILDER = Path(__file__).resolve().parents[1] / "builder"
# The modules that ask the registry instead of naming a family.
ASKERS = [
    *sorted((BUILDER / "publish").glob("*.py")),
    *sorted((BUILDER / "mteb_export").glob("*.py")),
    BUILDER / "cli" / "eval_command.py",
    BUILDER / "evaluation" / "cli.py",
    BUILDER / "evaluation" / "evaluate.py",
    BUILDER / "evaluation" / "report.py",
]
FAMILY_CODE = ("builder.stages.grid", "builder.stages.colder", "builder.evaluation.grid", "builder.evaluation.probes")


def test_the_grid_and_the_probes_register_their_kinds():
    assert {"grid", "colder"} <= {f.family for f in families()}
    assert family_for(GRID) is family_named("grid")
    assert family_for(PROBES) is family_named("colder")
    assert family_for(BENCHMARK) is None


def test_a_step_without_grid_figures_gets_the_grids_fields_empty():
    assert card_step_fields({}) == {"padding_judge": "", "padding_excluded": "", "grid_cells": ""}
    fields = card_step_fields({"grid": {"judge": "bm25", "padding_excluded": {"answers": 2, "near": 5}}})
    assert fields == {"padding_judge": "bm25", "padding_excluded": "near 5, answers 2", "grid_cells": ""}


def test_the_card_eval_and_the_export_import_no_familys_code():
    found = []
    for path in ASKERS:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
            found += [f"{path.relative_to(BUILDER)}: {n}" for n in names if n.startswith(FAMILY_CODE)]
    assert not found, found
