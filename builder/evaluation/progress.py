"""Progress bars for the long parts of `eval`: encoding documents and queries, and
retrieval. Drawn on stderr; a console that is not a terminal gets nothing (tests, pipes)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

T = TypeVar("T")
_console: Console | None = None


def set_console(console: Console | None) -> None:
    """Where the bars go (the CLI's stderr console); None restores the default."""
    global _console
    _console = console


@contextmanager
def task(label: str, total: int) -> Iterator[Callable[[int], None]]:
    """`with task("encoding documents", n) as advance: ... advance(k)`."""
    console = _console or Console(stderr=True)
    bar = Progress(
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )
    with bar:
        handle = bar.add_task(label, total=total)
        yield lambda n: bar.advance(handle, n)


def in_batches(items: Sequence[T], size: int, label: str) -> Iterator[Sequence[T]]:
    """`items` in slices of `size`, advancing a bar named `label` after each."""
    with task(label, len(items)) as advance:
        for start in range(0, len(items), size):
            chunk = items[start : start + size]
            yield chunk
            advance(len(chunk))
