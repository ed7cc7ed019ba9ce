"""What the depth grid adds outside its stages: a step's padding and chance in the data
card, `eval` of a grid (one retrieval task per cell, a table and heatmap per retriever,
put into the card) and MTEB's shape of a grid (one split per length, one subset per depth)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.families import EvalRequest, FamilyHooks, MtebPart, MtebShape, register
from builder.io.built_folder import GRID, BuiltFolder
from builder.stages.grid.card import padding_fields, update_grid_card
from builder.stages.grid.cells import depth_label

if TYPE_CHECKING:
    from rich.console import Console

    from builder.evaluation.cli import EvalOutcome

FAMILY = "grid"
_SPLIT = "test"  # MTEB's evaluation split; a grid's is `test_<length>`


def evaluate(request: EvalRequest) -> EvalOutcome:
    """A depth_grid build: one retrieval task per cell (builder/evaluation/grid.py)."""
    import typer
    from rich.markup import escape

    from builder.evaluation.cli import EvalOutcome
    from builder.evaluation.data import EvalError
    from builder.evaluation.grid import check_grid, evaluate_grid, plot_grid
    from builder.evaluation.report import write_json
    from builder.evaluation.rerankers import reranker_factories
    from builder.evaluation.retrievers import parse_spec

    folder, err = request.folder, request.err
    try:
        specs = [parse_spec(text, request.defaults) for text in request.retrievers]
        check_grid(folder)
        factories = reranker_factories(None, [s.reranker for s in specs if s.reranker])
        report = evaluate_grid(
            folder,
            specs,
            request.cache_dir or folder / ".eval_cache",
            request.batch_size,
            factories,
            log=lambda line: err.print(line, highlight=False),
            bootstrap=request.bootstrap,
        )
    except EvalError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(2) from None
    out_dir = request.out or BuiltFolder.open(folder).eval_dir
    path = write_json(report, out_dir)
    picture = plot_grid(report, out_dir)
    return EvalOutcome(folder, out_dir, report, path, picture, family=FAMILY)


def show(outcome: EvalOutcome, json_out: bool, console: Console) -> None:
    """The grid's tables (or eval.json on stdout with `json_out`) and what was written."""
    import typer

    if json_out:
        typer.echo(json.dumps(outcome.report, indent=2))
    else:
        from builder.evaluation.grid import print_grid

        print_grid(console, outcome.report)
        console.print(f"wrote {outcome.path} and {outcome.picture}")


def into_card(folder: Path, report: dict[str, Any], picture: str) -> str | None:
    card = update_grid_card(folder, report, picture)
    return None if card is None else f"put the grid's table and heatmap into the data card {card}"


def mteb_shape(folder: BuiltFolder) -> MtebShape:
    """One split per length, one subset per depth; a cell's tables are its settings/
    folder, its Hub configs `<cell>-*` (each cell is a domain of the root layout)."""
    cells = folder.grid_cells()
    parts = [
        MtebPart(
            depth_label(depth),
            f"{_SPLIT}_{length}",
            cell if cells.height > 1 else None,
            folder.setting(cell).root,
        )
        for cell, depth, length in cells.iter_rows()
    ]
    return MtebShape("Retrieval", sorted(parts, key=lambda p: (int(p.split.split("_")[1]), p.subset)))


register(
    FamilyHooks(
        family=FAMILY,
        kind=GRID,
        card_step=padding_fields,
        card_template=Path(__file__).with_name("grid_card.md.j2"),
        evaluate=evaluate,
        show_eval=show,
        eval_into_card=into_card,
        mteb_shape=mteb_shape,
    )
)
