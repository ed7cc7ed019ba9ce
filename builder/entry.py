"""The `build-bench` console entry point: the stop handlers go in before anything slow.

Importing the command line (typer, rich, pydantic, polars, the stages) takes seconds on a
busy machine; a SIGINT or SIGTERM in that time must end the process with the same line and
exit status as one sent later. So this module imports only the stop handling, installs it,
and only then imports `builder.cli`.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    from builder.run import stopping

    try:
        with stopping.stop_on_signals():
            from builder.cli import run

            run(argv)
    except stopping.Stopped as stop:
        stopping.say_stopped(stop.signum)
        sys.exit(stop.exit_code)


if __name__ == "__main__":
    main()
