"""Check a benchmark folder's parquet tables before anything reads them: each file is
there, parses as parquet and holds the columns the reader needs. A folder copied
half-way, a table rewritten by another tool or plain garbage then gives one line naming
the file, not a traceback from deep inside polars or a comparison that is silently wrong
(a queries table whose id column was renamed would otherwise read as "no queries")."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import polars as pl

from builder.io.built_folder import REQUIRED_COLUMNS, TABLE_FILES
from builder.io.sources import SourceError

# What every reader of a built folder (`write_beir`'s root tables) needs.
BUILT_TABLES: dict[str, tuple[str, ...]] = {TABLE_FILES[t]: columns for t, columns in REQUIRED_COLUMNS.items()}


class TableError(SourceError):
    """A table that cannot be used as it is; the message names the file and what to do."""


def table_columns(path: Path, required: Iterable[str]) -> list[str]:
    """The column names of the parquet file `path`, which must hold every `required` one."""
    if not path.is_file():
        raise TableError(f"{path} is missing; restore it, or rebuild the folder")
    try:
        names = list(pl.read_parquet_schema(path))
    except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise TableError(
            f"{path} is not a readable parquet file (truncated or damaged: {detail}); restore it, or rebuild the folder"
        ) from None
    missing = [c for c in required if c not in names]
    if missing:
        raise TableError(
            f"{path} lacks the column{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
            f"(it has {', '.join(names[:8]) or 'none'}{', ...' if len(names) > 8 else ''}); "
            "it was renamed or written by another tool: rebuild the folder"
        )
    return names


def check_built_folder(folder: Path) -> None:
    """TableError unless every root table of a built folder is readable and complete."""
    for name, required in BUILT_TABLES.items():
        table_columns(Path(folder) / name, required)


def read_table(path: Path, columns: list[str] | None = None) -> pl.DataFrame:
    """`pl.read_parquet`, with a damaged body (its footer intact) reported as TableError."""
    try:
        return pl.read_parquet(path, columns=columns)
    except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise TableError(f"{path} cannot be read (damaged: {detail}); restore it, or rebuild the folder") from None
