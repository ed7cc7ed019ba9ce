"""Rich consoles for the command line that stay readable in pipes, files and CI logs.

Without a terminal rich assumes 80 columns (or $COLUMNS) and folds table cells inside
words or cuts numbers short to fit. Nobody reads a log at a fixed width, so there the
console is as wide as its widest line: tables print whole and text is never wrapped.
"""

from __future__ import annotations

from rich.console import Console

# Wide enough for any table we print; tables only take the width their cells need.
PIPE_WIDTH = 10_000


def console_for(stderr: bool = False) -> Console:
    """A console on stdout (or stderr): the terminal's width on a terminal, unbounded elsewhere."""
    console = Console(stderr=stderr)
    if not console.is_terminal:
        console = Console(stderr=stderr, width=PIPE_WIDTH, soft_wrap=True)
    return console
