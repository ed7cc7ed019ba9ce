"""Rich consoles for the command line that stay readable in pipes, files and CI logs.

Without a terminal rich assumes 80 columns (or $COLUMNS) and folds table cells inside
words or cuts numbers short to fit. Nobody reads a log at a fixed width, so there the
console is as wide as its widest line: tables print whole and text is never wrapped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rich is imported when a console is made: `build-bench --help` needs none
    from rich.console import Console
    from rich.table import Table

# Wide enough for any table we print; tables only take the width their cells need.
PIPE_WIDTH = 10_000


def console_for(stderr: bool = False) -> Console:
    """A console on stdout (or stderr): the terminal's width on a terminal, unbounded elsewhere."""
    from rich.console import Console

    console = Console(stderr=stderr)
    if not console.is_terminal:
        console = Console(stderr=stderr, width=PIPE_WIDTH, soft_wrap=True)
    return console


def fit_columns(table: Table, width: int) -> None:
    """Set each column's width so the table fits `width` with no word broken, when its
    longest words can all fit: rich, narrowing a table, narrows its widest columns first
    and folds whatever word no longer fits. Cells are plain strings; a table whose words
    cannot all fit is left to rich."""
    from rich.cells import cell_len

    columns = table.columns
    least, most = [], []
    for column in columns:
        lines = [line for cell in (column.header, *column.cells) for line in str(cell).splitlines()] or [""]
        least.append(max((cell_len(word) for line in lines for word in line.split()), default=1))
        most.append(max(cell_len(line) for line in lines))
    right, left = table.padding[1], table.padding[3]
    lines = (len(columns) - 1 + (2 if table.show_edge else 0)) if table.box else 0
    chrome = lines + len(columns) * (left + right) - (0 if table.pad_edge else left + right)
    budget = width - chrome
    widths = list(most)
    while sum(widths) > budget:
        slack = [w - m for w, m in zip(widths, least)]
        i = max(range(len(widths)), key=slack.__getitem__)
        if slack[i] <= 0:
            return
        widths[i] -= 1
    for column, w in zip(columns, widths):
        column.width = w
