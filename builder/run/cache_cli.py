"""`build-bench cache`: what a run folder's LLM cache holds, and clearing part of it.

Ready to register on the typer app: `app.command("cache")(cache_command)`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from builder.backends.llm.cache_admin import (
    ANY_FAILURE,
    FAILURE_KINDS,
    CacheAdminError,
    Count,
    Selection,
    cache_path,
    clear,
    count,
)
from builder.consoles import console_for
from builder.run.locks import LockBusy, holding_run_folders

if TYPE_CHECKING:
    from rich.console import Console

_UNRECORDED = "(not recorded)"  # answers cached before the cache kept model and stage


def cache_command(
    run_dir: Annotated[Path, typer.Argument(help="Run folder holding the cache (the build's --run-dir).")] = Path(
        "runs"
    ),
    model: Annotated[str | None, typer.Option("--model", help="Clear the answers of this model.")] = None,
    stage: Annotated[
        str | None,
        typer.Option(
            "--stage", help="Clear the answers asked by this stage (a name, or a label such as 02_generate_queries)."
        ),
    ] = None,
    failed: Annotated[
        str | None,
        typer.Option(
            "--failed", help=f"Clear the answers a stage rejected: {', '.join(FAILURE_KINDS)} or {ANY_FAILURE}."
        ),
    ] = None,
    everything: Annotated[bool, typer.Option("--all", help="Clear every answer.")] = False,
) -> None:
    """Show what the LLM answer cache holds per model, stage and failure, or clear part of it.

    With --model, --stage or --failed (together: all must match), or --all, the answers
    selected are removed and listed; nothing else in the run folder is touched.
    """
    out, err = console_for(), console_for(stderr=True)
    selection = Selection(model, stage, failed)
    try:
        path = cache_path(run_dir)
        if everything or selection != Selection():
            # A build holding a run folder reads and writes this cache (and ships the
            # answers it used at the end): clearing under it would leave its output short.
            with holding_run_folders(run_dir, "wait for that build to finish, then clear the cache"):
                removed = clear(path, selection)
            _print_counts(out, removed, f"removed from {path}", "answers removed")
            return
        _print_counts(out, count(path), f"LLM cache {path}", "answers")
    except (CacheAdminError, LockBusy) as error:
        err.print(f"error: {error}", markup=False, highlight=False)
        raise typer.Exit(2) from None


def _print_counts(console: Console, counts: list[Count], title: str, total: str) -> None:
    from rich.markup import escape
    from rich.table import Table

    if not counts:
        console.print(f"{title}: no answers", markup=False, highlight=False)
        return
    table = Table(title=escape(title), title_justify="left")
    for column in ("model", "stage", "answers", "failed", "servers"):
        table.add_column(column, justify="right" if column == "answers" else "left")
    for c in counts:
        cells = (
            c.model or _UNRECORDED,
            c.stage or _UNRECORDED,
            str(c.answers),
            c.failure or "-",
            c.servers or ("-" if c.model else _UNRECORDED),
        )  # "-": an in-process engine
        table.add_row(*map(escape, cells))
    console.print(table)
    console.print(f"{sum(c.answers for c in counts)} {total}", highlight=False)
