"""Progress bars for long stages (rich), silent when output is not a terminal."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


class _Task:
    def __init__(self, progress: Progress | None, task_id: int | None) -> None:
        self._progress = progress
        self._id = task_id

    def advance(self, n: int = 1) -> None:
        if self._progress is not None and self._id is not None:
            self._progress.advance(self._id, n)


class RichProgress:
    def __init__(self, console: Console, stage_label: str) -> None:
        self.console = console
        self.stage_label = stage_label

    @contextmanager
    def task(self, description: str, total: int) -> Iterator[_Task]:
        if not self.console.is_terminal:
            yield _Task(None, None)
            return
        columns = (
            TextColumn(f"[bold]{self.stage_label}[/] {description}"),
            BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
        )
        with Progress(*columns, console=self.console, transient=True) as progress:
            yield _Task(progress, progress.add_task(description, total=total))
