"""`build-bench eval` on a depth_grid build: the cells' tables, the heatmap and the card."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from builder.evaluation.intervals import BootstrapSettings


def eval_grid(folder: Path, retrievers: list[str], defaults: dict, out: Path | None, cache_dir: Path | None,
              batch_size: int, bootstrap: BootstrapSettings, json_out: bool, err: Console, console: Console) -> None:
    """A depth_grid build: one retrieval task per cell (builder/evaluation/grid.py)."""
    from builder.evaluation.data import EvalError
    from builder.evaluation.grid import check_grid, evaluate_grid, plot_grid, print_grid, update_grid_card
    from builder.evaluation.report import write_json
    from builder.evaluation.rerankers import reranker_factories
    from builder.evaluation.retrievers import parse_spec

    try:
        specs = [parse_spec(text, defaults) for text in retrievers]
        check_grid(folder)
        factories = reranker_factories(None, [s.reranker for s in specs if s.reranker])
        report = evaluate_grid(folder, specs, cache_dir or folder / ".eval_cache", batch_size, factories,
                               log=lambda line: err.print(line, highlight=False), bootstrap=bootstrap)
    except EvalError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(2) from None
    out_dir = out or folder / "eval"
    path = write_json(report, out_dir)
    picture = plot_grid(report, out_dir)
    if out_dir.resolve() == (folder / "eval").resolve() and update_grid_card(
            folder, report, picture.resolve().relative_to(folder.resolve()).as_posix()):
        err.print(f"put the grid's table and heatmap into the data card {escape(str(folder / 'README.md'))}",
                  highlight=False)
    if json_out:
        typer.echo(json.dumps(report, indent=2))
    else:
        print_grid(console, report)
        console.print(f"wrote {path} and {picture}")
