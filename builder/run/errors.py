"""Turn expected failures (missing files, offline hubs, missing extras) into one clear line."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

import typer
from rich.console import Console

from builder.run.stopping import stop_line


def _kinds() -> tuple[tuple[type[BaseException], ...], ...]:
    """(refused, expected, internal) exception classes. Imported when an exception arrives:
    their modules pull in polars and the clients, which a command that ends well (an idle
    rerun above all) should not pay for."""
    from builder.backends.llm import BackendUnavailable
    from builder.backends.llm.prompt_templates import PromptError
    from builder.backends.tokenizers import TokenizerLoadError
    from builder.executors import ExecutorUnavailable
    from builder.io.sources import SourceError
    from builder.publish.hub_plan import PushError
    from builder.recipe.yaml_text import RecipeError
    from builder.run.disk_full import DiskFull
    from builder.run.grow import UnverifiedAnswers
    from builder.run.invariants import InvariantError
    from builder.run.locks import LockBusy
    from builder.run.outcome import EmptyResult
    from builder.run.outdir import OutDirError

    expected = (
        SourceError,
        TokenizerLoadError,
        BackendUnavailable,
        PromptError,
        PushError,
        OSError,
        EmptyResult,
        ExecutorUnavailable,
        DiskFull,
    )
    # Refused before any work: the command line points at something it must not touch or trust.
    refused = (OutDirError, LockBusy, UnverifiedAnswers, RecipeError)
    return refused, expected, (InvariantError,)


@contextmanager
def friendly_errors(console: Console) -> Iterator[None]:
    try:
        yield
    except KeyboardInterrupt:  # where no stop_on_signals handler is installed (in-process callers)
        console.print(f"[yellow]{stop_line(signal.SIGINT)}[/]", highlight=False)
        raise typer.Exit(128 + signal.SIGINT) from None
    except Exception as exc:
        from builder.backends.llm.batch_book import BatchPending

        if isinstance(exc, BatchPending):  # not a failure: the work waits at the provider
            console.print(f"[yellow]{exc}[/]", highlight=False)
            raise typer.Exit(exc.exit_code) from None
        refused, expected, internal = _kinds()
        if isinstance(exc, refused):
            console.print(f"[red]error:[/] {exc}", highlight=False)
            raise typer.Exit(2) from None
        if isinstance(exc, expected):
            console.print(f"[red]error:[/] {exc}", highlight=False)
            raise typer.Exit(1) from None
        if isinstance(exc, internal):
            console.print(f"[red]internal error (please report):[/] {exc}", highlight=False)
            raise typer.Exit(3) from None
        raise
