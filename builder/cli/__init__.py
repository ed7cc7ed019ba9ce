"""The `build-bench` command line (its commands are in `builder.cli.commands`).

The entry point, `main`, installs the SIGINT/SIGTERM handlers before it imports the commands
(typer, rich, pydantic, the stages: seconds on a busy machine), so that a signal in the first
instants ends the process with the same line and exit status as a later one. Importing this
package is quick; `app` and the commands' other names are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import Any


def main(argv: list[str] | None = None) -> None:
    from builder.run.stopping import run_stoppable

    run_stoppable(lambda: _commands().run(argv))


def _commands() -> Any:
    # import_module, not `from builder.cli import commands`: that would ask __getattr__ first.
    return importlib.import_module("builder.cli.commands")


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_commands(), name)
