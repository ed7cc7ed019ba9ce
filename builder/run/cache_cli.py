"""`build-bench cache`: what a run folder's LLM cache holds, and clearing part of it.

Ready to register on the typer app: `app.command("cache")(cache_command)`.
"""

from __future__ import annotations

import time
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
from builder.run.locks import LockBusy, holding_run_folders
from builder.util.consoles import console_for

if TYPE_CHECKING:
    from rich.console import Console

    from builder.backends.llm.batch_book import OpenBatch

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
    cancel_batches: Annotated[
        bool,
        typer.Option(
            "--cancel-batches",
            help="Ask the provider to cancel the open batches of the builds under this folder (see --batch-id).",
        ),
    ] = False,
    batch_id: Annotated[
        str | None, typer.Option("--batch-id", help="With --cancel-batches: cancel only this batch.")
    ] = None,
) -> None:
    """Show what the LLM answer cache holds per model, stage and failure, or clear part of it.

    With --model, --stage or --failed (together: all must match), or --all, the answers
    selected are removed and listed; nothing else in the run folder is touched. The
    provider batches that builds in batch mode left open are listed too, and
    --cancel-batches cancels them (the next build run collects what they finished).
    """
    out, err = console_for(), console_for(stderr=True)
    selection = Selection(model, stage, failed)
    if cancel_batches or batch_id is not None:
        _cancel_batches(out, err, run_dir, batch_id)
        return
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
        _print_batches(out, run_dir)
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


def _open_batches(run_dir: Path) -> list[tuple[Path, OpenBatch]]:
    from builder.backends.llm.batch_book import BatchBook, books_under  # with pydantic: not for --help

    return [(path, batch) for path in books_under(run_dir) for batch in BatchBook(path).open]


def _print_batches(console: Console, run_dir: Path) -> None:
    found = _open_batches(run_dir)
    if not found:
        return
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="open provider batches (run the build again to collect them)", title_justify="left")
    for column in ("batch", "model", "stage", "requests", "last status", "submitted (UTC)", "run folder"):
        table.add_column(column, justify="right" if column == "requests" else "left")
    for path, b in found:
        submitted = time.strftime("%Y-%m-%d %H:%M", time.gmtime(b.submitted_at))
        cells = (b.id, b.model, b.stage or "-", str(len(b.keys)), b.status, submitted, str(path.parent))
        table.add_row(*map(escape, cells))
    console.print(table)


def _cancel_batches(out: Console, err: Console, run_dir: Path, only: str | None) -> None:
    from builder.backends.llm.batch_mode import cancel

    chosen = [(path, b) for path, b in _open_batches(run_dir) if only is None or b.id == only]
    if not chosen:
        err.print(f"error: no open batch{f' {only}' if only else ''} under {run_dir}", markup=False, highlight=False)
        raise typer.Exit(2)
    for path, b in chosen:
        out.print(f"{b.id} ({b.model}, {path.parent}): {cancel(b)}", markup=False, highlight=False)
