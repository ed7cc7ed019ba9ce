"""The load step's progress: documents read, kept and dropped, with a rate."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.progress import Progress, TextColumn, TimeElapsedColumn

LOAD_LABEL = "00_load"


class LoadMeter:
    """Documents read, kept and dropped, with a rate: live on a terminal, otherwise a line
    every `every_s` seconds; a summary line at the end either way."""

    def __init__(self, console: Console, every_s: float = 30.0) -> None:
        self.console = console
        self.every_s = every_s
        self.kept = self.dropped = 0
        self._progress: Progress | None = None
        self._task: Any = None

    def __enter__(self) -> LoadMeter:
        self._t0 = self._last = time.perf_counter()
        if self.console.is_terminal:
            text = (
                f"[bold]{LOAD_LABEL}[/] read {{task.completed:,.0f}} · kept {{task.fields[kept]:,}}"
                " · dropped {task.fields[dropped]:,} · {task.fields[rate]:,.0f} docs/s"
            )
            self._progress = Progress(TextColumn(text), TimeElapsedColumn(), console=self.console, transient=True)
            self._progress.start()
            self._task = self._progress.add_task("load", total=None, kept=0, dropped=0, rate=0.0)
        return self

    def add(self, kept: int = 0, dropped: int = 0) -> None:
        self.kept += kept
        self.dropped += dropped
        now = time.perf_counter()
        if self._progress is not None:
            self._progress.update(
                self._task,
                completed=self.kept + self.dropped,
                kept=self.kept,
                dropped=self.dropped,
                rate=self._rate(now),
            )
        elif now - self._last >= self.every_s:
            self.console.print(self.line(now), highlight=False)
            self._last = now

    def _rate(self, now: float) -> float:
        return (self.kept + self.dropped) / max(now - self._t0, 1e-9)

    def line(self, now: float | None = None) -> str:
        now = time.perf_counter() if now is None else now
        return (
            f"{LOAD_LABEL}: read {self.kept + self.dropped:,}, kept {self.kept:,}, dropped "
            f"{self.dropped:,} ({self._rate(now):,.0f} docs/s)"
        )

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if self._progress is not None:
            self._progress.stop()
        if exc_type is None:
            self.console.print(self.line(), highlight=False)
