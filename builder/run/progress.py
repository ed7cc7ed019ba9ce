"""Progress of long stages: a rich bar on a terminal; piped (a log file, CI), a plain line
with done/total and the rate at least every `interval_s` seconds while a task runs, so a
person reading the log can tell a slow stage from a stuck one."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

# Seconds between piped progress lines; the variable exists so tests need not wait 10 s.
INTERVAL_ENV = "BUILD_BENCH_PROGRESS_INTERVAL_S"
DEFAULT_INTERVAL_S = 10.0


class _Task:
    def __init__(self, progress: Progress | None, task_id: TaskID | None) -> None:
        self._progress = progress
        self._id = task_id

    def advance(self, n: int = 1) -> None:
        if self._progress is not None and self._id is not None:
            self._progress.advance(self._id, n)


class _PipedTask(_Task):
    """Counts what is done; a timer thread prints a line every interval until closed."""

    def __init__(
        self, console: Console, label: str, total: int, interval_s: float, meter: Callable[[], str] | None = None
    ) -> None:
        super().__init__(None, None)
        self._console, self._label, self._total, self._meter = console, label, total, meter
        self._done = 0
        self._start = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._report_until_closed, args=(interval_s,), daemon=True)
        self._thread.start()

    def advance(self, n: int = 1) -> None:
        self._done += n

    def line(self) -> str:
        elapsed = max(time.monotonic() - self._start, 1e-9)
        rate = self._done / elapsed
        left = (
            f", about {(self._total - self._done) / rate:.0f} s left" if rate > 0 and self._done < self._total else ""
        )
        spent = f"; {self._meter()}" if self._meter is not None else ""
        return f"{self._label}: {self._done}/{self._total} after {elapsed:.0f} s ({rate:.1f}/s{left}){spent}"

    def _report_until_closed(self, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            self._console.print(self.line(), markup=False, highlight=False)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def _interval_s() -> float:
    try:
        return max(0.01, float(os.environ.get(INTERVAL_ENV, DEFAULT_INTERVAL_S)))
    except ValueError:
        return DEFAULT_INTERVAL_S


class _MeterColumn(ProgressColumn):
    def __init__(self, meter: Callable[[], str]) -> None:
        super().__init__()
        self._meter = meter

    def render(self, task: Task) -> Text:
        return Text(self._meter(), style="dim")


class RichProgress:
    """`meter`, when given, says what the stage has spent on LLMs so far (see spend_meter)."""

    def __init__(
        self,
        console: Console,
        stage_label: str,
        interval_s: float | None = None,
        meter: Callable[[], str] | None = None,
    ) -> None:
        self.console = console
        self.stage_label = stage_label
        self.interval_s = interval_s if interval_s is not None else _interval_s()
        self.meter = meter

    @contextmanager
    def task(self, description: str, total: int) -> Iterator[_Task]:
        if not self.console.is_terminal:
            piped = _PipedTask(self.console, f"{self.stage_label} {description}", total, self.interval_s, self.meter)
            try:
                yield piped
            finally:
                piped.close()
            return
        columns = (
            TextColumn(f"[bold]{self.stage_label}[/] {description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            *([_MeterColumn(self.meter)] if self.meter is not None else []),
        )
        with Progress(*columns, console=self.console, transient=True) as progress:
            yield _Task(progress, progress.add_task(description, total=total))
